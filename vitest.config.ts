import { defineConfig } from 'vitest/config';
import { THREAD_BUNDLES } from './test/thread-bundles.js';

/**
 * `npm test`: every suite but the long ones. Files named `*.long.test.ts` (soak-like and long
 * end-to-end suites) run in `npm run test:long` (vitest.long.config.ts), which CI runs too.
 */
export const LONG_SUITES = 'test/**/*.long.test.ts';

/**
 * The end-to-end suites, looped over the dialects with `splitDialects` (test/support.ts): `npm test`
 * runs them on SQLite, `npm run test:long` on PostgreSQL. What is not looped over the dialects in
 * these files runs in both.
 */
export const SPLIT_SUITES = [
  'analysts-warehouse',
  'audit',
  'audit-canonical',
  'audit-operations',
  'audit-scope',
  'chatbot-choice',
  'chatbot-choice-deletions',
  'early-cursor',
  'files',
  'hostile',
  'kubernetes',
  'lifecycle',
  'metrics-export',
  'misbehaving-server',
  'object-storage',
  'operations',
  'page-pipeline',
  'private-files',
  'real-capture',
  'sealed-sync',
  'serve',
  'serve-real-capture',
  'sync',
  'teams',
  'walks-at-once',
  'write-behind',
].map((name) => `test/${name}.test.ts`);

/** What both configurations share. */
export const shared = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  // Integration tests start servers and databases; keep CPU use sane on a 2-core machine.
  pool: 'forks',
  poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  // Worker threads a test starts load these bundles of src/, made once per run.
  globalSetup: ['test/thread-bundles.ts'],
} as const;

export default defineConfig({
  test: {
    ...shared,
    include: ['test/**/*.test.ts'],
    exclude: [LONG_SUITES, '**/node_modules/**'],
    env: {
      OCS_TEST_THREAD_BUNDLES: THREAD_BUNDLES,
      // OCS_TEST_SPLIT_DIALECTS=sqlite,postgres npx vitest run FILE runs a split suite on both.
      OCS_TEST_SPLIT_DIALECTS: process.env.OCS_TEST_SPLIT_DIALECTS ?? 'sqlite',
    },
  },
});
