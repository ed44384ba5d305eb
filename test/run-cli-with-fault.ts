/**
 * The CLI from source, as run-cli-from-source.ts, with one fault injected from outside the
 * program, for the tests of crashes and stops (crash-only-process.long.test.ts). `TEST_FAULT` picks it:
 *
 * - `throw-after-responses:N`: an exception nothing catches, thrown from a timer once the server
 *   has answered N requests;
 * - `reject-after-responses:N`: a promise rejection nothing handles, likewise;
 * - `signal-after-output:SIGNAL`: the process sends itself SIGNAL (SIGTERM, SIGKILL) as soon as
 *   it has written its first line to stdout (`export parquet` writes one per table done).
 *
 * The program itself has no hook for tests: the faults come in through undici's diagnostics
 * channel and stdout, as a bug or an operator would.
 */
import { subscribe } from 'node:diagnostics_channel';
import { main } from '../src/cli/main.js';

const fault = process.env.TEST_FAULT ?? '';
delete process.env.TEST_FAULT;
const [kind, argument = ''] = fault.split(':');

if (kind === 'throw-after-responses' || kind === 'reject-after-responses') {
  let answered = 0;
  subscribe('undici:request:headers', () => {
    answered += 1;
    if (answered !== Number(argument)) return;
    setTimeout(() => {
      if (kind === 'throw-after-responses') throw new TypeError('injected fault (test)');
      void Promise.reject(new RangeError('injected rejection (test)'));
    }, 0);
  });
} else if (kind === 'signal-after-output') {
  const write = process.stdout.write.bind(process.stdout);
  let signalled = false;
  process.stdout.write = ((...args: Parameters<typeof write>) => {
    const written = write(...args);
    if (!signalled) {
      signalled = true;
      process.kill(process.pid, argument as NodeJS.Signals);
    }
    return written;
  }) as typeof write;
} else if (fault !== '') {
  throw new Error(`Unknown TEST_FAULT ${fault}`);
}

// vite-node's Vite server exits the process on SIGTERM; the real bin has no such listener.
process.removeAllListeners('SIGTERM');
process.exitCode = await main(process.argv.slice(2));
