/**
 * The bridge between threads (src/thread-bridge.ts), on its own, with real threads
 * (test/bridge-thread.mjs): typed calls both ways on one endpoint, bytes moved not copied, a
 * thread that dies in the middle of a call, a call in flight when its owner closes the bridge,
 * abort, errors as themselves, and a process that lives while a call waits and never otherwise.
 */
import { spawn } from 'node:child_process';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BodyNotJsonError,
  HttpStatusError,
  OcsSyncError,
  SealedValueError,
  WarehouseError,
  ERROR_CLASSES,
} from '../src/errors.js';
import { ThreadBridge, inThisThread } from '../src/thread-bridge.js';

const here = dirname(fileURLToPath(import.meta.url));

/** What test/bridge-thread.mjs serves. */
interface ThreadApi {
  echo<T>(value: T): T;
  bytes(bytes: Uint8Array): { length: number; first: number };
  later<T>(value: T, ms: number): Promise<T>;
  never(): Promise<never>;
  note(value: string): void;
  notes(): string[];
  fail(kind: 'sealed' | 'body' | 'http' | 'sqlite' | 'string' | 'plain'): void;
  twiceByParent(value: number): Promise<number>;
  failWithParentsError(): Promise<void>;
  die(code: number): Promise<never>;
  crash(message: string): Promise<never>;
  closePort(): Promise<never>;
}

/** What this side serves the thread. */
interface ParentApi {
  twice(value: number): number;
  throwOwn(): void;
}

let cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

/** Whether a port keeps the process alive (MessagePort.hasRef, which @types/node does not list). */
const hasRef = (port: MessagePort) => (port as unknown as { hasRef(): boolean }).hasRef();

const stopped = (cause: string) =>
  new OcsSyncError(`The test thread stopped (${cause}).`, { hint: 'a hint' });

function startThread(serve: Partial<ParentApi> = {}, workerData?: unknown, transfer = []) {
  const worker = new Worker(new URL('./bridge-thread.mjs', import.meta.url), {
    workerData,
    transferList: transfer,
  });
  cleanups.push(() => worker.terminate());
  const bridge = new ThreadBridge<ThreadApi, Partial<ParentApi>>(worker, { serve, stopped });
  return { worker, bridge };
}

