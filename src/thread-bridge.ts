/**
 * One typed bridge between two threads, over a Worker or a MessagePort, used by every thread of
 * ocs-sync (the page thread, SQLite's writer thread, the threads that open sealed values). Each
 * side may call the other's methods and answer the other's calls on the same endpoint, both typed
 * from one interface: `call('commit', [page])` is checked against the serving side's `commit`.
 *
 * - Calls are numbered and wait for their answer; a notification (`notify`) waits for nothing.
 * - The endpoint keeps the process alive only while calls wait for an answer, so an idle thread
 *   never holds a process open (`keepAlive` for a thread's own port to its parent, which lives as
 *   long as that port).
 * - When the other side stops (a Worker's 'error' or 'exit', a port's 'close') or the caller
 *   closes the bridge, every waiting call and every later one fails with the caller's error.
 * - An AbortSignal gives up one call: it rejects with the signal's reason, and the answer, should
 *   it come, finds no one waiting.
 * - Errors cross as themselves: their class (by name, from errors.ts's ERROR_CLASSES, else the
 *   nearest one it extends), message, stack and own plain fields (hint, exitCode, code, ...). An
 *   error one side threw answering a call that comes back to it through a later failure of the
 *   other side (the run's own error, thrown answering the page thread, failing the page that
 *   asked) is the very same object again.
 */
import { Worker, type MessagePort, type TransferListItem } from 'node:worker_threads';
import { ERROR_CLASSES } from './errors.js';

type Method = (...args: never[]) => unknown;

/** The names of `T`'s methods. */
export type MethodOf<T> = { [K in keyof T]-?: T[K] extends Method ? K : never }[keyof T] & string;
/** What method `K` of `T` takes. */
export type ArgsOf<T, K extends keyof T> = T[K] extends (...args: infer A) => unknown ? A : never;
/** What method `K` of `T` gives, once settled. */
export type ResultOf<T, K extends keyof T> = T[K] extends (...args: never[]) => infer R
  ? Awaited<R>
  : never;

export interface CallOptions {
  /** Moved to the other side, not copied: the sender's buffers are emptied (detached). */
  transfer?: readonly TransferListItem[];
  /** Gives the call up: it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** The calling side of an API: a bridge to a thread that serves it, or the API in this thread. */
export interface Caller<Remote> {
  call<K extends MethodOf<Remote>>(
    method: K,
    args: ArgsOf<Remote, K>,
    options?: CallOptions,
  ): Promise<ResultOf<Remote, K>>;
  /** Calls `method` and waits for nothing, not even for it to be received. */
  notify<K extends MethodOf<Remote>>(
    method: K,
    args: ArgsOf<Remote, K>,
    options?: Pick<CallOptions, 'transfer'>,
  ): void;
}

export interface BridgeOptions<Local> {
  /** What this side answers: the methods the other side calls. */
  serve?: Local;
  /**
   * The error every waiting and later call fails with once the other side stopped on its own;
   * `cause` says how ("it exited with code 9", the thread's uncaught error, "its port closed").
   */
  stopped(cause: string): Error;
  /**
   * Keeps the endpoint referenced while no call waits: a thread's own port to its parent, which
   * must keep the thread alive until it is closed. Default: referenced only while calls wait.
   */
  keepAlive?: boolean;
}

type Endpoint = Worker | MessagePort;

/** An error as it crosses: class by name, message, stack, own plain fields. */
interface CarriedError {
  className: string;
  message: string;
  stack?: string;
  fields: Record<string, unknown>;
  /** The sender threw it answering a call: its number there, should it come back. */
  thrown?: number;
  /** The receiver's own error (its `thrown` number), coming back. */
  returned?: number;
}

type Message =
  | { kind: 'call'; id: number; method: string; args: unknown[] }
  | { kind: 'notify'; method: string; args: unknown[] }
  | { kind: 'done'; id: number; value: unknown }
  | { kind: 'failed'; id: number; error: CarriedError };

interface Waiting {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** Errors kept for their return (a run's errors sent to the page thread): the most recent only. */
const KEPT_ERRORS = 64;

export class ThreadBridge<Remote, Local = Record<never, never>> implements Caller<Remote> {
  private nextId = 1;
  private readonly pending = new Map<number, Waiting>();
  private idleWaiters: Array<() => void> = [];
  private closedWith?: Error;
  private resolveClosed!: (error: Error) => void;
  /** Settles with the error calls fail with, once the bridge is closed or the other side stopped. */
  readonly closed = new Promise<Error>((resolve) => (this.resolveClosed = resolve));
  /** Errors this side threw answering calls, by number, should they come back. */
  private readonly thrown = new Map<number, unknown>();
  private nextThrown = 1;
  /** Errors received from the other side that it threw answering: their number there. */
  private readonly received = new WeakMap<object, number>();

  constructor(
    private readonly endpoint: Endpoint,
    private readonly options: BridgeOptions<Local>,
  ) {
    endpoint.on('message', (message: Message) => this.receive(message));
    if (endpoint instanceof Worker) {
      endpoint.on('error', (error: unknown) =>
        this.stop(error instanceof Error ? error.message : String(error)),
      );
      endpoint.on('exit', (code) => this.stop(`it exited with code ${code}`));
    } else {
      endpoint.on('close', () => this.stop('its port closed'));
    }
    // A port's 'message' listener refs it: only waiting calls keep the process alive.
    if (!options.keepAlive) endpoint.unref();
  }

  /** True once closed, or once the other side stopped. */
  get isClosed(): boolean {
    return this.closedWith !== undefined;
  }

  call<K extends MethodOf<Remote>>(
    method: K,
    args: ArgsOf<Remote, K>,
    options: CallOptions = {},
  ): Promise<ResultOf<Remote, K>> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.settle(id);
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const release = () => signal?.removeEventListener('abort', onAbort);
      if (this.pending.size === 0 && !this.options.keepAlive) this.endpoint.ref();
      this.pending.set(id, {
        resolve: (value) => {
          release();
          resolve(value as ResultOf<Remote, K>);
        },
        reject: (error) => {
          release();
          reject(error);
        },
      });
      try {
        this.post({ kind: 'call', id, method, args }, options.transfer);
      } catch (error) {
        // Arguments that cannot cross (a function, say): the call fails here, nothing waits.
        this.settle(id)?.reject(error);
      }
    });
  }

