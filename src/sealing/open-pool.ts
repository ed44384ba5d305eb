/**
 * Where sealed values are opened. One RSA-OAEP private-key operation per value (about 2 ms at
 * 3072 bits) would hold the sync's thread, and every walk on it, for minutes on a large team;
 * a pool of worker threads (open-thread.ts) opens them on every core instead, while the sync's
 * thread goes on with other walks.
 *
 * - A page's values go as one batch, cut into chunks so every thread has work and the last one
 *   to finish is short; chunks of every walk share one queue, first come, first served.
 * - The threads start with the first batch (a run that opens nothing starts none), more only
 *   while enough values wait to be worth one; each gets the keys once as it starts, and `close()`
 *   stops them all: the sync closes the pool when its walks end, however they end, so a daemon
 *   keeps no thread (nor key) between runs.
 * - A batch answers all of its values, in order, or fails as a whole (aborted, or a thread that
 *   stopped): a page is never stored with some of its values missing.
 *
 * `secrets.open_threads: 0` opens on the sync's thread, as before the pool.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { OcsSyncError } from '../errors.js';
import { threadModule } from '../package-info.js';
import { ThreadBridge } from '../thread-bridge.js';
import {
  openSealedValues,
  type OpenedValues,
  type OpeningKeys,
  type OpeningPolicy,
  type OpenThreadApi,
} from './open-values.js';

export interface SealedValueOpener {
  /** Every value of the batch opened as `policy` says, or a rejection (abort, a stopped thread). */
  open(
    policy: OpeningPolicy,
    tokens: readonly string[],
    signal?: AbortSignal,
  ): Promise<OpenedValues>;
  /** Stops the threads (a batch still waiting is refused); a later batch starts them again. */
  close(): Promise<void>;
}

/** The most threads `secrets.open_threads` may ask for. */
export const MAX_OPEN_THREADS = 64;
/** Each thread costs about 10 MB; the default stays within 8 of them whatever the machine. */
const DEFAULT_OPEN_THREADS_CAP = 8;
/** Values per message: enough that posting costs nothing beside the RSA work, few enough to share. */
const MAX_CHUNK = 32;
/** Chunks per thread a batch is cut into, so the threads finish it close together. */
const CHUNKS_PER_THREAD = 4;
/**
 * Starting a thread costs about as much CPU as opening 64 values (some 130 ms at 3072 bits,
 * measured): beyond the first, a thread starts only when at least that many values wait for one,
 * so a team with a few sealed rows starts one thread, not one per core.
 */
const VALUES_WORTH_A_THREAD = 64;

/** One thread per core the process may use, at most 8. */
export function defaultOpenThreads(): number {
  return Math.max(1, Math.min(availableParallelism(), DEFAULT_OPEN_THREADS_CAP));
}

export function createSealedValueOpener(
  keys: OpeningKeys,
  threads: number = defaultOpenThreads(),
): SealedValueOpener {
  return threads === 0 ? new InThreadOpener(keys) : new OpenThreadPool(keys, threads);
}

/** Opens on the calling thread (`secrets.open_threads: 0`, and the tests' reference). */
export class InThreadOpener implements SealedValueOpener {
  constructor(private readonly keys: OpeningKeys) {}

  async open(
    policy: OpeningPolicy,
    tokens: readonly string[],
    signal?: AbortSignal,
  ): Promise<OpenedValues> {
    signal?.throwIfAborted();
    return openSealedValues(policy, tokens, this.keys);
  }

  async close(): Promise<void> {}
}

interface Batch {
  values: unknown[];
  failures: OpenedValues['failures'];
  /** Chunks not answered yet. */
  waiting: number;
  settled: boolean;
  resolve(opened: OpenedValues): void;
  reject(error: unknown): void;
  /** Removes the abort listener. */
  release(): void;
}

interface Chunk {
  batch: Batch;
  /** Index of the chunk's first value in its batch. */
  offset: number;
  policy: OpeningPolicy;
  tokens: string[];
}

interface PoolThread {
  worker: Worker;
  /** Its calls; refs the thread only while a chunk waits on it. */
  bridge: ThreadBridge<OpenThreadApi>;
  /** The chunk it works on; undefined while idle. */
  chunk?: Chunk;
  /** Set when close() terminates it: its exit is expected. */
  stopping: boolean;
}

export class OpenThreadPool implements SealedValueOpener {
  private readonly threads = new Set<PoolThread>();
  private queue: Chunk[] = [];

  constructor(
    private readonly keys: OpeningKeys,
    readonly size: number,
    /** The threads' module: open-thread (tests give one that stops). */
    private readonly threadModule?: URL,
  ) {
    if (!Number.isInteger(size) || size < 1 || size > MAX_OPEN_THREADS) {
      throw new RangeError(`A pool has 1 to ${MAX_OPEN_THREADS} threads, not ${size}.`);
    }
  }

