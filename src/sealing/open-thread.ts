/**
 * A thread of the pool that opens sealed values (open-pool.ts). It gets the keys once, when it
 * starts (a KeyObject crosses threads as a handle, never as PEM text), then opens each chunk of
 * values it is sent and answers with what to store. Nothing here logs.
 */
import { parentPort, workerData } from 'node:worker_threads';
import {
  openSealedValues,
  type OpeningKeys,
  type OpenReply,
  type OpenRequest,
} from './open-values.js';

const port = parentPort!;
const keys = workerData as OpeningKeys;

port.on('message', (request: OpenRequest) => {
  const opened = openSealedValues(request.policy, request.tokens, keys);
  port.postMessage({ id: request.id, ...opened } satisfies OpenReply);
});
