/**
 * What the audit archive costs (`npm run bench:audit`; not part of `npm test`):
 *
 *   npm run bench:audit -- [--rows N] [--verify-versions N] [--rounds N] [--latency MS]
 *                          [--postgres URL] [--json]
 *
 * 1. Sync throughput of N rows (default 200,000) in one run, each stage in a fresh process, in
 *    interleaved rounds (medians count): the default (no history), history on, and audit on
 *    (history for every resource, every version chained). The goal: audit on within 10% of audit
 *    off with history on, the same versions written without their chain.
 * 2. `audit verify` over M versions (default 1,000,000, built by audited page writes without the
 *    network) and over M/10: time, and peak RSS, which must not grow with M.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  BenchUsageError,
  positiveInteger,
  removeSqliteFiles,
  runStageProcess,
  startServer,
} from './bench.js';
import { DEFAULT_BENCH_SEED } from './bench-dataset.js';
import { formatInteger, medianStage, type MeasuredStage } from './report.js';
import {
  dropPostgresSchema,
  type Keeping,
  type StageResult,
  type WarehouseTarget,
} from './stages.js';

export interface AuditBenchOptions {
  rows: number;
  verifyVersions: number;
  rounds: number;
  pageSize: number;
  /** The fake server's latency per page (0: the sync's own CPU is all that counts). */
  latencyMs: number;
  postgresUrl?: string;
  json: boolean;
}

const KEEPINGS: Keeping[] = ['none', 'history', 'audit'];
const KEEPING_LABELS: Record<Keeping, string> = {
  none: 'sync, default (no history)',
  history: 'sync, history on, audit off',
  audit: 'sync, audit on',
};
/** Audit on against audit off (history on): the chain's own cost. */
const TARGET_AUDIT_OVER_HISTORY = 1.1;
/** Peak RSS of verify at M over verify at M/10. */
const TARGET_VERIFY_RSS_GROWTH = 1.2;

const USAGE = `Usage: npm run bench:audit -- [options]
  --rows N              rows synced per stage (default 200000)
  --verify-versions N   versions audit verify checks (default 1000000; also N/10)
  --rounds N            interleaved rounds of the three syncs; medians count (default 3)
  --page-size N         page size (default 1000)
  --latency MS          the fake server's latency per page (default 0; 20 is a server across a network)
  --postgres URL        also measure PostgreSQL (default: OCS_BENCH_POSTGRES_URL or OCS_TEST_POSTGRES_URL)
  --json                print the results as JSON`;

