/**
 * Lets a thread started from source run TypeScript: the tests run src/ through vitest, but a
 * worker thread (the SQLite writer thread) is loaded by Node itself. The thread is started with
 * `--import` of this file when its own module is a .ts file (src/warehouse/sqlite/page-committer.ts).
 */
import { register } from 'node:module';

register('./typescript-loader.mjs', import.meta.url);
