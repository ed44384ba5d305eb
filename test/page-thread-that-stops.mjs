/**
 * The page thread (src/sync/pipeline/page-thread.ts) that stops (exit code 9) when it is told to
 * write its Nth page, OCS_TEST_PAGE_THREAD_STOPS_AT being N: for the tests of a page thread that
 * dies in the middle of a walk. It runs from source, through the TypeScript hooks
 * (typescript-hooks.mjs).
 */
import { parentPort } from 'node:worker_threads';
import './typescript-hooks-unless-given.mjs';

const stopsAt = Number(process.env.OCS_TEST_PAGE_THREAD_STOPS_AT ?? Infinity);
let commits = 0;
// The thread's own listener sees each message after this check: the Nth page is never written.
const on = parentPort.on.bind(parentPort);
parentPort.on = (event, listener) =>
  on(
    event,
    event !== 'message'
      ? listener
      : (message) => {
          if (message.method === 'commit' && ++commits >= stopsAt) process.exit(9);
          listener(message);
        },
  );
await import('../src/sync/pipeline/page-thread.ts');
