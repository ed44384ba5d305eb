/**
 * Compares the candidate overlap designs (overlap-designs.ts) with the floors and the sync as it
 * is, in interleaved rounds so that machine noise hits each alike; prints every round:
 *
 *   npm run build && node dist/bench/overlap.js [--rows N] [--rounds N] [--latency MS]
 *                                               [--designs a,b,...] [--skip-shell]
 */
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { removeSqliteFiles, runStageProcess, startServer, type BenchOptions } from './bench.js';
import { BENCH_RESOURCE, DEFAULT_BENCH_SEED } from './bench-dataset.js';
import { OVERLAP_DESIGNS, type OverlapDesign } from './overlap-designs.js';
import { jsonEachUpsertSql, saveCursorSql } from './overlap-sql.js';
import type { StageRequest, StageResult } from './stages.js';

/** `sqlite-shell`: SQLite's own limit, the same pages inserted by the sqlite3 shell from files. */
type Entry = 'fetch-only' | 'write-only' | 'sync' | 'sqlite-shell' | OverlapDesign;

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '200000' },
    rounds: { type: 'string', default: '3' },
    latency: { type: 'string', default: '0' },
    designs: { type: 'string', default: OVERLAP_DESIGNS.join(',') },
    /** Leave out the sqlite3 shell (it walks the pages twice more to prepare). */
    'skip-shell': { type: 'boolean', default: false },
  },
});
const options: BenchOptions = {
  rows: Number(values.rows),
  latencyMs: Number(values.latency),
  pageSize: 1000,
  pagesInFlight: 2,
  seed: DEFAULT_BENCH_SEED,
  rounds: Number(values.rounds),
  slowLatencyMs: 0,
  json: false,
  buildPages: true,
  audit: false,
  sealedRows: 0,
  sealedBits: 3072,
  memoryRows: 0,
  startupRounds: 0,
  startupOnly: false,
};
const designs = values.designs.split(',').filter(Boolean) as OverlapDesign[];
for (const design of designs) {
  if (!OVERLAP_DESIGNS.includes(design)) throw new Error(`Unknown design ${design}.`);
}
const shell = !values['skip-shell'] && spawnSync('sqlite3', ['-version']).status === 0;
const entries: Entry[] = [
  'fetch-only',
  'write-only',
  'sync',
  ...(shell ? (['sqlite-shell'] as const) : []),
  ...designs,
];

const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-overlap-'));
const server = await startServer(options, options.rows);
const target = { url: server.url, apiKey: server.apiKey };
const { pageSize, pagesInFlight } = options;
const results: Record<string, StageResult[]> = {};

function requestFor(entry: Entry, path: string): StageRequest {
  const warehouse = { url: path };
  switch (entry) {
    case 'fetch-only':
      return { kind: 'fetch-only', server: target, pageSize };
    case 'write-only':
      return { kind: 'write-only', warehouse, rows: options.rows, seed: options.seed, pageSize };
    case 'sync':
    case 'sqlite-shell':
      return { kind: 'sync', server: target, warehouse, pageSize, pagesInFlight };
    default:
      return { kind: 'design', design: entry, server: target, warehouse, pageSize, pagesInFlight };
  }
}

/**
 * What a walk stored: every row's values with their SQLite types (not the sync time or run id),
 * and the saved cursor. Every design must store exactly what the sync stores.
 */
function storedDigest(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const hash = createHash('sha256');
    const rows = db
      .prepare(`SELECT * FROM "${BENCH_RESOURCE}" ORDER BY "id"`)
      .safeIntegers(true)
      .iterate() as Iterable<Record<string, unknown>>;
    for (const row of rows) {
      for (const [name, value] of Object.entries(row)) {
        if (name === '_synced_at' || name === '_run_id') continue;
        hash.update(`${name}:${typeof value}:${String(value)}\u0001`);
      }
    }
    const cursor = db.prepare('SELECT cursor FROM _ocs_resources WHERE resource = ?').pluck();
    hash.update(String(cursor.get(BENCH_RESOURCE)));
    return hash.digest('hex');
  } finally {
    db.close();
  }
}
const digests = new Map<string, Entry>();

const sqlText = (value: string) => `'${value.replace(/'/g, "''")}'`;

/**
 * The sqlite3 shell's script: the sync's tables (from a synced warehouse), then each page in its
 * own transaction with its cursor, parsed by SQLite from the page file.
 */
