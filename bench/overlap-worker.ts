/**
 * The writer thread of the overlap designs (overlap-designs.ts): writes each page it is handed
 * (overlap-writer.ts) and acknowledges it, so the fetching thread keeps at most N pages ahead.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openWriter, type WriterMessage, type WriterSetup } from './overlap-writer.js';

export type WriterReply = { type: 'written'; rows: number } | { type: 'failed'; error: string };

const setup = workerData as WriterSetup;
const port = parentPort!;

async function main(): Promise<void> {
  const write = await openWriter(setup);
  const queue: WriterMessage[] = [];
  let busy = false;
  const drain = async () => {
    if (busy) return;
    busy = true;
    try {
      while (queue.length > 0) {
        const message = queue.shift()!;
        if (message.type === 'end') {
          await write.close();
          port.close();
          return;
        }
        const rows = await write.page(message);
        port.postMessage({ type: 'written', rows } satisfies WriterReply);
      }
    } catch (error) {
      port.postMessage({
        type: 'failed',
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      } satisfies WriterReply);
    } finally {
      busy = false;
    }
  };
  port.on('message', (message: WriterMessage) => {
    queue.push(message);
    void drain();
  });
  port.postMessage({ type: 'written', rows: 0 } satisfies WriterReply);
}

await main();
