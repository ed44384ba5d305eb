/**
 * A process for the tests of src/thread-bridge.ts that only its own event loop can answer: does a
 * bridge to a thread keep the process alive while a call waits, and never otherwise? It starts
 * test/bridge-thread.mjs, does what `process.argv[2]` says, prints what it saw, and leaves the
 * thread running: the process must end on its own. Run with `--import test/typescript-hooks.mjs`.
 */
import { URL } from 'node:url';
import { Worker } from 'node:worker_threads';

const { ThreadBridge } = await import('../src/thread-bridge.ts');

const worker = new Worker(new URL('./bridge-thread.mjs', import.meta.url));
const bridge = new ThreadBridge(worker, {
  stopped: (cause) => new Error(`the thread stopped (${cause})`),
  serve: {},
});
const said = (promise) =>
  promise.then(
    (value) => console.log(`answered ${JSON.stringify(value)}`),
    (error) => console.log(`failed ${error.message}`),
  );

switch (process.argv[2]) {
  case 'unused':
    console.log('never called');
    break;
  case 'idle':
    await said(bridge.call('echo', ['hello']));
    break;
  case 'waiting':
    // Nothing but the call waiting keeps this process alive until the answer comes.
    void said(bridge.call('later', ['late', 200]));
    break;
  case 'died':
    await said(bridge.call('die', [9]));
    await said(bridge.call('echo', ['after']));
    break;
  case 'closed': {
    const waiting = said(bridge.call('never', []));
    await said(bridge.call('echo', ['before']));
    bridge.close(new Error('closed by its owner'));
    await waiting;
    await said(bridge.call('echo', ['after']));
    break;
  }
}
