import { defineConfig } from 'vitest/config';

/**
 * `npm test`: every suite but the long ones. Files named `*.long.test.ts` (soak-like and long
 * end-to-end suites) run in `npm run test:long` (vitest.long.config.ts), which CI runs too.
 */
export const LONG_SUITES = 'test/**/*.long.test.ts';

/** What both configurations share. */
export const shared = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  // Integration tests start servers and databases; keep CPU use sane on a 2-core machine.
  pool: 'forks',
  poolOptions: { forks: { maxForks: 2, minForks: 1 } },
} as const;

export default defineConfig({
  test: { ...shared, include: ['test/**/*.test.ts'], exclude: [LONG_SUITES, '**/node_modules/**'] },
});