export function parseAuditBenchArgs(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): AuditBenchOptions {
  let values;
  try {
    values = parseArgs({
      args: argv,
      options: {
        rows: { type: 'string' },
        'verify-versions': { type: 'string' },
        rounds: { type: 'string' },
        'page-size': { type: 'string' },
        latency: { type: 'string' },
        postgres: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw new BenchUsageError(`${(error as Error).message}\n${USAGE}`);
  }
  if (values.help) throw new BenchUsageError(USAGE);
  const postgresUrl = values.postgres ?? env.OCS_BENCH_POSTGRES_URL ?? env.OCS_TEST_POSTGRES_URL;
  return {
    rows: positiveInteger(values.rows, '--rows', 200_000),
    verifyVersions: positiveInteger(values['verify-versions'], '--verify-versions', 1_000_000),
    rounds: positiveInteger(values.rounds, '--rounds', 3),
    pageSize: Math.min(1000, positiveInteger(values['page-size'], '--page-size', 1000)),
    latencyMs: positiveInteger(values.latency, '--latency', 0, true),
    postgresUrl: postgresUrl === '' ? undefined : postgresUrl,
    json: values.json === true,
  };
}

export interface AuditBenchResults {
  rows: number;
  latencyMs: number;
  /** Per dialect, the median sync of each keeping. */
  syncs: Array<{ dialect: 'sqlite' | 'postgres'; stages: Record<Keeping, MeasuredStage> }>;
  verify: Array<{
    dialect: 'sqlite' | 'postgres';
    versions: number;
    full: StageResult;
    tenth: StageResult;
  }>;
}

export async function runAuditBenchmark(
  options: AuditBenchOptions,
  progress: (text: string) => void,
): Promise<AuditBenchResults> {
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-audit-bench-'));
  const prefix = `ocs_audit_bench_${process.pid}_${Date.now().toString(36)}`;
  const schemas: string[] = [];
  const target = (dialect: 'sqlite' | 'postgres', name: string, drop = true): WarehouseTarget => {
    if (dialect === 'sqlite') return { url: join(directory, `${name}.db`) };
    schemas.push(`${prefix}_${name}`);
    return { url: options.postgresUrl!, schema: `${prefix}_${name}`, dropSchemaAfter: drop };
  };
  const dialects: Array<'sqlite' | 'postgres'> = options.postgresUrl
    ? ['sqlite', 'postgres']
    : ['sqlite'];
  const stage = async <T extends StageResult>(label: string, run: () => Promise<T>) => {
    progress(`${label} ...`);
    const result = await run();
    progress(
      `  ${formatInteger(result.rows)} rows in ${result.seconds.toFixed(2)} s, peak RSS ${result.peakRssMb.toFixed(1)} MB`,
    );
    return result;
  };
  const results: AuditBenchResults = {
    rows: options.rows,
    latencyMs: options.latencyMs,
    syncs: [],
    verify: [],
  };
  let server: Awaited<ReturnType<typeof startServer>> | undefined = await startServer(
    { seed: DEFAULT_BENCH_SEED, latencyMs: options.latencyMs },
    options.rows,
  );
  try {
    const serverTarget = { url: server.url, apiKey: server.apiKey };
    for (const dialect of dialects) {
      const measured: Record<Keeping, MeasuredStage[]> = { none: [], history: [], audit: [] };
      for (let round = 0; round < options.rounds; round++) {
        // The order rotates each round, so drift of a shared machine hits each alike.
        const order = KEEPINGS.map((_, index) => KEEPINGS[(index + round) % KEEPINGS.length]!);
        for (const keep of order) {
          const warehouse = target(dialect, `sync_${keep}_${round}`);
          const result = await stage(
            `${dialect}: ${KEEPING_LABELS[keep]} (round ${round + 1})`,
            () =>
              runStageProcess({
                kind: 'sync',
                server: serverTarget,
                warehouse,
                pageSize: options.pageSize,
                pagesInFlight: 2,
                keep,
              }),
          );
          measured[keep].push({ ...result, serverRequests: result.requests });
          if (dialect === 'sqlite') removeSqliteFiles(warehouse.url);
        }
      }
      results.syncs.push({
        dialect,
        stages: {
          none: medianStage(measured.none),
          history: medianStage(measured.history),
          audit: medianStage(measured.audit),
        },
      });
    }
    await server.close();
    server = undefined;
    for (const dialect of dialects) {
      const verifyAt = async (versions: number, name: string) => {
        const built = target(dialect, name, false);
        await stage(`${dialect}: writing ${formatInteger(versions)} audited versions`, () =>
          runStageProcess({
            kind: 'write-only',
            warehouse: built,
            rows: versions,
            seed: DEFAULT_BENCH_SEED,
            pageSize: options.pageSize,
            keep: 'audit',
          }),
        );
        const result = await stage(`${dialect}: audit verify over ${formatInteger(versions)}`, () =>
          runStageProcess({ kind: 'verify', warehouse: { ...built, dropSchemaAfter: true } }),
        );
        if (dialect === 'sqlite') removeSqliteFiles(built.url);
        return result;
      };
      const tenth = await verifyAt(
        Math.max(1, Math.round(options.verifyVersions / 10)),
        'verify_tenth',
      );
      const full = await verifyAt(options.verifyVersions, 'verify_full');
      results.verify.push({ dialect, versions: options.verifyVersions, full, tenth });
    }
    return results;
  } finally {
    await server?.close();
    rmSync(directory, { recursive: true, force: true });
    for (const schema of schemas) {
      await dropPostgresSchema(options.postgresUrl!, schema).catch(() => undefined);
    }
  }
}

const rate = (stage: StageResult) => (stage.seconds > 0 ? stage.rows / stage.seconds : 0);

export function formatAuditReport(results: AuditBenchResults): string {
  const lines = [
    `Audit archive: sync of ${formatInteger(results.rows)} rows in one run at ${results.latencyMs} ms a page (median of the rounds), and audit verify.`,
    '',
    'stage                                  |      rows | seconds | CPU s |  rows/s | peak RSS MB',
    '---------------------------------------|-----------|---------|-------|---------|------------',
  ];
  const row = (label: string, stage: StageResult) =>
    [
      label.padEnd(38),
      formatInteger(stage.rows).padStart(9),
      stage.seconds.toFixed(2).padStart(7),
      stage.cpuSeconds.toFixed(2).padStart(5),
      formatInteger(rate(stage)).padStart(7),
      stage.peakRssMb.toFixed(1).padStart(11),
    ].join(' | ');
  for (const { dialect, stages } of results.syncs) {
    for (const keep of KEEPINGS)
      lines.push(row(`${dialect}: ${KEEPING_LABELS[keep]}`, stages[keep]));
  }
  for (const { dialect, full, tenth } of results.verify) {
    lines.push(row(`${dialect}: audit verify, N/10 versions`, tenth));
    lines.push(row(`${dialect}: audit verify, N versions`, full));
  }
  lines.push('');
  for (const { dialect, stages } of results.syncs) {
    const overHistory = stages.audit.seconds / stages.history.seconds;
    const overNone = stages.audit.seconds / stages.none.seconds;
    lines.push(
      `${dialect}: audit on / audit off, history on (time)   ${overHistory.toFixed(2)}  target <= ${TARGET_AUDIT_OVER_HISTORY}  ${overHistory <= TARGET_AUDIT_OVER_HISTORY ? 'met' : 'NOT MET'}`,
      `${dialect}: audit on / default, no history (time)    ${overNone.toFixed(2)}  (what history itself costs is in this one too)`,
    );
  }
  for (const { dialect, full, tenth, versions } of results.verify) {
    const growth = full.peakRssMb / tenth.peakRssMb;
    lines.push(
      `${dialect}: audit verify of ${formatInteger(versions)} versions: ${full.seconds.toFixed(1)} s (${formatInteger(rate(full))} versions/s), peak RSS ${full.peakRssMb.toFixed(1)} MB`,
      `${dialect}: verify peak RSS(N) / RSS(N/10)            ${growth.toFixed(2)}  target <= ${TARGET_VERIFY_RSS_GROWTH}  ${growth <= TARGET_VERIFY_RSS_GROWTH ? 'met' : 'NOT MET'}`,
    );
  }
  return lines.join('\n');
}

/** Parses the flags, runs, prints. Returns the exit code (0 ran, 1 failed, 2 usage). */
export async function main(
  argv: string[],
  output: { out(text: string): void; progress(text: string): void } = {
    out: (text) => process.stdout.write(`${text}\n`),
    progress: (text) => process.stderr.write(`${text}\n`),
  },
): Promise<number> {
  let options: AuditBenchOptions;
  try {
    options = parseAuditBenchArgs(argv);
  } catch (error) {
    if (!(error instanceof BenchUsageError)) throw error;
    output.progress(error.message);
    return 2;
  }
  try {
    const results = await runAuditBenchmark(options, output.progress);
    output.out(options.json ? JSON.stringify(results, null, 2) : formatAuditReport(results));
    return 0;
  } catch (error) {
    output.progress(
      `The benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    return 1;
  }
}

const invokedDirectly =
  process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  process.exitCode = await main(process.argv.slice(2));
}