describe('the bridge between threads', () => {
  it('calls, typed from one interface, both ways on one endpoint; notifications wait for nothing', async () => {
    const { bridge } = startThread({ twice: (value) => value * 2 });
    expect(await bridge.call('echo', [{ a: [1, 'two'] }])).toEqual({ a: [1, 'two'] });
    // The thread asks this side while this side waits for its answer.
    expect(await bridge.call('twiceByParent', [21])).toBe(42);
    bridge.notify('note', ['first']);
    bridge.notify('note', ['second']);
    // In the order sent, before the call after them.
    expect(await bridge.call('notes', [])).toEqual(['first', 'second']);
    await bridge.idle();
  });

  it('moves the bytes of a transfer list: the sender’s buffer is detached', async () => {
    const { bridge } = startThread();
    const bytes = new Uint8Array([7, 8, 9]);
    const answer = await bridge.call('bytes', [bytes], { transfer: [bytes.buffer] });
    expect(answer).toEqual({ length: 3, first: 7 });
    expect(bytes.byteLength).toBe(0);
    expect(bytes.buffer.byteLength).toBe(0);
    // Without one, the sender keeps its copy.
    const kept = new Uint8Array([1, 2]);
    expect(await bridge.call('bytes', [kept])).toEqual({ length: 2, first: 1 });
    expect(kept.byteLength).toBe(2);
  });

  it('a thread that dies mid-call fails every waiting call and every later one with the given error', async () => {
    const { worker, bridge } = startThread();
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    const waiting = bridge.call('never', []);
    const dying = bridge.call('die', [9]);
    await expect(dying).rejects.toThrow('The test thread stopped (it exited with code 9).');
    const error = await waiting.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OcsSyncError);
    expect((error as OcsSyncError).hint).toBe('a hint');
    // One error for all of them, later calls too, and notifications go nowhere.
    await expect(bridge.call('echo', [1])).rejects.toBe(error);
    bridge.notify('note', ['lost']);
    expect(bridge.isClosed).toBe(true);
    expect(await bridge.closed).toBe(error);
    await bridge.idle();
    expect(await exited).toBe(9);
  });

  it('a thread stopped by an uncaught error fails the calls with its message', async () => {
    const { bridge } = startThread();
    await expect(bridge.call('crash', ['the thread broke'])).rejects.toThrow(
      'The test thread stopped (the thread broke).',
    );
  });

  it('a port closed on the other side fails the calls waiting on it', async () => {
    const { port1, port2 } = new MessageChannel();
    startThread({}, { port: port2 }, [port2] as never);
    const bridge = new ThreadBridge<ThreadApi>(port1, { stopped });
    cleanups.push(() => port1.close());
    expect(await bridge.call('echo', ['through the port'])).toBe('through the port');
    await expect(bridge.call('closePort', [])).rejects.toThrow(
      'The test thread stopped (its port closed).',
    );
    await expect(bridge.call('echo', [1])).rejects.toThrow('its port closed');
  });

  it('what cannot cross fails its call, on either side, and leaves nothing waiting', async () => {
    const { port1, port2 } = new MessageChannel();
    interface Giver {
      give(): { later: () => number };
      echo<T>(value: T): T;
    }
    const serving = new ThreadBridge<object, Giver>(port1, {
      stopped,
      serve: { give: () => ({ later: () => 1 }), echo: (value) => value },
    });
    const calling = new ThreadBridge<Giver>(port2, { stopped });
    cleanups.push(() => {
      port1.close();
      port2.close();
    });
    // An answer that cannot be cloned comes back as the call's failure.
    await expect(calling.call('give', [])).rejects.toThrow(/could not be cloned/);
    // Arguments that cannot be cloned fail the call before it leaves.
    await expect(calling.call('echo', [() => 1])).rejects.toThrow(/could not be cloned/);
    await calling.idle();
    expect(await calling.call('echo', ['still open'])).toBe('still open');
    void serving;
  });

  it('a call in flight when its owner closes the bridge fails with the owner’s error, and so does every later one', async () => {
    const { bridge } = startThread();
    const waiting = bridge.call('never', []);
    const answered = bridge.call('later', ['late', 50]);
    const closing = new WarehouseError('The warehouse is closed.');
    bridge.close(closing);
    await expect(waiting).rejects.toBe(closing);
    // An answer arriving after the close finds no one waiting.
    await expect(answered).rejects.toBe(closing);
    await expect(bridge.call('echo', [1])).rejects.toBe(closing);
    // Closing again changes nothing.
    bridge.close(new Error('again'));
    await expect(bridge.call('echo', [1])).rejects.toBe(closing);
  });

  it('an aborted call rejects with the signal’s reason, leaves no listener, and the bridge goes on', async () => {
    const { bridge } = startThread();
    const controller = new AbortController();
    const waiting = bridge.call('never', [], { signal: controller.signal });
    const reason = new Error('given up');
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    // Already aborted: nothing is sent.
    await expect(bridge.call('echo', [1], { signal: controller.signal })).rejects.toBe(reason);
    const signal = new AbortController().signal;
    expect(await bridge.call('echo', [2], { signal })).toBe(2);
    expect(await bridge.call('later', [3, 5], { signal })).toBe(3);
    await bridge.idle();
  });

  it('carries errors as themselves: class, message, stack and fields, and the nearest known class', async () => {
    const { bridge } = startThread();
    const sealed = await bridge.call('fail', ['sealed']).catch((error: unknown) => error);
    expect(sealed).toBeInstanceOf(SealedValueError);
    expect(sealed).toBeInstanceOf(OcsSyncError);
    const original = new SealedValueError('users', '7', 'secret', 'does not open');
    expect((sealed as SealedValueError).message).toBe(original.message);
    expect((sealed as SealedValueError).hint).toBe(original.hint);
    expect((sealed as SealedValueError).exitCode).toBe(original.exitCode);
    const { resource, rowId, field } = sealed as SealedValueError;
    expect([resource, rowId, field]).toEqual(['users', '7', 'secret']);
    // The stack is the thread's: where it was thrown.
    expect((sealed as Error).stack).toContain('bridge-thread.mjs');
    const http = (await bridge.call('fail', ['http']).catch((error: unknown) => error)) as
      HttpStatusError | undefined;
    expect(http).toBeInstanceOf(HttpStatusError);
    expect([http!.status, http!.path, http!.detail, http!.hint]).toEqual([
      404,
      'api/x/',
      'Not found',
      'a hint',
    ]);
    // Not an OcsSyncError, and listed: a body worth asking again.
    const body = await bridge.call('fail', ['body']).catch((error: unknown) => error);
    expect(body).toBeInstanceOf(BodyNotJsonError);
    expect((body as BodyNotJsonError).bytes).toBe(12);
    // A class not listed arrives as a plain Error, its own fields kept (a driver's code).
    const sqlite = (await bridge.call('fail', ['sqlite']).catch((error: unknown) => error)) as
      (Error & { code?: string }) | undefined;
    expect(sqlite?.constructor).toBe(Error);
    expect([sqlite?.message, sqlite?.code]).toEqual(['database is locked', 'SQLITE_BUSY']);
    const plain = (await bridge.call('fail', ['plain']).catch((error: unknown) => error)) as Error;
    expect([plain.constructor, plain.message]).toEqual([Error, 'not a page']);
    const text = (await bridge.call('fail', ['string']).catch((error: unknown) => error)) as Error;
    expect(text.message).toBe('just a string');
  });

  it('an error this side threw answering the thread comes back through the thread’s failure as the very same object', async () => {
    const own = new SealedValueError('users', '7', 'secret', 'the run skipped users');
    const { bridge } = startThread({
      throwOwn: () => {
        throw own;
      },
    });
    await expect(bridge.call('failWithParentsError', [])).rejects.toBe(own);
    // Again: each time the same object.
    await expect(bridge.call('failWithParentsError', [])).rejects.toBe(own);
  });

  it('lists every error class of src/errors.ts in one registry', async () => {
    const errors = await import('../src/errors.js');
    const classes = Object.entries(errors).filter(
      ([, value]) => typeof value === 'function' && value.prototype instanceof Error,
    );
    expect(Object.keys(ERROR_CLASSES).sort()).toEqual(classes.map(([name]) => name).sort());
  });
});

