/**
 * Where SQLite pages commit. A warehouse file commits them on a writer thread with its own
 * connection (writer-thread.ts), so that binding and running the statements (about half
 * of a sync's CPU) overlaps with the work on the next page elsewhere. Pages reach the thread
 * from the warehouse (writePage) and from the sync's page thread, which is given a port of its
 * own to it (attach). `:memory:` cannot be shared by two connections, so it commits on the
 * calling thread. Both commit in the order pages were handed over and refuse the rest of a
 * failed walk (../commit-order.ts).
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { OcsSyncError, WarehouseError } from '../../errors.js';
import { threadModule } from '../../package-info.js';
import { ThreadBridge } from '../../thread-bridge.js';
import { FailedWalks } from '../commit-order.js';
import type { StoredColumnsQuery } from './handle.js';
import { sqliteHint } from './hints.js';
import type { EncodedPage } from './page-encoding.js';
import type { SqlitePageWriter } from './page-writes.js';
import { messageOf } from '../writer-lock.js';

export interface PageCommitter {
  /** Resolves with the history versions written once the page committed. */
  commit(page: EncodedPage): Promise<number>;
  /** Resolves when every page handed over has settled. */
  idle(): Promise<void>;
  /** Drops prepared statements: the tables' shapes changed. */
  forget(): void;
  /**
   * Once every page handed over has settled, lets go of a thread until a page needs it again:
   * a run ended, and a warehouse kept open between runs holds no idle thread.
   */
  rest(): Promise<void>;
  close(): Promise<void>;
}

/** What the writer thread serves, on its own port and on each port attached to it. */
export interface WriterApi {
  /** Commits a page in the order it came on its port; the history versions written. */
  commit(page: EncodedPage): number;
  forget(): void;
  /** Serve pages coming through this port too (the sync's page thread). */
  attach(port: MessagePort): void;
  /** Closes the connection and every port; the thread then ends. */
  close(): void;
}

export interface WriterSetup {
  path: string;
  description: string;
  busyTimeoutMs: number;
  storedColumnsQuery: StoredColumnsQuery;
}

/** Commits a page unless an earlier page of its walk failed; remembers its own failure. */
export function commitInOrder(
  writer: SqlitePageWriter,
  failedWalks: FailedWalks,
  page: EncodedPage,
): number {
  failedWalks.assertOpen(page.walk, page.resource);
  try {
    return writer.commit(page);
  } catch (error) {
    failedWalks.fail(page.walk);
    throw error;
  }
}

/**
 * A failure of the writer thread as the warehouse reports it: ours (a WarehouseError naming the
 * table) as it is, SQLite's own worded with what failed, where, and the fix for its code.
 */
export function writerFailure(error: unknown, what: string, description: string): unknown {
  if (error instanceof OcsSyncError) return error;
  return new WarehouseError(`${what} failed in ${description}: ${messageOf(error)}`, {
    hint: sqliteHint(error),
  });
}

/** The writer thread stopped on its own: the pages in flight and every later one fail. */
function writerStopped(description: string): (cause: string) => WarehouseError {
  return (cause) =>
    new WarehouseError(`The SQLite writer thread of ${description} stopped: ${cause}`, {
      hint: 'Run the sync again: every committed page is kept, and it resumes after them.',
    });
}

/** Commits each page through a bridge to the writer thread, worded as the warehouse says it. */
function commitThrough(
  writer: ThreadBridge<WriterApi>,
  page: EncodedPage,
  description: string,
): Promise<number> {
  return writer
    .call('commit', [page])
    .catch((error: unknown) =>
      Promise.reject(writerFailure(error, `Writing a page of ${page.resource}`, description)),
    );
}

/** `:memory:`: commits right away on this thread (the caller serialises access). */
export class InThreadCommitter implements PageCommitter {
  private readonly failedWalks = new FailedWalks();

  constructor(private readonly writer: SqlitePageWriter) {}

  async commit(page: EncodedPage): Promise<number> {
    return commitInOrder(this.writer, this.failedWalks, page);
  }

  async idle(): Promise<void> {}

  forget(): void {
    this.writer.forget();
  }

  async rest(): Promise<void> {}

  async close(): Promise<void> {}
}

/**
 * A warehouse file: commits on a writer thread, started when another thread attaches to it (the
 * sync's page thread, at the first page with rows). Until then the warehouse's own pages (the
 * team row, empty pages that move a cursor) commit here, on its connection: a run that writes
 * nothing more starts no thread, and with no thread nothing else is committing, so the order holds.
 */
