/**
 * A thread for the tests of src/thread-bridge.ts: it serves a few methods to its parent (echo,
 * bytes received, a call that never answers, errors of each kind, dying in the middle of a call)
 * and asks its parent back on the same port. It runs from source, through the TypeScript hooks
 * (typescript-hooks.mjs).
 */
import { setImmediate, setTimeout } from 'node:timers';
import { parentPort, workerData } from 'node:worker_threads';
import './typescript-hooks-unless-given.mjs';

const { ThreadBridge } = await import('../src/thread-bridge.ts');
const { BodyNotJsonError, HttpStatusError, SealedValueError } = await import('../src/errors.ts');

/** The port to serve: the parent's, or one it sent (`workerData.port`). */
const port = workerData?.port ?? parentPort;
const notes = [];

const bridge = new ThreadBridge(port, {
  keepAlive: true,
  stopped: (cause) => new Error(`the parent stopped (${cause})`),
  serve: {
    echo: (value) => value,
    /** How many bytes arrived, and that they are the ones sent. */
    bytes: (bytes) => ({ length: bytes.byteLength, first: bytes[0] }),
    later: (value, ms) => new Promise((resolve) => setTimeout(() => resolve(value), ms)),
    never: () => new Promise(() => undefined),
    note: (value) => {
      notes.push(value);
    },
    notes: () => notes,
    fail: (kind) => {
      if (kind === 'sealed') throw new SealedValueError('users', '7', 'secret', 'does not open');
      if (kind === 'body') throw new BodyNotJsonError(12);
      if (kind === 'http') throw new HttpStatusError(404, 'api/x/', 'Not found', 'a hint');
      if (kind === 'sqlite') {
        const error = new Error('database is locked');
        error.code = 'SQLITE_BUSY';
        throw error;
      }
      if (kind === 'string') throw 'just a string';
      return Promise.reject(new TypeError('not a page'));
    },
    /** Asks the parent back, on the same port, while the parent waits for this answer. */
    twiceByParent: async (value) => bridge.call('twice', [value]),
    /** The parent's own error, thrown answering this thread, fails this call. */
    failWithParentsError: async () => {
      await bridge.call('throwOwn', []);
    },
    /** Ends the thread while the call waits. */
    die: (code) => {
      setImmediate(() => process.exit(code));
      return new Promise(() => undefined);
    },
    /** An error nobody catches: the thread stops with it. */
    crash: (message) => {
      setImmediate(() => {
        throw new Error(message);
      });
      return new Promise(() => undefined);
    },
    /** Closes the port served (a port sent in workerData): the parent's side hears 'close'. */
    closePort: () => {
      setImmediate(() => port.close());
      return new Promise(() => undefined);
    },
  },
});
