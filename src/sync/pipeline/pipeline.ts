/**
 * The page pipeline as the sync's thread sees it. The sync's thread only fetches: each page
 * body's bytes go to the page thread (page-thread.ts) as a moved buffer, and everything else
 * happens there (parse, checks, sealed fields, columns, originals, encoding, the write through a
 * page sink of its own); pages still commit in walk order, each with its cursor. What the page
 * thread must ask the run (schema changes, sealed fields newly found, values to open on the
 * pool) comes back here as questions, answered by the walk's PageHost.
 *
 * The thread starts with the first walk and stops when the run closes the pipeline, however the
 * run ends. A thread that dies fails the walks in flight (the next run resumes after their last
 * committed page); a walk started later gets a new thread. A warehouse only this thread can
 * write (`:memory:`, an SQLite file without its writer thread), and a sync told to keep its pages
 * on its own thread (`page_threads: false`, a fleet's teams), run the same stages here
 * (LocalPipeline).
 */
import { Worker, type TransferListItem } from 'node:worker_threads';
import { OcsSyncError } from '../../errors.js';
import type { PageSink, Warehouse } from '../../interfaces.js';
import { threadModule } from '../../package-info.js';
import type { SealingKeys } from '../../sealing/policy.js';
import { restoreError } from './carried-errors.js';
import type {
  CommitResult,
  FromPageThread,
  HostMethod,
  PageSummary,
  PageThreadSetup,
  ToPageThread,
  WalkSetup,
} from './messages.js';
import { PageStages } from './page-stages.js';
import type { PageHost } from './prepare.js';

/** One walk's pages in the pipeline. */
export interface PipelineWalk {
  /** Parses a page body (the bytes are moved away); what it says of the next page. */
  parse(bytes: Uint8Array, signal?: AbortSignal): Promise<PageSummary>;
  /** Prepares and writes parsed page `seq` with `cursor`; resolves once it committed. */
  commit(seq: number, cursor: string | null): Promise<CommitResult>;
  /** A parsed page that will not be written (its request was given up, or it holds nothing). */
  drop(seq: number): void;
  /** Waits for the walk's pages in flight; the walk is over. */
  end(): Promise<void>;
}

export interface PagePipeline {
  /** Starts the page thread now, so its start overlaps the run's first requests. */
  warm(): void;
  startWalk(setup: WalkSetup, host: PageHost): PipelineWalk;
  /** Waits for every page in flight, then stops the thread (again: nothing more). */
  close(): Promise<void>;
  /** Whether the pages went to a page thread (false: the stages ran on this thread). */
  readonly threaded: boolean;
}

export interface PipelineOptions {
  warehouse: Warehouse;
  keys: SealingKeys;
  /** False runs the stages on this thread, whatever the warehouse. */
  pageThread: boolean;
  /** The page thread's module (tests give one that stops); default page-thread. */
  threadModule?: URL;
}

/** The run's pipeline: a page thread when asked and the warehouse can be written from one. */
export function createPagePipeline(options: PipelineOptions): PagePipeline {
  return new ThreadedPipeline(options);
}

/** A page thread that stopped on its own: its walks fail, naming it. */
function threadStopped(cause: string): OcsSyncError {
  return new OcsSyncError(
    `The sync's page thread stopped (${cause.slice(0, 200)}); the page was not stored.`,
    { hint: 'Run the sync again: every committed page is kept, and it resumes after them.' },
  );
}

class ThreadedPipeline implements PagePipeline {
  private thread?: PageThread;
  private local?: LocalPipeline;
  private closing?: Promise<void>;

  constructor(private readonly options: PipelineOptions) {}

  get threaded(): boolean {
    return this.thread !== undefined;
  }

  warm(): void {
    this.pipeline();
  }

  startWalk(setup: WalkSetup, host: PageHost): PipelineWalk {
    return this.pipeline().startWalk(setup, host);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.local?.close();
      await this.thread?.close();
    })();
    return this.closing;
  }

  /** The thread (a new one after one that died), or this thread for a warehouse only it writes. */
  private pipeline(): Pick<PagePipeline, 'startWalk'> {
    if (this.closing) throw new OcsSyncError('The page pipeline is closed.');
    if (this.local) return this.local;
    if (!this.thread || this.thread.dead) {
      const sink = this.options.pageThread ? this.options.warehouse.pageSinkSetup() : undefined;
      if (!sink) {
        this.local = new LocalPipeline(this.options.warehouse, this.options.keys);
        return this.local;
      }
      this.thread = new PageThread(
        { sink: sink.setup, keys: this.options.keys },
        sink.transfer,
        this.options.threadModule,
      );
    }
    return this.thread;
  }
}

