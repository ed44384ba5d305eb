/**
 * Where SQLite pages commit. A warehouse file commits them on a writer thread with its own
 * connection (writer-thread.ts), so that binding and running the statements (about half
 * of a sync's CPU) overlaps with fetching, parsing and encoding the next page on the sync's
 * thread. `:memory:` cannot be shared by two connections, so it commits on the sync's thread.
 * Both commit in the order pages were handed over and refuse the rest of a failed walk
 * (../commit-order.ts).
 */
import { Worker } from 'node:worker_threads';
import { OcsSyncError, WarehouseError } from '../../errors.js';
import { threadModule } from '../../package-info.js';
import { FailedWalks } from '../commit-order.js';
import { sqliteHint, type StoredColumnsQuery } from './handle.js';
import type { EncodedPage, SqlitePageWriter } from './page-writes.js';
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
  { type: 'page'; id: number; page: EncodedPage } | { type: 'forget' } | { type: 'close' };

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

/** A warehouse file: commits on a writer thread, started with the first page. */
export class WriterThreadCommitter implements PageCommitter {
  private worker?: Worker;
  private exited?: Promise<void>;
  private broken?: WarehouseError;
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resource: string; resolve: (versions: number) => void; reject: (error: Error) => void }
  >();
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly setup: WriterSetup) {}

  commit(page: EncodedPage): Promise<number> {
    if (this.broken) return Promise.reject(this.broken);
    const worker = this.started(page.audit === true);
    const id = this.nextId++;
    return new Promise<number>((resolve, reject) => {
      if (this.pending.size === 0) worker.ref();
      this.pending.set(id, { resource: page.resource, resolve, reject });
      worker.postMessage({ type: 'page', id, page } satisfies WriterRequest);
    });
  }

  idle(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  forget(): void {
    this.worker?.postMessage({ type: 'forget' } satisfies WriterRequest);
  }

  async close(): Promise<void> {
    if (!this.worker) return;
    await this.idle();
    const { worker, exited } = this;
    this.worker = undefined;
    this.broken ??= new WarehouseError(`The warehouse ${this.setup.description} is closed.`);
    worker.ref();
    worker.postMessage({ type: 'close' } satisfies WriterRequest);
    await exited;
  }

  private started(chained: boolean): Worker {
    if (this.worker) return this.worker;
    const { url, execArgv } = threadModule(import.meta.url, 'writer-thread');
    const worker = new Worker(url, {
      workerData: this.setup,
      // A small young generation keeps RSS flat in the rows written. Chaining every version
      // (audit) leaves a few MB more short-lived strings a page, which at 8 MB took the thread
      // three times as long to collect (0.35 s of 4.9 s for 200,000 rows; about 12 MB more RSS).
      resourceLimits: { maxYoungGenerationSizeMb: chained ? 16 : 8 },
      execArgv,
    });
    // Only pages in flight keep the process alive (see commit()).
    worker.unref();
    worker.on('message', (reply: WriterReply) => this.onReply(reply));
    worker.on('error', (error) => this.breakDown(error));
    this.exited = new Promise((resolve) =>
      worker.once('exit', (code) => {
        if (this.pending.size > 0) this.breakDown(new Error(`it exited with code ${code}`));
        resolve();
      }),
    );
    this.worker = worker;
    return worker;
  }

  private onReply(reply: WriterReply): void {
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
  private breakDown(cause: unknown): void {
    this.broken ??=
      cause instanceof WarehouseError
        ? cause
        : new WarehouseError(
            `The SQLite writer thread of ${this.setup.description} stopped: ${messageOf(cause)}`,
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
    this.worker?.unref();
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private errorOf(failure: CommitFailure, what: string): WarehouseError {
    if (failure.ours) return new WarehouseError(failure.message, { hint: failure.hint });
    return new WarehouseError(`${what} failed in ${this.setup.description}: ${failure.message}`, {
      hint: sqliteHint({ code: failure.code }),
    });
  }
}
