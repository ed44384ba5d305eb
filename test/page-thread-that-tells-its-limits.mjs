/**
 * The page thread (src/sync/pipeline/page-thread.ts) that first appends its resource limits, as
 * a line of JSON, to the file OCS_TEST_PAGE_THREAD_LIMITS names: for the test of the young
 * generation each dialect gives its page thread. It runs from source, through the TypeScript
 * hooks (typescript-hooks.mjs).
 */
import { appendFileSync } from 'node:fs';
import { resourceLimits } from 'node:worker_threads';
import './typescript-hooks-unless-given.mjs';

appendFileSync(process.env.OCS_TEST_PAGE_THREAD_LIMITS, `${JSON.stringify(resourceLimits)}\n`);
await import('../src/sync/pipeline/page-thread.ts');
