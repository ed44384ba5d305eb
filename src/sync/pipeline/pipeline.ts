/**
 * The page pipeline as the sync's thread sees it. The sync's thread only fetches: each page
 * body's bytes go to the page stages (page-stages.ts), which do everything else (parse, checks,
 * sealed fields, columns, originals, encoding, the write through a page sink); pages still commit
 * in walk order, each with its cursor. What the stages must ask the run (schema changes, sealed
 * fields newly found, values to open on the pool) is answered by the walk's PageHost.
 *
 * The stages run on a page thread (page-thread.ts) or, when the run's plan keeps its pages on its
 * own thread (src/page-threads.ts), here: the same calls either way (PageStagesApi, over a bridge or in this thread), so
 * the walk cannot tell them apart. A page thread starts with the first walk (or `warm()`) and
 * stops when the run closes the pipeline, however the run ends. A thread that dies fails the
 * walks in flight (the next run resumes after their last committed page); a walk started later
 * gets a new thread.
 */
import { Worker, type TransferListItem } from 'node:worker_threads';
import { OcsSyncError, WarehouseError } from '../../errors.js';
import type { PageSink, PageSinkSetup, Warehouse } from '../../interfaces.js';
import { threadModule } from '../../package-info.js';
import type { SealingKeys } from '../../sealing/policy.js';
import { ThreadBridge, inThisThread, type Caller } from '../../thread-bridge.js';
import {
  answerByWalk,
  type CommitResult,
  type PageSummary,
  type RunApi,
  type WalkSetup,
} from './messages.js';
import { PageStages, servePageStages, type PageStagesApi } from './page-stages.js';
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

export interface PipelineOptions {
  warehouse: Warehouse;
  keys: SealingKeys;
  /**
   * Whether the stages run on a page thread (planPageThreads's answer, src/page-threads.ts): the
   * warehouse must then give the thread a page sink (for SQLite, it was opened with a writer
   * thread by the same plan). False runs them on this thread.
   */
  pageThread: boolean;
  /** The page thread's module (tests give one that stops); default page-thread. */
  threadModule?: URL;
}

/** Where the stages run, and how they are reached: the same calls wherever it is. */
interface StagesPlace {
  readonly stages: Caller<PageStagesApi>;
  /** True once it takes no more walks (its thread stopped). */
  readonly gone: boolean;
  /** Waits for every page in flight, then lets go (the thread ends). Never fails. */
  close(): Promise<void>;
}

/** The run's page pipeline: its stages on a page thread, or on this thread. */
export class PagePipeline {
  private place?: StagesPlace;
  /** Each walk's PageHost, answering the stages' questions. */
  private readonly hosts = new Map<string, PageHost>();
  private closing?: Promise<void>;

  constructor(private readonly options: PipelineOptions) {}

  /** Whether the pages went to a page thread (false: the stages ran on this thread). */
  get threaded(): boolean {
    return this.options.pageThread;
  }

  /** Starts the page thread now, so its start overlaps the run's first requests. */
  warm(): void {
    this.current();
  }

  startWalk(setup: WalkSetup, host: PageHost): PipelineWalk {
    const { stages } = this.current();
    const { walk } = setup;
    this.hosts.set(walk, host);
    stages.notify('startWalk', [setup]);
    return {
      parse: (bytes, signal) =>
        stages.call('parse', [walk, bytes], { transfer: [bytes.buffer as ArrayBuffer], signal }),
      commit: (seq, cursor) => stages.call('commit', [walk, seq, cursor]),
      drop: (seq) => stages.notify('drop', [walk, seq]),
      end: async () => {
        try {
          await stages.call('endWalk', [walk]);
        } finally {
          this.hosts.delete(walk);
        }
      },
    };
  }

  /** Waits for every page in flight, then stops the thread (again: nothing more). */
  close(): Promise<void> {
    this.closing ??= this.place?.close() ?? Promise.resolve();
    return this.closing;
  }

  /** The place the stages run: a new thread after one that died. */
  private current(): StagesPlace {
    if (this.closing) throw new OcsSyncError('The page pipeline is closed.');
    if (this.place && !this.place.gone) return this.place;
    this.place = this.options.pageThread ? this.pageThread() : this.inThisThread();
    return this.place;
  }

  private pageThread(): StagesPlace {
    const sink = this.options.warehouse.pageSinkSetup();
    if (!sink) {
      // A caller that did not open the warehouse by the run's plan: never the CLI's.
      throw new WarehouseError(
        `The warehouse ${this.options.warehouse.description} cannot be written from a page thread (in memory, or opened without a writer thread).`,
        { hint: 'Sync it with its pages on the sync’s thread (page_threads: false).' },
      );
    }
    return new PageThread(sink, this.options.keys, this.hosts, this.options.threadModule);
  }

  /** The same stages here: the pages go to the warehouse's own writePage. */
  private inThisThread(): StagesPlace {
    const { warehouse, keys } = this.options;
    const sink: PageSink = {
      writePage: (page) => warehouse.writePage(page),
      forget: () => undefined,
      close: async () => undefined,
    };
    const stages = new PageStages(sink, warehouse.dialect, keys);
    return {
      stages: inThisThread(servePageStages(stages, (walk) => this.hosts.get(walk)!)),
      gone: false,
      close: () => stages.close(),
    };
  }
}

/** A page thread that stopped on its own: its walks fail, naming it. */
function threadStopped(cause: string): OcsSyncError {
  return new OcsSyncError(
    `The sync's page thread stopped (${cause.slice(0, 200)}); the page was not stored.`,
    { hint: 'Run the sync again: every committed page is kept, and it resumes after them.' },
  );
}

/** One page thread, serving the stages and asking the walks' hosts on one bridge. */
class PageThread implements StagesPlace {
  readonly stages: ThreadBridge<PageStagesApi, RunApi>;
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  constructor(
    { setup, transfer }: { setup: PageSinkSetup; transfer: readonly TransferListItem[] },
    keys: SealingKeys,
    hosts: ReadonlyMap<string, PageHost>,
    module?: URL,
  ) {
    const { url, execArgv } = threadModule(import.meta.url, 'page-thread');
    this.worker = new Worker(module ?? url, {
      workerData: { sink: setup, keys },
      transferList: [...transfer],
      execArgv,
    });
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
    this.stages = new ThreadBridge(this.worker, {
      serve: answerByWalk(hosts),
      stopped: threadStopped,
    });
  }

  get gone(): boolean {
    return this.stages.isClosed;
  }

  async close(): Promise<void> {
    if (!this.stages.isClosed) await this.stages.call('close', []).catch(() => undefined);
    this.stages.close(new OcsSyncError('The page pipeline is closed.'));
    // Waiting for its end keeps the process alive: nothing else may (a CLI's last handles).
    this.worker.ref();
    // The thread ends once its port lets go; a thread that does not is ended here.
    const ended = await Promise.race([
      this.exited.then(() => true),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), 5_000).unref()),
    ]);
    if (!ended) await this.worker.terminate();
  }
}
