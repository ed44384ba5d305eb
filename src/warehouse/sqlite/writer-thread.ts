/**
 * The SQLite writer thread (page-committer.ts): its own connection to the warehouse file
 * commits the pages it is sent, each with its cursor in one transaction, in the order they came
 * on each port: the warehouse's own (parentPort), and the ports attached for other threads (the
 * sync's page thread).
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
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

const main = parentPort!;
const setup = workerData as WriterSetup;

let connection: SqliteHandle | undefined;
let broken: WriterReply | undefined;
try {
  connection = new SqliteHandle(setup.path, setup.busyTimeoutMs, setup.storedColumnsQuery);
} catch (error) {
  broken = { type: 'broken', failure: describeFailure(error) };
}

const writer = connection && new SqlitePageWriter(connection);
const failedWalks = new FailedWalks();
const attached = new Set<MessagePort>();

function serve(port: MessagePort | typeof main): void {
  const reply = (message: WriterReply) => port.postMessage(message);
  if (broken) reply(broken);
  port.on('message', (request: WriterRequest) => {
    switch (request.type) {
      case 'page':
        if (!writer) return;
        try {
          const versionsWritten = commitInOrder(writer, failedWalks, request.page);
          reply({ type: 'committed', id: request.id, versionsWritten });
        } catch (error) {
          reply({ type: 'failed', id: request.id, failure: describeFailure(error) });
        }
        break;
      case 'forget':
        writer?.forget();
        break;
      case 'attach':
        attached.add(request.port);
        request.port.on('close', () => attached.delete(request.port));
        serve(request.port);
        break;
      case 'close':
        writer?.forget();
        connection?.close();
        for (const port of attached) port.close();
        main.close();
        break;
    }
  });
}

serve(main);
if (broken) main.close();