export class WriterThreadCommitter implements PageCommitter {
  private worker?: Worker;
  private exited?: Promise<void>;
  private writer?: ThreadBridge<WriterApi>;
  private closed?: WarehouseError;
  private readonly failedHere = new FailedWalks();

  constructor(
    private readonly setup: WriterSetup,
    /** Commits on the warehouse's connection until the thread starts (without: on the thread). */
    private readonly here?: SqlitePageWriter,
  ) {}

  commit(page: EncodedPage): Promise<number> {
    if (this.closed) return Promise.reject(this.closed);
    const { description } = this.setup;
    if (this.writer || !this.here) {
      return commitThrough(this.started(page.audit === true), page, description);
    }
    try {
      return Promise.resolve(commitInOrder(this.here, this.failedHere, page));
    } catch (error) {
      return Promise.reject(
        writerFailure(error, `Writing a page of ${page.resource}`, description),
      );
    }
  }

  idle(): Promise<void> {
    return this.writer?.idle() ?? Promise.resolve();
  }

  forget(): void {
    this.here?.forget();
    this.writer?.notify('forget', []);
  }

  /**
   * A port to the writer thread (started now if it is not) for another thread to commit pages
   * through, in the order it sends them (PortCommitter). Closing the port detaches it.
   */
  attach(audit: boolean): MessagePort {
    if (this.closed) throw this.closed;
    const { port1, port2 } = new MessageChannel();
    this.started(audit).notify('attach', [port2], { transfer: [port2] });
    return port1;
  }

  async rest(): Promise<void> {
    if (this.closed) return;
    // Its pages commit here again until a thread attaches, as before it first started.
    await this.stopThread(
      new WarehouseError(`The writer thread of ${this.setup.description} was let go.`),
    );
  }

  async close(): Promise<void> {
    this.closed ??= new WarehouseError(`The warehouse ${this.setup.description} is closed.`);
    await this.stopThread(this.closed);
  }

  private async stopThread(reason: WarehouseError): Promise<void> {
    if (!this.worker) return;
    await this.idle();
    const { worker, exited, writer } = this;
    this.worker = undefined;
    this.writer = undefined;
    writer!.notify('close', []);
    writer!.close(reason);
    worker.ref();
    await exited;
  }

  private started(chained: boolean): ThreadBridge<WriterApi> {
    if (this.worker && this.writer) return this.writer;
    const { url, execArgv } = threadModule(import.meta.url, 'writer-thread');
    const worker = new Worker(url, {
      workerData: this.setup,
      // A small young generation keeps RSS flat in the rows written. Chaining every version
      // (audit) leaves a few MB more short-lived strings a page, which at 8 MB took the thread
      // three times as long to collect (0.35 s of 4.9 s for 200,000 rows; about 12 MB more RSS).
      resourceLimits: { maxYoungGenerationSizeMb: chained ? 16 : 8 },
      execArgv,
    });
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()));
    // Only pages in flight keep the process alive (the bridge refs the thread while they wait).
    this.writer = new ThreadBridge(worker, { stopped: writerStopped(this.setup.description) });
    this.worker = worker;
    return this.writer;
  }
}

/**
 * Commits through a port to the writer thread (WriterThreadCommitter.attach), from another
 * thread: the sync's page thread hands its pages straight to the writer, never through the
 * sync's thread. The writer thread closing its end (the warehouse closed, or the thread stopped)
 * fails the pages in flight.
 */
export class PortCommitter implements PageCommitter {
  private readonly writer: ThreadBridge<WriterApi>;

  constructor(
    private readonly port: MessagePort,
    private readonly description: string,
  ) {
    this.writer = new ThreadBridge(port, { stopped: writerStopped(description) });
  }

  commit(page: EncodedPage): Promise<number> {
    return commitThrough(this.writer, page, this.description);
  }

  idle(): Promise<void> {
    return this.writer.idle();
  }

  forget(): void {
    this.writer.notify('forget', []);
  }

  /** The thread is the warehouse's to let go. */
  async rest(): Promise<void> {}

  async close(): Promise<void> {
    await this.idle();
    this.writer.close(new WarehouseError(`The page sink of ${this.description} is closed.`));
    this.port.close();
  }
}
