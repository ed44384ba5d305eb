/**
 * The page pipeline as the sync's thread sees it. The sync's thread only fetches: each page
 * body's bytes go to the page stages (page-stages.ts), which do everything else (parse, checks,
 * sealed fields, columns, originals, encoding, the write through a page sink); pages still commit
 * in walk order, each with its cursor. What the stages must ask the run (schema changes, sealed
 * fields newly found, values to open on the pool) is answered by the walk's PageHost.
 *
 * The stages run on a page thread (page-thread.ts) or, when the run's plan keeps its pages on its
 * own thread (src/page-threads.ts), here: the same calls either way (PageStagesApi, over a bridge
 * or in this thread), so the walk cannot tell them apart. A page thread starts with the first page
 * that holds rows (pages before it, empty, stay here) and stops when the run closes the pipeline,
 * however the run ends. A thread that dies fails the
 * walks in flight (the next run resumes after their last committed page); a walk started later
 * gets a new thread.
 */
import { Worker, type TransferListItem } from 'node:worker_threads';
import { OcsSyncError, WarehouseError } from '../../errors.js';
import type { PageSink, PageSinkSetup, Warehouse } from '../../interfaces.js';
import { threadModule } from '../../package-info.js';
import type { SealingKeys } from '../../sealing/policy.js';
import { ThreadBridge, inThisThread, type Caller } from '../../thread-bridge.js';
import { notWrittenError } from '../../warehouse/commit-order.js';
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

/** A walk's parsed page: where it was parsed, and its number there. */
interface PlacedPage {
  place: StagesPlace;
  seq: number;
}

/** One walk as the pipeline routes it between this thread and the page thread. */
interface RoutedWalk {
  setup: WalkSetup;
  /** Where its next pages are parsed: this thread until its first page with rows. */
  place: StagesPlace;
  /** Every place it was started on (at most this thread, then the page thread). */
  places: StagesPlace[];
  /** Its parsed pages by the seq the walk knows them by. */
  pages: Map<number, PlacedPage>;
  nextSeq: number;
  /**
   * The last page given to commit: where, its commit, and what its handing over waits for
   * (undefined: it was handed over at once).
   */
  last?: { place: StagesPlace; written: Promise<unknown>; after?: Promise<void> };
}

/**
 * The run's page pipeline: its stages on this thread, and on a page thread once a page with rows
 * comes. A run that writes no page starts no thread (the thread, and SQLite's writer thread behind
 * it, cost more CPU than a small team's whole run): each walk's pages are parsed here until one
 * holds rows; that page and every later one of the walk are parsed again on the page thread (the
 * bytes are still whole: parsing here moves nothing), and walks started after it go there
 * straight away. The empty pages parsed here are committed here, and a commit waits for the one
 * ahead of it when the two are on different threads, so the walk's pages still commit in order.
 */
export class PagePipeline {
  private local?: StagesPlace;
  private thread?: StagesPlace;
  /** Each walk's PageHost, answering the stages' questions. */
  private readonly hosts = new Map<string, PageHost>();
  private closing?: Promise<void>;

  constructor(private readonly options: PipelineOptions) {}

  /** Whether the pages go to a page thread once one holds rows (false: all on this thread). */
  get threaded(): boolean {
    return this.options.pageThread;
  }

  startWalk(setup: WalkSetup, host: PageHost): PipelineWalk {
    this.assertOpen();
    const { walk: name } = setup;
    this.hosts.set(name, host);
    const place =
      this.options.pageThread && this.thread && !this.thread.gone ? this.thread : this.here();
    place.stages.notify('startWalk', [setup]);
    const walk: RoutedWalk = { setup, place, places: [place], pages: new Map(), nextSeq: 1 };
    return {
      parse: (bytes, signal) => this.parse(walk, bytes, signal),
      commit: (seq, cursor) => this.commit(walk, seq, cursor),
      drop: (seq) => {
        const page = walk.pages.get(seq);
        walk.pages.delete(seq);
        page?.place.stages.notify('drop', [name, page.seq]);
      },
      end: async () => {
        try {
          await Promise.all(walk.places.map((at) => at.stages.call('endWalk', [name])));
        } finally {
          this.hosts.delete(name);
        }
      },
    };
  }