  notify<K extends MethodOf<Remote>>(
    method: K,
    args: ArgsOf<Remote, K>,
    options: Pick<CallOptions, 'transfer'> = {},
  ): void {
    if (this.closedWith) return;
    this.post({ kind: 'notify', method, args }, options.transfer);
  }

  /** Resolves once no call waits for an answer. */
  idle(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Fails every waiting call and every later one with `error`, and lets the process end whatever
   * the endpoint does: stopping a thread or closing a port is left to the caller.
   */
  close(error: Error): void {
    if (this.closedWith) return;
    this.closedWith = error;
    const waiting = [...this.pending.values()];
    this.pending.clear();
    this.thrown.clear();
    this.endpoint.unref();
    for (const call of waiting) call.reject(error);
    this.wakeIdle();
    this.resolveClosed(error);
  }

  private stop(cause: string): void {
    if (!this.closedWith) this.close(this.options.stopped(cause));
  }

  private post(message: Message, transfer: readonly TransferListItem[] = []): void {
    this.endpoint.postMessage(message, transfer);
  }

  private settle(id: number): Waiting | undefined {
    const waiting = this.pending.get(id);
    if (!waiting) return undefined;
    this.pending.delete(id);
    if (this.pending.size === 0) {
      if (!this.options.keepAlive) this.endpoint.unref();
      this.wakeIdle();
    }
    return waiting;
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private receive(message: Message): void {
    if (this.closedWith) return;
    switch (message.kind) {
      case 'done':
        this.settle(message.id)?.resolve(message.value);
        break;
      case 'failed': {
        const waiting = this.settle(message.id);
        waiting?.reject(this.restore(message.error));
        break;
      }
      case 'call':
        this.answer(message.id, message.method, message.args);
        break;
      case 'notify':
        // Nobody waits for it: a failure is this thread's own (uncaught), as any other.
        void this.handler(message.method)?.(...message.args);
        break;
    }
  }

  private handler(method: string): ((...args: unknown[]) => unknown) | undefined {
    const served = this.options.serve as Record<string, unknown> | undefined;
    if (!served || method in Object.prototype) return undefined;
    const handler = served[method];
    return typeof handler === 'function'
      ? (...args) => (handler as (...args: unknown[]) => unknown).apply(served, args)
      : undefined;
  }

  private answer(id: number, method: string, args: unknown[]): void {
    const failed = (error: unknown) => {
      if (!this.closedWith) this.post({ kind: 'failed', id, error: this.carry(error, true) });
    };
    const handler = this.handler(method);
    if (!handler) {
      failed(new Error(`${method} is not served on this thread`));
      return;
    }
    let value: unknown;
    try {
      value = handler(...args);
    } catch (error) {
      failed(error);
      return;
    }
    Promise.resolve(value).then((result) => {
      try {
        if (!this.closedWith) this.post({ kind: 'done', id, value: result });
      } catch (error) {
        // A result that cannot cross fails its call; the caller would otherwise wait forever.
        failed(error);
      }
    }, failed);
  }

  /** An error as it crosses; `thrownHere`: thrown answering a call, kept should it come back. */
  private carry(error: unknown, thrownHere: boolean): CarriedError {
    if (!(error instanceof Error)) {
      return { className: 'Error', message: String(error), fields: {} };
    }
    const carried: CarriedError = {
      className: registeredClassOf(error),
      message: error.message,
      stack: error.stack,
      fields: plainFieldsOf(error),
    };
    const returned = this.received.get(error);
    if (returned !== undefined) {
      carried.returned = returned;
    } else if (thrownHere) {
      carried.thrown = this.nextThrown++;
      this.thrown.set(carried.thrown, error);
      // A long-lived bridge keeps only the recent ones: an old one comes back as a copy.
      if (this.thrown.size > KEPT_ERRORS) this.thrown.delete(this.thrown.keys().next().value!);
    }
    return carried;
  }

  private restore(carried: CarriedError): unknown {
    if (carried.returned !== undefined && this.thrown.has(carried.returned)) {
      const original = this.thrown.get(carried.returned);
      this.thrown.delete(carried.returned);
      return original;
    }
    const error = rebuildError(carried);
    if (carried.thrown !== undefined) this.received.set(error, carried.thrown);
    return error;
  }
}

/** The name of the nearest class of ERROR_CLASSES the error is an instance of, else `Error`. */
function registeredClassOf(error: Error): string {
  for (let proto = Object.getPrototypeOf(error); proto; proto = Object.getPrototypeOf(proto)) {
    const name = (proto as { constructor?: { name?: string } }).constructor?.name;
    if (name && ERROR_CLASSES[name]?.prototype === proto) return name;
  }
  return 'Error';
}

function plainFieldsOf(error: Error): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) {
    if (key !== 'cause' && isPlain(value)) fields[key] = value;
  }
  return fields;
}