describe('the same calls in this thread', () => {
  it('start in the order made, turn a throw into a rejection, and honour the signal', async () => {
    const seen: string[] = [];
    const api = {
      note: (value: string) => {
        seen.push(value);
      },
      fail: (): number => {
        throw new SealedValueError('users', '1', 'f', 'no');
      },
      never: () => new Promise<never>(() => undefined),
    };
    const caller = inThisThread(api);
    caller.notify('note', ['a']);
    const noted = caller.call('note', ['b']);
    expect(seen).toEqual(['a', 'b']);
    await noted;
    await expect(caller.call('fail', [])).rejects.toBeInstanceOf(SealedValueError);
    const controller = new AbortController();
    const waiting = caller.call('never', [], { signal: controller.signal });
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
  });
});

describe('a bridge and the life of its process', () => {
  /** Runs test/bridge-process.mjs: what it printed, once it ended on its own. */
  function runProcess(mode: string): Promise<{ code: number | null; stdout: string }> {
    const env = { ...process.env };
    // The process loads src/ through the hooks given on its command line (its threads inherit them).
    delete env.OCS_TEST_THREAD_BUNDLES;
    const child = spawn(
      process.execPath,
      ['--import', join(here, 'typescript-hooks.mjs'), join(here, 'bridge-process.mjs'), mode],
      { env, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    // One that does not end (a bridge keeping it alive) is ended with the test.
    cleanups.push(() => child.kill('SIGKILL'));
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout })));
  }

  it('an idle bridge keeps no process alive; a waiting call does, until its answer', async () => {
    expect(await runProcess('unused')).toEqual({ code: 0, stdout: 'never called\n' });
    expect(await runProcess('idle')).toEqual({ code: 0, stdout: 'answered "hello"\n' });
    // Nothing else keeps that process alive: without the call's ref it would end unanswered.
    expect(await runProcess('waiting')).toEqual({ code: 0, stdout: 'answered "late"\n' });
  });

  it('a thread that died, or a bridge closed with a call in flight, leaves the process free to end', async () => {
    expect(await runProcess('died')).toEqual({
      code: 0,
      stdout:
        'failed the thread stopped (it exited with code 9)\n' +
        'failed the thread stopped (it exited with code 9)\n',
    });
    expect(await runProcess('closed')).toEqual({
      code: 0,
      stdout: 'answered "before"\nfailed closed by its owner\nfailed closed by its owner\n',
    });
  });

  it('a port is referenced only while a call waits on it, unless it keeps its thread alive', async () => {
    const { port1, port2 } = new MessageChannel();
    startThread({}, { port: port2 }, [port2] as never);
    const bridge = new ThreadBridge<ThreadApi>(port1, { stopped });
    cleanups.push(() => port1.close());
    expect(hasRef(port1)).toBe(false);
    const waiting = bridge.call('later', ['x', 20]);
    expect(hasRef(port1)).toBe(true);
    expect(await waiting).toBe('x');
    expect(hasRef(port1)).toBe(false);
    // A thread's own port to its parent keeps the thread alive until it is closed.
    const { port1: own, port2: other } = new MessageChannel();
    cleanups.push(() => other.close());
    const kept = new ThreadBridge<ThreadApi>(own, { stopped, keepAlive: true });
    expect(hasRef(own)).toBe(true);
    kept.close(new Error('closed'));
    expect(hasRef(own)).toBe(false);
  });
});
