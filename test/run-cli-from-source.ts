/**
 * The CLI as its own process, from source (through vite-node, no build), for tests that send it
 * real OS signals. Same as bin/ocs-sync.js, which runs the built copy.
 */
import { main } from '../src/cli/main.js';

// vite-node's Vite server exits the process on SIGTERM; the real bin has no such listener.
process.removeAllListeners('SIGTERM');
process.exitCode = await main(process.argv.slice(2));