function isPlain(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return typeof value !== 'function';
  if (Array.isArray(value)) return value.every(isPlain);
  return false;
}

/** The error again, of its class (its constructor not run: its fields come as they were). */
function rebuildError(carried: CarriedError): Error {
  const type = ERROR_CLASSES[carried.className];
  const error = (type ? Object.create(type.prototype) : new Error()) as Error;
  Object.defineProperty(error, 'message', {
    value: carried.message,
    writable: true,
    configurable: true,
  });
  if (carried.stack !== undefined) {
    Object.defineProperty(error, 'stack', {
      value: carried.stack,
      writable: true,
      configurable: true,
    });
  }
  Object.assign(error, carried.fields);
  return error;
}

/**
 * The same calls served in this thread: the shape a bridge gives, for the times the work stays
 * here (a sync without a page thread). Each call starts at once, in the order made; a method's
 * throw is its call's rejection; transfer lists are moot (nothing is copied).
 */
export function inThisThread<Api>(served: Api): Caller<Api> {
  const run = (method: string, args: readonly unknown[]) =>
    (served as Record<string, (...args: unknown[]) => unknown>)[method]!.apply(served, [...args]);
  return {
    call: async (method, args, options = {}) => {
      const { signal } = options;
      signal?.throwIfAborted();
      const result = Promise.resolve(run(method, args)) as Promise<ResultOf<Api, typeof method>>;
      if (!signal) return result;
      return new Promise((resolve, reject) => {
        const onAbort = () => reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
        result.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
      });
    },
    notify: (method, args) => {
      void run(method, args);
    },
  };
}
