/**
 * The SQLite writer thread (page-committer.ts): its own connection to the warehouse file
 * commits the pages it is sent, each with its cursor in one transaction, in the order they came
 * on each port: the warehouse's own (parentPort), and the ports attached for other threads (the
 * sync's page thread). It serves each port over a bridge (src/thread-bridge.ts, WriterApi); a
 * failure crosses as itself, and the committer words it.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { ThreadBridge } from '../../thread-bridge.js';
import { FailedWalks } from '../commit-order.js';
import { SqliteHandle } from './handle.js';
import {
  commitInOrder,
  writerFailure,
  type WriterApi,
  type WriterSetup,
} from './page-committer.js';
import { SqlitePageWriter } from './page-writes.js';

const main = parentPort!;
const setup = workerData as WriterSetup;

let connection: SqliteHandle | undefined;
/** Why the connection did not open: every page fails with it, until the thread is closed. */
let broken: unknown;
try {
  connection = new SqliteHandle(setup.path, setup.busyTimeoutMs, setup.storedColumnsQuery);
} catch (error) {
  broken = writerFailure(error, 'Opening the writer thread', setup.description);
}

const writer = connection && new SqlitePageWriter(connection);
const failedWalks = new FailedWalks();
const attached = new Set<MessagePort>();

const api: WriterApi = {
  commit: (page) => {
    if (!writer) throw broken;
    return commitInOrder(writer, failedWalks, page);
  },
  forget: () => writer?.forget(),
  attach: (port) => {
    attached.add(port);
    port.on('close', () => attached.delete(port));
    serve(port);
  },
  close: () => {
    writer?.forget();
    connection?.close();
    for (const port of attached) port.close();
    main.close();
  },
};

function serve(port: MessagePort | typeof main): void {
  new ThreadBridge(port, {
    serve: api,
    // This thread asks nothing of the other side: no call of its own waits for it.
    stopped: (cause) => new Error(`the writer thread's port closed (${cause})`),
    keepAlive: true,
  });
}

serve(main);
