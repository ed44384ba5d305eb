/**
 * A thread of the pool that opens sealed values (open-pool.ts). It gets the keys once, when it
 * starts (a KeyObject crosses threads as a handle, never as PEM text), then opens each chunk of
 * values it is asked for (OpenThreadApi, over src/thread-bridge.ts) and answers with what to
 * store. Nothing here logs.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ThreadBridge } from '../thread-bridge.js';
import { openSealedValues, type OpeningKeys, type OpenThreadApi } from './open-values.js';

const keys = workerData as OpeningKeys;

new ThreadBridge<Record<never, never>, OpenThreadApi>(parentPort!, {
  serve: { open: (policy, tokens) => openSealedValues(policy, tokens, keys) },
  // It asks nothing of the sync's thread: no call of its own waits.
  stopped: (cause) => new Error(`the sync's thread is gone (${cause})`),
  keepAlive: true,
});