/** One page thread and what is in flight on it. */
class PageThread {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve(value: unknown): void; reject(error: unknown): void }
  >();
  private readonly hosts = new Map<string, PageHost>();
  /** The run's own errors, thrown answering a question, until the page thread reports them. */
  private readonly hostErrors = new Map<number, unknown>();
  private death?: OcsSyncError;
  private closing = false;

  constructor(setup: PageThreadSetup, transfer: readonly TransferListItem[], module?: URL) {
    const { url, execArgv } = threadModule(import.meta.url, 'page-thread');
    this.worker = new Worker(module ?? url, {
      workerData: setup,
      transferList: [...transfer],
      execArgv,
    });
    // Only requests in flight keep the process alive (request()).
    this.worker.unref();
    this.worker.on('message', (message: FromPageThread) => this.received(message));
    this.worker.on('error', (error) => this.died(error.message));
    this.exited = new Promise((resolve) =>
      this.worker.once('exit', (code) => {
        if (!this.closing) this.died(`it exited with code ${code}`);
        resolve();
      }),
    );
  }

  get dead(): boolean {
    return this.death !== undefined;
  }

  startWalk(setup: WalkSetup, host: PageHost): PipelineWalk {
    this.hosts.set(setup.walk, host);
    this.post({ type: 'walk', setup });
    const { walk } = setup;
    return {
      parse: (bytes, signal) =>
        this.request<PageSummary>({ type: 'parse', id: 0, walk, bytes }, [bytes.buffer], signal),
      commit: (seq, cursor) =>
        this.request<CommitResult>({ type: 'commit', id: 0, walk, seq, cursor }),
      drop: (seq) => {
        if (!this.dead) this.post({ type: 'drop', walk, seq });
      },
      end: async () => {
        try {
          if (!this.dead) await this.request({ type: 'end-walk', id: 0, walk });
        } finally {
          this.hosts.delete(walk);
        }
      },
    };
  }

  /** Never fails: a thread that dies while it closes has nothing left to close. */
  async close(): Promise<void> {
    if (!this.dead) await this.request({ type: 'close', id: 0 }).catch(() => undefined);
    this.closing = true;
    // Waiting for its end keeps the process alive: nothing else may (a CLI's last handles).
    this.worker.ref();
    // The thread ends once its port lets go; a thread that does not is ended here.
    const ended = await Promise.race([
      this.exited.then(() => true),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), 5_000).unref()),
    ]);
    if (!ended) await this.worker.terminate();
  }

  private post(message: ToPageThread, transfer: ArrayBufferLike[] = []): void {
    this.worker.postMessage(message, transfer as ArrayBuffer[]);
  }

  private request<T>(
    message: Extract<ToPageThread, { id: number }>,
    transfer: ArrayBufferLike[] = [],
    signal?: AbortSignal,
  ): Promise<T> {
    if (this.death) return Promise.reject(this.death);
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        // The answer, when it comes, finds no one waiting; the parsed page is dropped later.
        this.settle(id);
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, {
        resolve: (value) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value as T);
        },
        reject: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
      this.post({ ...message, id }, transfer);
    });
  }

  private settle(id: number) {
    const waiting = this.pending.get(id);
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
    return waiting;
  }

  private received(message: FromPageThread): void {
    switch (message.type) {
      case 'done':
        this.settle(message.id)?.resolve(message.value);
        break;
      case 'failed': {
        const error = restoreError(message.error, (call) => {
          const original = this.hostErrors.get(call);
          this.hostErrors.delete(call);
          return original;
        });
        this.settle(message.id)?.reject(error);
        break;
      }
      case 'call':
        void this.answer(message.call, message.walk, message.method, message.args);
        break;
    }
  }

  /** Answers a question of the page thread with the walk's host. */
  private async answer(
    call: number,
    walk: string,
    method: HostMethod,
    args: unknown[],
  ): Promise<void> {
    const host = this.hosts.get(walk);
    try {
      if (!host) throw new OcsSyncError(`${walk} is not a walk of this run.`);
      const value = await askHost(host, method, args);
      this.post({ type: 'answer', call, value });
    } catch (error) {
      this.hostErrors.set(call, error);
      this.post({ type: 'answer', call, failed: true });
    }
  }

  /** The thread stopped on its own: every request in flight fails, and every later one. */
  private died(cause: string): void {
    if (this.death || this.closing) return;
    this.death = threadStopped(cause);
    for (const waiting of this.pending.values()) waiting.reject(this.death);
    this.pending.clear();
    this.hostErrors.clear();
    this.worker.unref();
  }
}

function askHost(host: PageHost, method: HostMethod, args: unknown[]): Promise<unknown> {
  switch (method) {
    case 'learnSealedFields':
      return host.learnSealedFields(args[0] as string[]);
    case 'applySchemaChanges':
      return host.applySchemaChanges(
        args[0] as Parameters<PageHost['applySchemaChanges']>[0],
        args[1] as Parameters<PageHost['applySchemaChanges']>[1],
      );
    case 'open':
      return host.opener.open(
        args[0] as Parameters<PageHost['opener']['open']>[0],
        args[1] as string[],
      );
    case 'readRowsById':
      return host.readRowsById(
        args[0] as Parameters<PageHost['readRowsById']>[0],
        args[1] as string[],
      );
  }
}

/**
 * The same stages on this thread, for a warehouse only it can write or a sync without a page
 * thread: the pages go to the warehouse's own writePage.
 */
class LocalPipeline implements Omit<PagePipeline, 'warm' | 'threaded'> {
  private readonly stages: PageStages;

  constructor(warehouse: Warehouse, keys: SealingKeys) {
    const sink: PageSink = {
      writePage: (page) => warehouse.writePage(page),
      forget: () => undefined,
      close: async () => undefined,
    };
    this.stages = new PageStages(sink, warehouse.dialect, keys);
  }

  startWalk(setup: WalkSetup, host: PageHost): PipelineWalk {
    this.stages.startWalk(setup, host);
    const { walk } = setup;
    return {
      parse: async (bytes) => this.stages.parse(walk, bytes),
      commit: (seq, cursor) => this.stages.commit(walk, seq, cursor),
      drop: (seq) => this.stages.drop(walk, seq),
      end: () => this.stages.endWalk(walk),
    };
  }

  close(): Promise<void> {
    return this.stages.close();
  }
}
