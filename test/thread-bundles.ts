/**
 * The suite's global setup: each worker thread of src/ (the page thread, SQLite's writer thread,
 * the threads that open sealed values) bundled once into one file, so that a thread a test starts
 * loads one module instead of running every file of src/ through the TypeScript hooks again
 * (typescript-hooks.mjs). A sync starts two threads; the suite runs hundreds of syncs. The bundles
 * are made from the sources at every run, so they are never older than the code under test.
 */
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../src/package-info.js';

/** Where the bundles go; vitest.config.ts hands it to the tests as OCS_TEST_THREAD_BUNDLES. */
export const THREAD_BUNDLES = join(projectRoot(), 'node_modules', '.cache', 'ocs-sync-threads');

const THREADS = {
  'page-thread': 'src/sync/pipeline/page-thread.ts',
  'writer-thread': 'src/warehouse/sqlite/writer-thread.ts',
  'open-thread': 'src/sealing/open-thread.ts',
};

export default async function bundleThreads(): Promise<void> {
  rmSync(THREAD_BUNDLES, { recursive: true, force: true });
  await build({
    entryPoints: Object.fromEntries(
      Object.entries(THREADS).map(([name, path]) => [name, join(projectRoot(), path)]),
    ),
    outdir: THREAD_BUNDLES,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Dependencies load from node_modules as in a build; only src/ is bundled.
    packages: 'external',
    // Each dialect's warehouse code is a chunk of its own, loaded when the thread opens it (as in
    // dist/): a SQLite sync's threads never load pg.
    splitting: true,
    sourcemap: 'linked',
    logLevel: 'warning',
  });
}
