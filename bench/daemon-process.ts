/**
 * Child process of the soak: `ocs-sync` itself (its arguments and environment as given), from the
 * built copy or, under vite-node, from source. The same as bin/ocs-sync.js.
 */
import { main } from '../src/cli/main.js';

// vite-node's Vite server exits the process on SIGTERM; the real bin has no such listener.
process.removeAllListeners('SIGTERM');
process.exitCode = await main(process.argv.slice(2));
