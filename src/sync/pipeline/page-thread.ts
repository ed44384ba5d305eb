/**
 * The page thread: the sync's thread hands it each page body's bytes (moved, never copied) and
 * it does everything else to the page: decode, parse (64-bit ids exact), sealed fields found
 * and their values opened (through the sync's thread, on the pool of threads), columns planned,
 * originals noted, values encoded, and the page written through a page sink of its own (SQLite:
 * to the writer thread through a port; PostgreSQL: on connections of its own). It serves the
 * page stages (PageStagesApi) over one bridge to the sync's thread, and asks the run on the same
 * bridge what only the run may decide (schema changes, newly found sealed fields): messages.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ThreadBridge } from '../../thread-bridge.js';
import { openPageSink } from '../../warehouse/open.js';
import { askRun, type PageThreadSetup, type RunApi } from './messages.js';
import { PageStages, servePageStages, type PageStagesApi } from './page-stages.js';

const port = parentPort!;
const { sink: sinkSetup, keys } = workerData as PageThreadSetup;
const stages = new PageStages(await openPageSink(sinkSetup), sinkSetup.dialect, keys);

const run: ThreadBridge<RunApi, PageStagesApi> = new ThreadBridge(port, {
  serve: {
    ...servePageStages(stages, (walk) => askRun(walk, run)),
    close: async () => {
      await stages.close();
      // Nothing keeps the thread alive once its port lets go.
      setImmediate(() => port.close());
    },
  },
  // The sync's thread ends this thread when it goes: nothing waits on a question then.
  stopped: (cause) => new Error(`the sync's thread is gone (${cause})`),
  keepAlive: true,
});
