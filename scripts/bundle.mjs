/**
 * Bundles the compiled CLI (dist/src, from `tsc`) into dist/bundle: the launcher loads a few
 * files instead of some 450 modules (kysely alone is 262), which was most of a small team's run
 * (issue 47). Each thread's entry is a file of its own beside the chunks, where threadModule()
 * (src/package-info.ts) looks for it; each command and each dialect's warehouse stays a chunk
 * loaded when used, as in dist/src.
 *
 * Left out, loaded from node_modules as before: native addons and what loads them (better-sqlite3,
 * pg, duckdb), what starts threads of its own from its files (pino's transports), undici (a floor
 * of every run in its own right), and packages the code loads only on some paths (the AWS SDK,
 * yaml, prom-client, node-cron). zod, which every command's settings need, is bundled.
 */
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const compiled = join(root, 'dist', 'src');
const out = join(root, 'dist', 'bundle');

const ENTRIES = {
  main: 'cli/main.js',
  'page-thread': 'sync/pipeline/page-thread.js',
  'writer-thread': 'warehouse/sqlite/writer-thread.js',
  'open-thread': 'sealing/open-thread.js',
};

rmSync(out, { recursive: true, force: true });
await build({
  entryPoints: Object.fromEntries(
    Object.entries(ENTRIES).map(([name, path]) => [name, join(compiled, path)]),
  ),
  outdir: out,
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  chunkNames: 'chunk-[hash]',
  external: [
    'better-sqlite3',
    'pg',
    'pg-copy-streams',
    '@duckdb/*',
    '@aws-sdk/*',
    'pino',
    'pino-pretty',
    'undici',
    'yaml',
    'prom-client',
    'node-cron',
  ],
  // The bundled CommonJS packages (commander) require Node's own modules.
  banner: {
    js: "import { createRequire as bundleRequire } from 'node:module'; const require = bundleRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