  /** Waits for every page in flight, then stops the thread (again: nothing more). */
  close(): Promise<void> {
    this.closing ??= Promise.all([this.local?.close(), this.thread?.close()]).then(() => undefined);
    return this.closing;
  }

  private async parse(
    walk: RoutedWalk,
    bytes: Uint8Array,
    signal: AbortSignal | undefined,
  ): Promise<PageSummary> {
    const name = walk.setup.walk;
    if (walk.place === this.local && this.options.pageThread) {
      const here = await walk.place.stages.call('parse', [name, bytes], { signal });
      // Parsed here after the walk moved, a page goes there too, empty or not: its commit would
      // otherwise wait for the pages ahead of it on the other thread.
      if (here.rowCount === 0 && walk.place === this.local)
        return this.placed(walk, walk.place, here);
      walk.place.stages.notify('drop', [name, here.seq]);
      this.move(walk);
    }
    const { place } = walk;
    const summary = await place.stages.call('parse', [name, bytes], {
      transfer: [bytes.buffer as ArrayBuffer],
      signal,
    });
    return this.placed(walk, place, summary);
  }

  /** The summary as the walk knows it: numbered across the places its pages were parsed in. */
  private placed(walk: RoutedWalk, place: StagesPlace, summary: PageSummary): PageSummary {
    const seq = walk.nextSeq++;
    walk.pages.set(seq, { place, seq: summary.seq });
    return { ...summary, seq };
  }

  /** The walk's later pages go to the page thread (started now if it is not). */
  private move(walk: RoutedWalk): void {
    if (walk.place !== this.local) return;
    this.assertOpen();
    if (!this.thread || this.thread.gone) this.thread = this.pageThread();
    walk.place = this.thread;
    walk.places.push(this.thread);
    this.thread.stages.notify('startWalk', [walk.setup]);
  }

  private commit(walk: RoutedWalk, seq: number, cursor: string | null): Promise<CommitResult> {
    const { walk: name, resource } = walk.setup;
    const page = walk.pages.get(seq);
    if (page === undefined) {
      return Promise.reject(new Error(`page ${seq} of ${name} was not parsed, or already written`));
    }
    walk.pages.delete(seq);
    const send = () => page.place.stages.call('commit', [name, page.seq, cursor]);
    const ahead = walk.last;
    // Each thread commits a walk's pages in the order it is handed them. Across the two, a page
    // waits for the one ahead to commit, and is not written after one that failed
    // (commit-order.ts); a page behind one that waits, waits to be handed over after it.
    const after =
      ahead === undefined
        ? undefined
        : ahead.place === page.place
          ? ahead.after
          : ahead.written.then(
              () => undefined,
              () => Promise.reject(notWrittenError(resource)),
            );
    const written =
      after === undefined
        ? send()
        : after.then(send, (error: unknown) => {
            page.place.stages.notify('drop', [name, page.seq]);
            throw error;
          });
    written.catch(() => undefined);
    after?.catch(() => undefined);
    walk.last = { place: page.place, written, after };
    return written;
  }

  private assertOpen(): void {
    if (this.closing) throw new OcsSyncError('The page pipeline is closed.');
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
  private here(): StagesPlace {
    if (this.local) return this.local;
    const { warehouse, keys } = this.options;
    const sink: PageSink = {
      writePage: (page) => warehouse.writePage(page),
      forget: () => undefined,
      close: async () => undefined,
    };
    const stages = new PageStages(sink, warehouse.dialect, keys);
    this.local = {
      stages: inThisThread(servePageStages(stages, (walk) => this.hosts.get(walk)!)),
      gone: false,
      close: () => stages.close(),
    };
    return this.local;
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
      ...(setup.youngGenerationMb
        ? { resourceLimits: { maxYoungGenerationSizeMb: setup.youngGenerationMb } }
        : {}),
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