  /** Threads started and not yet stopped (for tests and metrics). */
  get running(): number {
    return this.threads.size;
  }

  open(
    policy: OpeningPolicy,
    tokens: readonly string[],
    signal?: AbortSignal,
  ): Promise<OpenedValues> {
    if (tokens.length === 0) return Promise.resolve({ values: [], failures: [] });
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<OpenedValues>((resolve, reject) => {
      const onAbort = () => this.fail(batch, signal?.reason);
      const batch: Batch = {
        values: new Array(tokens.length),
        failures: [],
        waiting: 0,
        settled: false,
        resolve,
        reject,
        release: () => signal?.removeEventListener('abort', onAbort),
      };
      const size = Math.min(
        MAX_CHUNK,
        Math.max(1, Math.ceil(tokens.length / (this.size * CHUNKS_PER_THREAD))),
      );
      for (let offset = 0; offset < tokens.length; offset += size) {
        batch.waiting += 1;
        this.queue.push({ batch, offset, policy, tokens: tokens.slice(offset, offset + size) });
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    const threads = [...this.threads];
    this.threads.clear();
    const stopped = new OcsSyncError('The threads that open sealed values were stopped.');
    for (const chunk of this.queue) this.fail(chunk.batch, stopped);
    this.queue = [];
    for (const thread of threads) {
      thread.stopping = true;
      if (thread.chunk) this.fail(thread.chunk.batch, stopped);
      thread.bridge.close(stopped);
    }
    await Promise.all(threads.map((thread) => thread.worker.terminate()));
  }

  /** Hands queued chunks to idle threads, starting threads up to the pool's size as work needs. */
  private dispatch(): void {
    while (this.queue.length > 0) {
      const thread = this.idleThread();
      if (!thread) return;
      const chunk = this.queue.shift()!;
      if (chunk.batch.settled) continue;
      thread.chunk = chunk;
      // A thread that stops fails its chunk's batch through lost(), not here.
      thread.bridge.call('open', [chunk.policy, chunk.tokens]).then(
        (opened) => this.answered(thread, chunk, opened),
        () => undefined,
      );
    }
  }

  private idleThread(): PoolThread | undefined {
    for (const thread of this.threads) if (!thread.chunk) return thread;
    if (this.threads.size >= this.size) return undefined;
    return this.threads.size === 0 || this.valuesWaiting() >= VALUES_WORTH_A_THREAD
      ? this.start()
      : undefined;
  }

  private valuesWaiting(): number {
    let values = 0;
    for (const chunk of this.queue) if (!chunk.batch.settled) values += chunk.tokens.length;
    return values;
  }

  private start(): PoolThread {
    const { url, execArgv } = threadModule(import.meta.url, 'open-thread');
    const worker = new Worker(this.threadModule ?? url, {
      workerData: this.keys,
      // Chunks and their answers are small: a small young generation keeps each thread's RSS low.
      resourceLimits: { maxYoungGenerationSizeMb: 4 },
      execArgv,
    });
    // A busy thread keeps the process alive; an idle one does not (the bridge refs it per call).
    const bridge = new ThreadBridge<OpenThreadApi>(worker, {
      stopped: (cause) =>
        new OcsSyncError(
          `A thread that opens sealed values stopped (${cause.slice(0, 200)}); the page was not stored.`,
          { hint: 'Run the sync again: every committed page is kept, and it resumes after them.' },
        ),
    });
    const thread: PoolThread = { worker, bridge, stopping: false };
    void bridge.closed.then((error) => this.lost(thread, error));
    this.threads.add(thread);
    return thread;
  }

  private answered(thread: PoolThread, chunk: Chunk, opened: OpenedValues): void {
    if (thread.chunk !== chunk) return;
    thread.chunk = undefined;
    const { batch, offset } = chunk;
    if (!batch.settled) {
      for (let index = 0; index < opened.values.length; index++) {
        batch.values[offset + index] = opened.values[index];
      }
      for (const failure of opened.failures) {
        batch.failures.push({ index: offset + failure.index, reason: failure.reason });
      }
      batch.waiting -= 1;
      if (batch.waiting === 0) {
        batch.settled = true;
        batch.release();
        batch.failures.sort((a, b) => a.index - b.index);
        batch.resolve({ values: batch.values, failures: batch.failures });
      }
    }
    this.dispatch();
  }

  /** A thread stopped on its own: the batch it worked on fails; later chunks get a new thread. */
  private lost(thread: PoolThread, error: Error): void {
    if (thread.stopping || !this.threads.delete(thread)) return;
    const chunk = thread.chunk;
    thread.chunk = undefined;
    if (chunk) this.fail(chunk.batch, error);
    void thread.worker.terminate();
    this.dispatch();
  }

  private fail(batch: Batch, error: unknown): void {
    if (batch.settled) return;
    batch.settled = true;
    batch.release();
    this.queue = this.queue.filter((chunk) => chunk.batch !== batch);
    batch.reject(error);
  }
}
