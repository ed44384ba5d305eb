/**
 * The page thread: the sync's thread hands it each page body's bytes (moved, never copied) and
 * it does everything else to the page: decode, parse (64-bit ids exact), sealed fields found
 * and their values opened (through the sync's thread, on the pool of threads), columns planned,
 * originals noted, values encoded, and the page written through a page sink of its own (SQLite:
 * to the writer thread through a port; PostgreSQL: on connections of its own). What only the run
 * may decide (schema changes, newly found sealed fields) it asks the sync's thread (pipeline.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openPageSink } from '../../warehouse/open-sink.js';
import type { OpenedValues } from '../../sealing/open-values.js';
import { HostCallFailed, carryError } from './carried-errors.js';
import type { FromPageThread, HostMethod, PageThreadSetup, ToPageThread } from './messages.js';
import { PageStages } from './page-stages.js';
import type { PageHost } from './prepare.js';

const port = parentPort!;
const { sink: sinkSetup, keys } = workerData as PageThreadSetup;
const send = (message: FromPageThread) => port.postMessage(message);

let nextCall = 1;
const calls = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();

/** Asks the sync's thread; its failure comes back as HostCallFailed (carried-errors.ts). */
function ask<T>(walk: string, method: HostMethod, args: unknown[]): Promise<T> {
  const call = nextCall++;
  return new Promise<T>((resolve, reject) => {
    calls.set(call, { resolve: resolve as (value: unknown) => void, reject });
    send({ type: 'call', call, walk, method, args });
  });
}

function hostOf(walk: string): PageHost {
  return {
    learnSealedFields: (fields) => ask(walk, 'learnSealedFields', [fields]),
    applySchemaChanges: (changes, columns) => ask(walk, 'applySchemaChanges', [changes, columns]),
    opener: {
      open: (policy, tokens) => ask<OpenedValues>(walk, 'open', [policy, tokens]),
    },
    readRowsById: (columns, ids) => ask(walk, 'readRowsById', [columns, ids]),
  };
}

const stages = new PageStages(await openPageSink(sinkSetup), sinkSetup.dialect, keys);

/** Runs a request's work and answers it, as done or failed. */
function answer(id: number, work: () => unknown): void {
  let value: unknown;
  try {
    value = work();
  } catch (error) {
    send({ type: 'failed', id, error: carryError(error) });
    return;
  }
  Promise.resolve(value).then(
    (result) => send({ type: 'done', id, value: result }),
    (error: unknown) => send({ type: 'failed', id, error: carryError(error) }),
  );
}

port.on('message', (message: ToPageThread) => {
  switch (message.type) {
    case 'walk':
      stages.startWalk(message.setup, hostOf(message.setup.walk));
      break;
    case 'parse':
      answer(message.id, () => stages.parse(message.walk, message.bytes));
      break;
    case 'commit':
      answer(message.id, () => stages.commit(message.walk, message.seq, message.cursor));
      break;
    case 'drop':
      stages.drop(message.walk, message.seq);
      break;
    case 'end-walk':
      answer(message.id, () => stages.endWalk(message.walk));
      break;
    case 'answer': {
      const waiting = calls.get(message.call);
      calls.delete(message.call);
      if (message.failed) waiting?.reject(new HostCallFailed(message.call));
      else waiting?.resolve(message.value);
      break;
    }
    case 'close':
      answer(message.id, async () => {
        await stages.close();
        // Nothing keeps the thread alive once its port lets go.
        setImmediate(() => port.close());
      });
      break;
  }
});
