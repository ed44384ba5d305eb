/**
 * The thread of src/sealing/open-thread.ts, but one that stops (exit code 7) when it is asked to
 * open the value `stop`, or at its Nth chunk when OCS_TEST_THREAD_STOPS_AT is N: for the tests of
 * a thread that dies under the pool, alone and in the middle of a sync. It runs from source,
 * through the TypeScript hooks (typescript-hooks.mjs).
 */
import { parentPort } from 'node:worker_threads';
import './typescript-hooks-unless-given.mjs';

const stopsAt = Number(process.env.OCS_TEST_THREAD_STOPS_AT ?? Infinity);
let chunks = 0;
// The thread's own listener sees each call after this check: the chunk is never answered.
const on = parentPort.on.bind(parentPort);
parentPort.on = (event, listener) =>
  on(
    event,
    event !== 'message'
      ? listener
      : (message) => {
          if (message.method === 'open') {
            const [, tokens] = message.args;
            if (tokens.includes('stop') || ++chunks >= stopsAt) process.exit(7);
          }
          listener(message);
        },
  );
await import('../src/sealing/open-thread.ts');
