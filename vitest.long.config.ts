import { defineConfig } from 'vitest/config';
import { THREAD_BUNDLES } from './test/thread-bundles.js';
import { LONG_SUITES, SPLIT_SUITES, shared } from './vitest.config.js';

/**
 * `npm run test:long`: the long suites `npm test` leaves out (see vitest.config.ts), and the split
 * suites on PostgreSQL when the suite has one (OCS_TEST_POSTGRES_URL; CI always does).
 */
const postgres = Boolean(process.env.OCS_TEST_POSTGRES_URL) || Boolean(process.env.CI);

export default defineConfig({
  test: {
    ...shared,
    include: [LONG_SUITES, ...(postgres ? SPLIT_SUITES : [])],
    env: { OCS_TEST_THREAD_BUNDLES: THREAD_BUNDLES, OCS_TEST_SPLIT_DIALECTS: 'postgres' },
  },
});
