/**
 * A stand-in for src/sealing/open-thread.ts that opens values as it does, but stops (exit code 7)
 * when it is sent the value `stop`, or at its Nth chunk when OCS_TEST_THREAD_STOPS_AT is N: for
 * the tests of a thread that dies under the pool, alone and in the middle of a sync. It runs from
 * source, through the TypeScript hooks (typescript-hooks.mjs).
 */
import { parentPort, workerData } from 'node:worker_threads';
import './typescript-hooks-unless-given.mjs';

const { openSealedValues } = await import('../src/sealing/open-values.ts');

const stopsAt = Number(process.env.OCS_TEST_THREAD_STOPS_AT ?? Infinity);
let chunks = 0;

parentPort.on('message', (request) => {
  chunks += 1;
  if (request.tokens.includes('stop') || chunks >= stopsAt) process.exit(7);
  parentPort.postMessage({
    id: request.id,
    ...openSealedValues(request.policy, request.tokens, workerData),
  });
});
