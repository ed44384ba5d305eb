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
  close(): Promise<void>;
}

/** A commit's failure as it crosses from the writer thread. */
export interface CommitFailure {
  message: string;
  hint?: string;
  /** better-sqlite3's error code (SQLITE_BUSY, ...), when SQLite raised it. */
  code?: string;
  /** The message is already ours (a WarehouseError) and names the table. */
  ours: boolean;
}

export type WriterRequest =
  | { type: 'page'; id: number; page: EncodedPage }
  | { type: 'forget' }
  /** Serve pages coming through this port too (the sync's page thread). */
  | { type: 'attach'; port: MessagePort }
  | { type: 'close' };

export type WriterReply =
  | { type: 'committed'; id: number; versionsWritten: number }
  | { type: 'failed'; id: number; failure: CommitFailure }
  /** The thread could not open its connection; nothing will commit. */
  | { type: 'broken'; failure: CommitFailure };

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

export function describeFailure(error: unknown): CommitFailure {
  if (error instanceof OcsSyncError) {
    return { message: error.message, hint: error.hint, ours: true };
  }
  const code = (error as { code?: unknown } | undefined)?.code;
  return {
    message: messageOf(error),
    code: typeof code === 'string' ? code : undefined,
    ours: false,
  };
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

  async close(): Promise<void> {}
}

/** Something pages are posted to and replies come from: the writer thread, or a port to it. */
interface Channel {
  postMessage(message: WriterRequest, transfer?: readonly MessagePort[]): void;
  ref(): void;
  unref(): void;
}

/** Pages in flight on a channel to the writer thread, and their answers. */
class CommitChannel {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resource: string; resolve: (versions: number) => void; reject: (error: Error) => void }
  >();
  private idleWaiters: Array<() => void> = [];
  broken?: WarehouseError;

  constructor(
    private readonly channel: Channel,
    private readonly description: string,
  ) {}

  commit(page: EncodedPage): Promise<number> {
    if (this.broken) return Promise.reject(this.broken);
    const id = this.nextId++;
    return new Promise<number>((resolve, reject) => {
      // Only pages in flight keep the process alive.
      if (this.pending.size === 0) this.channel.ref();
      this.pending.set(id, { resource: page.resource, resolve, reject });
      this.channel.postMessage({ type: 'page', id, page });
    });
  }

  get busy(): boolean {
    return this.pending.size > 0;
  }

  idle(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  onReply(reply: WriterReply): void {
    if (reply.type === 'broken') {
      this.breakDown(this.errorOf(reply.failure, 'Opening the writer thread'));
      return;
    }
    const waiting = this.pending.get(reply.id);
    if (!waiting) return;
    this.pending.delete(reply.id);
    if (reply.type === 'committed') waiting.resolve(reply.versionsWritten);
    else waiting.reject(this.errorOf(reply.failure, `Writing a page of ${waiting.resource}`));
    this.afterSettle();
  }

  /** The thread died: every page in flight fails, and so does every later one. */
  breakDown(cause: unknown): void {
    this.broken ??=
      cause instanceof WarehouseError
        ? cause
        : new WarehouseError(
            `The SQLite writer thread of ${this.description} stopped: ${messageOf(cause)}`,
            {
              hint: 'Run the sync again: every committed page is kept, and it resumes after them.',
            },
          );
    for (const waiting of this.pending.values()) waiting.reject(this.broken);
    this.pending.clear();
    this.afterSettle();
  }

  private afterSettle(): void {
    if (this.pending.size > 0) return;
    this.channel.unref();
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private errorOf(failure: CommitFailure, what: string): WarehouseError {
    if (failure.ours) return new WarehouseError(failure.message, { hint: failure.hint });
    return new WarehouseError(`${what} failed in ${this.description}: ${failure.message}`, {
      hint: sqliteHint({ code: failure.code }),
    });
  }
}

/** A warehouse file: commits on a writer thread, started with the first page. */
export class WriterThreadCommitter implements PageCommitter {
  private worker?: Worker;
  private exited?: Promise<void>;
  private channel?: CommitChannel;
  private closed?: WarehouseError;

  constructor(private readonly setup: WriterSetup) {}

  commit(page: EncodedPage): Promise<number> {
    if (this.closed) return Promise.reject(this.closed);
    return this.started(page.audit === true).commit(page);
  }

  idle(): Promise<void> {
    return this.channel?.idle() ?? Promise.resolve();
  }

  forget(): void {
    this.worker?.postMessage({ type: 'forget' } satisfies WriterRequest);
  }

  /**
   * A port to the writer thread (started now if it is not) for another thread to commit pages
   * through, in the order it sends them (PortCommitter). Closing the port detaches it.
   */
  attach(audit: boolean): MessagePort {
    if (this.closed) throw this.closed;
    this.started(audit);
    const { port1, port2 } = new MessageChannel();
    this.worker!.postMessage({ type: 'attach', port: port2 } satisfies WriterRequest, [port2]);
    return port1;
  }

  async close(): Promise<void> {
    if (!this.worker) return;
    await this.idle();
    const { worker, exited } = this;
    this.worker = undefined;
    this.closed = new WarehouseError(`The warehouse ${this.setup.description} is closed.`);
    worker.ref();
    worker.postMessage({ type: 'close' } satisfies WriterRequest);
    await exited;
  }

  private started(chained: boolean): CommitChannel {
    if (this.worker && this.channel) return this.channel;
    const { url, execArgv } = threadModule(import.meta.url, 'writer-thread');
    const worker = new Worker(url, {
      workerData: this.setup,
      // A small young generation keeps RSS flat in the rows written. Chaining every version
      // (audit) leaves a few MB more short-lived strings a page, which at 8 MB took the thread
      // three times as long to collect (0.35 s of 4.9 s for 200,000 rows; about 12 MB more RSS).
      resourceLimits: { maxYoungGenerationSizeMb: chained ? 16 : 8 },
      execArgv,
    });
    const channel = new CommitChannel(worker, this.setup.description);
    // Only pages in flight keep the process alive (CommitChannel).
    worker.unref();
    worker.on('message', (reply: WriterReply) => channel.onReply(reply));
    worker.on('error', (error) => channel.breakDown(error));
    this.exited = new Promise((resolve) =>
      worker.once('exit', (code) => {
        if (channel.busy) channel.breakDown(new Error(`it exited with code ${code}`));
        resolve();
      }),
    );
    this.worker = worker;
    this.channel = channel;
    return channel;
  }
}

/**
 * Commits through a port to the writer thread (WriterThreadCommitter.attach), from another
 * thread: the sync's page thread hands its pages straight to the writer, never through the
 * sync's thread.
 */
export class PortCommitter implements PageCommitter {
  private readonly channel: CommitChannel;

  constructor(
    private readonly port: MessagePort,
    description: string,
  ) {
    this.channel = new CommitChannel(port, description);
    port.on('message', (reply: WriterReply) => this.channel.onReply(reply));
    // The writer thread closed its end (the warehouse closed, or the thread stopped).
    port.on('close', () =>
      this.channel.breakDown(new Error('its port closed before every page committed')),
    );
    port.unref();
  }

  commit(page: EncodedPage): Promise<number> {
    return this.channel.commit(page);
  }

  idle(): Promise<void> {
    return this.channel.idle();
  }

  forget(): void {
    this.port.postMessage({ type: 'forget' } satisfies WriterRequest);
  }

  async close(): Promise<void> {
    await this.idle();
    this.port.close();
  }
}
