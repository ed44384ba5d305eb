/**
 * The SQLite writer thread (page-committer.ts): its own connection to the warehouse file
 * commits the pages the sync's thread encoded, one after another in the order they came, each
 * with its cursor in one transaction.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { FailedWalks } from '../commit-order.js';
import { SqliteHandle } from './handle.js';
import {
  commitInOrder,
  describeFailure,
  type WriterReply,
  type WriterRequest,
  type WriterSetup,
} from './page-committer.js';
import { SqlitePageWriter } from './page-writes.js';

const port = parentPort!;
const setup = workerData as WriterSetup;
const reply = (message: WriterReply) => port.postMessage(message);

let connection: SqliteHandle | undefined;
try {
  connection = new SqliteHandle(setup.path, setup.busyTimeoutMs, setup.storedColumnsQuery);
} catch (error) {
  reply({ type: 'broken', failure: describeFailure(error) });
}

if (connection) {
  const open = connection;
  const writer = new SqlitePageWriter(open);
  const failedWalks = new FailedWalks();
  port.on('message', (request: WriterRequest) => {
    switch (request.type) {
      case 'page':
        try {
          const versionsWritten = commitInOrder(writer, failedWalks, request.page);
          reply({ type: 'committed', id: request.id, versionsWritten });
        } catch (error) {
          reply({ type: 'failed', id: request.id, failure: describeFailure(error) });
        }
        break;
      case 'forget':
        writer.forget();
        break;
      case 'close':
        writer.forget();
        open.close();
        port.close();
        break;
    }
  });
} else {
  port.close();
}