async function prepareShellScript(): Promise<string> {
  const template = join(directory, 'template.db');
  await runStageProcess(requestFor('sync', template));
  const db = new Database(template, { readonly: true });
  const schema = db
    .prepare(
      `SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN (?, '_ocs_resources')
       ORDER BY type = 'index'`,
    )
    .pluck()
    .all(BENCH_RESOURCE) as string[];
  const columns = db
    .prepare(
      `SELECT name, type FROM pragma_table_info(?) WHERE name NOT IN ('id') AND name NOT LIKE '\\_%' ESCAPE '\\'`,
    )
    .all(BENCH_RESOURCE) as Array<{ name: string }>;
  db.close();
  removeSqliteFiles(template);
  const types = new Map(
    (await import('./stages.js')).benchColumnsOf().map((column) => [column.name, column]),
  );
  const specs = columns.map((column) => types.get(column.name)!);
  const script = [
    'PRAGMA journal_mode = WAL;',
    'PRAGMA synchronous = NORMAL;',
    ...schema.map((sql) => `${sql};`),
  ];
  let cursor: string | null = null;
  for (let page = 0; ; page++) {
    const query = new URLSearchParams({ limit: String(pageSize) });
    if (cursor !== null) query.set('cursor', cursor);
    const response = await fetch(
      `${target.url}/api/export/${BENCH_RESOURCE}/?${query.toString()}`,
      {
        headers: { 'x-api-key': target.apiKey },
      },
    );
    const text = await response.text();
    const file = join(directory, `page-${page}.json`);
    writeFileSync(file, text);
    const body = JSON.parse(text) as { cursor: string | null; has_more: boolean };
    const insert = jsonEachUpsertSql(BENCH_RESOURCE, specs)
      .replace('@page', `readfile(${sqlText(file)})`)
      .replace('@syncedAt', sqlText(new Date().toISOString()))
      .replace('@runId', '1');
    const save =
      body.cursor === null
        ? ''
        : saveCursorSql.replace(
            'VALUES (?, ?, ?, ?)',
            `VALUES (${sqlText(BENCH_RESOURCE)}, ${sqlText(body.cursor)}, 'updated_at_id', 1)`,
          ) + ';';
    script.push('BEGIN;', `${insert};`, save, 'COMMIT;');
    if (!body.has_more) break;
    cursor = body.cursor;
  }
  return script.join('\n');
}

function runShell(script: string, path: string): StageResult {
  const scriptFile = join(directory, 'shell.sql');
  writeFileSync(scriptFile, script);
  const started = performance.now();
  const run = spawnSync('/usr/bin/time', ['-f', '%U %S %M', 'sqlite3', path], {
    input: `.read ${scriptFile}\n`,
    encoding: 'utf8',
  });
  const seconds = (performance.now() - started) / 1000;
  if (run.status !== 0) throw new Error(`sqlite3 failed: ${run.stderr}`);
  const [user, system, maxKb] = run.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
  const db = new Database(path, { readonly: true });
  const rows = db.prepare(`SELECT count(*) FROM "${BENCH_RESOURCE}"`).pluck().get() as number;
  db.close();
  return {
    rows,
    pages: 0,
    seconds,
    cpuSeconds: user! + system!,
    processCpuSeconds: user! + system!,
    excludedSeconds: 0,
    requests: 0,
    peakRssMb: maxKb! / 1024,
    rssProfileMb: [],
  };
}

try {
  const shellScript = shell ? await prepareShellScript() : '';
  for (let round = 0; round < options.rounds; round++) {
    // Rotate the order each round so no design always runs right after the same neighbour.
    const order = entries.map((_, index) => entries[(index + round) % entries.length]!);
    for (const entry of order) {
      const path = join(directory, `${entry}-${round}.db`);
      const result =
        entry === 'sqlite-shell'
          ? runShell(shellScript, path)
          : await runStageProcess(requestFor(entry, path));
      if (entry !== 'fetch-only' && entry !== 'write-only' && entry !== 'sqlite-shell') {
        const digest = storedDigest(path);
        if (!digests.has(digest)) digests.set(digest, entry);
        if (digests.size > 1)
          throw new Error(`${entry} stored other rows than ${[...digests.values()].join(', ')}.`);
      }
      removeSqliteFiles(path);
      if (entry !== 'fetch-only' && result.rows !== options.rows) {
        throw new Error(`${entry} wrote ${result.rows} rows, not ${options.rows}.`);
      }
      (results[entry] ??= []).push(result);
      process.stderr.write(
        `round ${round + 1} ${entry}: ${result.seconds.toFixed(2)} s, CPU ${result.cpuSeconds.toFixed(2)} s, peak RSS ${result.peakRssMb.toFixed(0)} MB\n`,
      );
    }
  }
} finally {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
}

const floor = (round: number) =>
  Math.max(results['fetch-only']![round]!.seconds, results['write-only']![round]!.seconds);
const lines = [
  `${options.rows} rows, ${options.latencyMs} ms a page, ${options.rounds} interleaved rounds; ` +
    `seconds (CPU seconds of the whole process) per round, then / max(fetch, write) of that round`,
];
for (const entry of entries) {
  const rounds = results[entry]!;
  const cells = rounds.map(
    (result, round) =>
      `${result.seconds.toFixed(2)} (${result.cpuSeconds.toFixed(2)}) ${entry === 'fetch-only' || entry === 'write-only' ? '' : `x${(result.seconds / floor(round)).toFixed(2)}`}`,
  );
  const rss = Math.max(...rounds.map((result) => result.peakRssMb));
  lines.push(
    `${entry.padEnd(17)} | ${cells.map((cell) => cell.padEnd(22)).join(' | ')} | ${rss.toFixed(0)} MB`,
  );
}
process.stdout.write(`${lines.join('\n')}\n`);
