/**
 * The benchmark (`npm run bench`; not part of `npm test`):
 *
 *   npm run bench -- [--rows N] [--latency MS] [--page-size N] [--pages-in-flight N]
 *                    [--postgres URL] [--seed N] [--json]
 *   npm run bench -- soak [--minutes 60] …   (the daemon for an hour: soak.ts)
 *   npm run bench -- soak --chaos …          (the daemon killed and restarted: chaos.ts)
 *   npm run bench -- sealed …                 (sealed values on every core: sealed.ts)
 *   npm run bench -- concurrency …            (several resources at once: concurrency.ts)
 *   npm run bench -- teams …                  (a fleet of teams: teams.ts)
 *   npm run bench -- small …                  (a small team's runs against their floor: small-team.ts)
 *   npm run bench -- files --store s3 …       (file contents into a bucket: files-store.ts)
 *
 * A fake export server in its own process serves one chat-message-like resource of N rows; each
 * measured stage runs in a fresh child process (its peak RSS is its own): full syncs into SQLite
 * (and PostgreSQL when a URL is given) through runSync and the real HTTP source, the fetch-only
 * and write-only floors, reruns, full refreshes that find deleted rows, the server's own client as
 * the baseline, and a sync and a full refresh at N/10 to show memory does not grow with N. Prints
 * a table and the ratios against their targets.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ask, exited, startBenchChild } from './child-process.js';
import type { ServerRequest, ServerStarted } from './fake-server-process.js';
import {
  STAGE_LABELS,
  computeChecks,
  floorRatio,
  formatInteger,
  formatReport,
  medianStage,
  resultsAsJson,
  type BenchResults,
  type BenchSettings,
  type MeasuredStage,
  type RatioStageId,
  type StageId,
} from './report.js';
import { BENCH_RESOURCE, DEFAULT_BENCH_SEED } from './bench-dataset.js';
import { concurrencyMain, type ConcurrencyResults } from './concurrency.js';
import { sealedMain, type SealedResults } from './sealed.js';
import { GOALS, describeGoalRound, goalChecks, type GoalRound } from './goals.js';
import { generateKeyPairSync } from 'node:crypto';
import { singleCorePrivateKeyRate } from './sealed.js';
import { soakMain, type SoakResults } from './soak.js';
import { chaosMain, type ChaosResults } from './chaos.js';
import { teamsMain, type TeamsResults } from './teams.js';
import { smallTeamMain, type SmallTeamResults } from './small-team.js';
import type { SmallTeamsResults } from './teams-small.js';
import { filesStoreMain } from './files-store.js';
import { formatStartup, measureStartup, type StartupResults } from './startup.js';
import {
  dropPostgresSchema,
  type StageRequest,
  type StageResult,
  type WarehouseTarget,
} from './stages.js';

export interface BenchOptions {
  rows: number;
  latencyMs: number;
  pageSize: number;
  pagesInFlight: number;
  postgresUrl?: string;
  seed: number;
  /** Interleaved rounds of the three stages the SQLite ratio compares; their medians count. */
  rounds: number;
  /** Latency a page of the rounds' slow-page stages (fetch-and-parse loop, sync); 0 skips them. */
  slowLatencyMs: number;
  /** Write a V8 CPU profile of each full sync into SQLite (the rounds' syncs) into this folder. */
  cpuProfileDir?: string;
  json: boolean;
  /** The server builds each page as it is asked (issue 23's setting) instead of before the stages. */
  buildPages: boolean;
  /** Each round also syncs with history on and with the audit chain on (the audit goal). */
  audit: boolean;
  /** `participant_data` rows (two sealed values each) of each round's sealed walk; 0 skips it. */
  sealedRows: number;
  /** RSA key size of the sealed walk. */
  sealedBits: number;
  /** Rows of one more sync, once, for memory's growth with the rows (0 skips it). */
  memoryRows: number;
  /** Rounds of the start-up stage (0: skip it). */
  startupRounds: number;
  /** Only the start-up stage. */
  startupOnly: boolean;
}

export interface BenchOutput {
  /** The report (stdout). */
  out(text: string): void;
  /** Progress while it runs (stderr). */
  progress(text: string): void;
  /** The results as data, for callers that check them (the smoke test). */
  results?(results: BenchResults): void;
  startup?(results: StartupResults): void;
  soak?(results: SoakResults): void;
  chaos?(results: ChaosResults): void;
  sealed?(results: SealedResults): void;
  concurrency?(results: ConcurrencyResults): void;
  teams?(results: TeamsResults): void;
  small?(results: SmallTeamResults): void;
  smallTeams?(results: SmallTeamsResults): void;
}

/** The server's own client walks with limit=100 (REFERENCE.md). */
const BASELINE_PAGE_SIZE = 100;
/** Room for a million generated rows in the fake server's heap. */
const SERVER_NODE_OPTIONS = ['--max-old-space-size=8192'];

const USAGE = `Usage: npm run bench -- [options]
  --rows N             rows of the resource (default 1000000)
  --latency MS         fake server latency per page (default 0)
  --page-size N        page size of the sync (default 1000)
  --pages-in-flight N  pages fetched ahead of the writer (default 2)
  --postgres URL       also measure PostgreSQL (default: OCS_BENCH_POSTGRES_URL or OCS_TEST_POSTGRES_URL)
  --seed N             dataset seed (default ${DEFAULT_BENCH_SEED})
  --rounds N           rounds of fetch-only, write-only and sync into SQLite, interleaved so
                       that machine noise hits all three alike; the median of each counts (default 3)
  --slow-latency MS    each round also runs the fetch-and-parse loop and the sync with this
                       latency a page, for the slow-page goal (default 20; 0 skips them)
  --cpu-prof DIR       write CPU profiles (node --cpu-prof, one file a thread) of each round's
                       full syncs, SQLite and PostgreSQL, into DIR
  --build-pages        the fake server builds each page as it is asked (default: every page is
                       built before the first stage, so the server costs next to nothing)
  --no-audit           skip each round's syncs with history on and with the audit chain on
  --sealed-rows N      participant_data rows (2 sealed values each) of each round's sealed walk
                       at 0 ms (default 10000; 0 skips it)
  --sealed-bits N      RSA key size of the sealed walk (default 3072, what keygen writes)
  --memory-rows N      rows of one more full sync, for peak RSS against the rows (default
                       1000000, or 200000 when --rows is 1000000; 0 skips it)
  --json               print the results as JSON
  --startup-rounds N   rounds of the start-up stage: node -e 0, ocs-sync --help and ocs-sync
                       status on a demo warehouse, back to back (default 15; 0 skips it)
  --startup-only       run only the start-up stage

npm run bench -- soak --help: the daemon for a long while (memory, runs, heap growth)
npm run bench -- soak --chaos --help: the daemon killed and restarted while the server misbehaves
npm run bench -- sealed --help: sealed values opened on every core, beside a plain walk
npm run bench -- concurrency --help: several resources at once against 200 ms pages
npm run bench -- teams --help: a fleet of teams, sync --team all against the slowest team alone
npm run bench -- small --help: a small team's first and unchanged syncs against their requests, a daemon's CPU a run`;

export class BenchUsageError extends Error {}

export function positiveInteger(
  text: string | undefined,
  flag: string,
  fallback: number,
  allowZero = false,
): number {
  if (text === undefined) return fallback;
  const value = Number(text.replace(/_/g, ''));
  if (!Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new BenchUsageError(
      `${flag} must be a ${allowZero ? 'non-negative' : 'positive'} integer, not ${JSON.stringify(text)}.`,
    );
  }
  return value;
}

export function parseBenchArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): BenchOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        rows: { type: 'string' },
        latency: { type: 'string' },
        'page-size': { type: 'string' },
        'pages-in-flight': { type: 'string' },
        postgres: { type: 'string' },
        seed: { type: 'string' },
        rounds: { type: 'string' },
        'slow-latency': { type: 'string' },
        'cpu-prof': { type: 'string' },
        'build-pages': { type: 'boolean' },
        'no-audit': { type: 'boolean' },
        'sealed-rows': { type: 'string' },
        'sealed-bits': { type: 'string' },
        'memory-rows': { type: 'string' },
        json: { type: 'boolean' },
        'startup-rounds': { type: 'string' },
        'startup-only': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    throw new BenchUsageError(`${(error as Error).message}\n${USAGE}`);
  }
  const { values } = parsed;
  if (values.help) throw new BenchUsageError(USAGE);
  const pageSize = positiveInteger(values['page-size'], '--page-size', 1000);
  if (pageSize > 1000)
    throw new BenchUsageError(
      '--page-size may be at most 1000 (the server cuts larger pages to 1000).',
    );
  const postgresUrl = values.postgres ?? env.OCS_BENCH_POSTGRES_URL ?? env.OCS_TEST_POSTGRES_URL;
  const rows = positiveInteger(values.rows, '--rows', 1_000_000);
  return {
    rows,
    latencyMs: positiveInteger(values.latency, '--latency', 0, true),
    pageSize,
    pagesInFlight: positiveInteger(values['pages-in-flight'], '--pages-in-flight', 2),
    postgresUrl: postgresUrl === '' ? undefined : postgresUrl,
    seed: positiveInteger(values.seed, '--seed', DEFAULT_BENCH_SEED, true),
    rounds: positiveInteger(values.rounds, '--rounds', 3),
    slowLatencyMs: positiveInteger(values['slow-latency'], '--slow-latency', 20, true),
    ...(values['cpu-prof'] ? { cpuProfileDir: resolve(values['cpu-prof']) } : {}),
    json: values.json === true,
    buildPages: values['build-pages'] === true,
    audit: values['no-audit'] !== true,
    sealedRows: positiveInteger(values['sealed-rows'], '--sealed-rows', 10_000, true),
    sealedBits: positiveInteger(values['sealed-bits'], '--sealed-bits', 3072),
    memoryRows: positiveInteger(
      values['memory-rows'],
      '--memory-rows',
      rows === 1_000_000 ? 200_000 : 1_000_000,
      true,
    ),
    startupRounds: positiveInteger(values['startup-rounds'], '--startup-rounds', 15, true),
    startupOnly: values['startup-only'] === true,
  };
}

/** A fake server child with `rows` rows of the bench resource, or the sample team. */
export async function startServer(
  options: Pick<BenchOptions, 'seed' | 'latencyMs'>,
  rows: number,
  sample?: Extract<ServerRequest, { type: 'start' }>['sample'],
  prebuild?: Extract<ServerRequest, { type: 'start' }>['prebuild'],
) {
  const child = startBenchChild('fake-server-process', { nodeOptions: SERVER_NODE_OPTIONS });
  const request = <T>(message: ServerRequest) => ask<T>(child, message);
  try {
    const started = await request<ServerStarted>({
      type: 'start',
      rows,
      seed: options.seed,
      pageLatencyMs: options.latencyMs,
      sample,
      prebuild,
    });
    return {
      ...started,
      request,
      async close() {
        await request({ type: 'close' }).catch(() => undefined);
        await exited(child);
      },
    };
  } catch (error) {
    child.kill();
    throw error;
  }
}

/** A SQLite database and its WAL files. */
export function removeSqliteFiles(path: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
}

/**
 * One stage in a fresh child process; `processSeconds` is its wall time from start to result,
 * start-up included, less the work the stage says is not its own.
 */
export async function runStageProcess(
  request: StageRequest,
  nodeOptions: string[] = [],
): Promise<StageResult & { processSeconds: number }> {
  const started = performance.now();
  const child = startBenchChild('stage-process', { nodeOptions });
  try {
    const result = await ask<StageResult>(child, request);
    const processSeconds = (performance.now() - started) / 1000 - result.excludedSeconds;
    return { ...result, processSeconds };
  } finally {
    child.disconnect();
    await exited(child);
  }
}

/** The sealed resource of each round's sealed walk (two sealed fields a row). */
const SEALED_RESOURCE = 'participant_data';

export async function runBenchmark(
  options: BenchOptions,
  output: BenchOutput,
): Promise<BenchResults> {
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-bench-'));
  const stages: BenchResults['stages'] = {};
  const schemaPrefix = `ocs_bench_${process.pid}_${Date.now().toString(36)}`;
  const postgresTarget = (name: string, dropSchemaAfter = true): WarehouseTarget => ({
    url: options.postgresUrl!,
    schema: `${schemaPrefix}_${name}`,
    dropSchemaAfter,
  });
  const sqliteTarget = (name: string): WarehouseTarget => ({ url: join(directory, `${name}.db`) });
  const insertedRows = Math.max(1, Math.round(options.rows / 100));
  const tenthRows = Math.max(1, Math.round(options.rows / 10));
  /** Rows deleted on the server before each full refresh (1%). */
  const removedRows = insertedRows;
  const removedTenthRows = Math.max(1, Math.round(tenthRows / 100));
  const { pageSize, pagesInFlight } = options;
  const prebuild = (resource: string) =>
    options.buildPages ? undefined : { resources: [resource], pageSize };

  const cpuList = cpus();
  const cores = cpuList.length;
  output.progress(
    options.buildPages
      ? 'Starting the fake server ...'
      : 'Starting the fake server and building every page ...',
  );
  let server = await startServer(options, options.rows, undefined, prebuild(BENCH_RESOURCE));
  const sealedKeys =
    options.sealedRows > 0
      ? generateKeyPairSync('rsa', {
          modulusLength: options.sealedBits,
          publicKeyEncoding: { type: 'spki', format: 'pem' },
          privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
        })
      : undefined;
  const sealedServer = sealedKeys
    ? await startServer(
        options,
        0,
        {
          rowCounts: { [SEALED_RESOURCE]: options.sealedRows },
          teamPublicKeyPem: sealedKeys.publicKey,
        },
        prebuild(SEALED_RESOURCE),
      )
    : undefined;
  const profiled =
    options.cpuProfileDir === undefined
      ? []
      : ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`];
  const runMeasured = async (
    id: StageId,
    request: StageRequest,
    on = server,
  ): Promise<MeasuredStage> => {
    output.progress(`${STAGE_LABELS[id]} ...`);
    await on.request<number>({ type: 'requests' });
    const serverCpuBefore = await on.request<number>({ type: 'cpu' });
    const result = await runStageProcess(
      request,
      id === 'sync-sqlite' || id === 'sync-postgres' ? profiled : [],
    );
    const serverRequests = await on.request<number>({ type: 'requests' });
    const serverCpuSeconds = (await on.request<number>({ type: 'cpu' })) - serverCpuBefore;
    const stage = { ...result, serverRequests, serverCpuSeconds };
    output.progress(
      `  ${stage.rows} rows in ${stage.seconds.toFixed(2)} s, ${serverRequests} requests, peak RSS ${stage.peakRssMb.toFixed(1)} MB`,
    );
    return stage;
  };
  const measure = async (id: StageId, request: StageRequest): Promise<MeasuredStage> => {
    const stage = await runMeasured(id, request);
    stages[id] = stage;
    return stage;
  };

  try {
    const bytesPerRow = server.bytesPerRow;
    const target = { url: server.url, apiKey: server.apiKey };
    const sync = (warehouse: WarehouseTarget, extra: Partial<StageRequest> = {}): StageRequest =>
      ({
        kind: 'sync',
        server: target,
        warehouse,
        pageSize,
        pagesInFlight,
        ...extra,
      }) as StageRequest;

    // The ratios compare stages run at different moments; on a shared machine the speed drifts
    // between them. Rounds interleave them, so drift hits each alike, and medians count.
    const rounds: Record<RatioStageId, MeasuredStage[]> = {
      'fetch-only': [],
      'write-only-sqlite': [],
      'sync-sqlite': [],
      'fetch-only-slow': [],
      'cursor-chase-slow': [],
      'sync-sqlite-slow': [],
      'write-only-postgres': [],
      'sync-postgres': [],
      'sync-sqlite-history': [],
      'sync-sqlite-audit': [],
      'sync-sealed': [],
    };
    const sealedRates: NonNullable<GoalRound['sealed']>[] = [];
    const goalRounds: string[][] = [];
    let main = sqliteTarget('sync-0');
    for (let round = 0; round < options.rounds; round++) {
      if (options.rounds > 1) output.progress(`round ${round + 1} of ${options.rounds}`);
      const add = async (id: RatioStageId, request: StageRequest, on = server) => {
        const stage = await runMeasured(id, request, on);
        rounds[id].push(stage);
        return stage;
      };
      await add('fetch-only', { kind: 'fetch-only', server: target, pageSize });
      const writeOnly = sqliteTarget(`write-only-${round}`);
      await add('write-only-sqlite', {
        kind: 'write-only',
        warehouse: writeOnly,
        rows: options.rows,
        seed: options.seed,
        pageSize,
      });
      removeSqliteFiles(writeOnly.url);
      // The reruns below continue the last round's warehouse; earlier ones only take disk space.
      if (round > 0) removeSqliteFiles(main.url);
      main = sqliteTarget(`sync-${round}`);
      await add('sync-sqlite', sync(main));
      if (options.slowLatencyMs > 0) {
        await server.request({ type: 'latency', ms: options.slowLatencyMs });
        await add('fetch-only-slow', { kind: 'fetch-only', server: target, pageSize });
        await add('cursor-chase-slow', {
          kind: 'cursor-chase',
          server: target,
          pageSize,
          rows: options.rows,
        });
        const slowSync = sqliteTarget(`sync-slow-${round}`);
        await add('sync-sqlite-slow', sync(slowSync));
        removeSqliteFiles(slowSync.url);
        await server.request({ type: 'latency', ms: options.latencyMs });
      }
      if (options.postgresUrl) {
        await add('write-only-postgres', {
          kind: 'write-only',
          warehouse: postgresTarget(`write_only_${round}`),
          rows: options.rows,
          seed: options.seed,
          pageSize,
        });
        // The last round's is kept for the full refresh below.
        const last = round === options.rounds - 1;
        await add('sync-postgres', sync(postgresTarget(last ? 'sync' : `sync_${round}`, !last)));
      }
      if (options.audit) {
        for (const keep of ['history', 'audit'] as const) {
          const kept = sqliteTarget(`sync-${keep}-${round}`);
          await add(`sync-sqlite-${keep}`, sync(kept, { keep }));
          removeSqliteFiles(kept.url);
        }
      }
      if (sealedServer && sealedKeys) {
        output.progress(
          `Single-core rate of the ${options.sealedBits}-bit private-key operation ...`,
        );
        const singleCoreRate = singleCorePrivateKeyRate(options.sealedBits);
        const values = await sealedServer.request<number>({
          type: 'sealed-values',
          resource: SEALED_RESOURCE,
        });
        const sealedWarehouse = sqliteTarget(`sync-sealed-${round}`);
        const stage = await add(
          'sync-sealed',
          {
            kind: 'sync',
            server: { url: sealedServer.url, apiKey: sealedServer.apiKey },
            warehouse: sealedWarehouse,
            pageSize,
            pagesInFlight,
            resources: [SEALED_RESOURCE],
            privateKeyPem: sealedKeys.privateKey,
          },
          sealedServer,
        );
        removeSqliteFiles(sealedWarehouse.url);
        const walk = stage.walks?.find((entry) => entry.resource === SEALED_RESOURCE);
        const seconds = walk?.seconds ?? stage.seconds;
        sealedRates.push({ valuesPerSecond: values / seconds, singleCoreRate, values, seconds });
      }
      const goals = describeGoalRound(
        roundOf(rounds, round, sealedRates[round]),
        cores,
        options.slowLatencyMs,
      );
      goalRounds.push(goals);
      output.progress(`round ${round + 1} goals:\n  ${goals.join('\n  ')}`);
    }
    for (const [id, measured] of Object.entries(rounds) as Array<[RatioStageId, MeasuredStage[]]>) {
      if (measured.length > 0) stages[id] = medianStage(measured);
    }
    const sqliteRatioByRound = rounds['sync-sqlite'].map((synced, round) =>
      floorRatio(synced, rounds['fetch-only'][round]!, rounds['write-only-sqlite'][round]!),
    );
    await measure('baseline', {
      kind: 'baseline',
      server: target,
      warehouse: sqliteTarget('baseline'),
      pageSize: BASELINE_PAGE_SIZE,
    });
    await measure('rerun-unchanged', sync(main));
    await server.request({ type: 'insert', count: insertedRows });
    await measure('rerun-incremental', sync(main));

    // Full refreshes: every row walked again, and the 1% deleted on the server marked.
    await server.request({ type: 'remove', count: removedRows });
    await measure('full-refresh-sqlite', sync(main, { fullRefresh: true }));
    if (options.postgresUrl) {
      await measure('full-refresh-postgres', sync(postgresTarget('sync'), { fullRefresh: true }));
    }

    await server.close();
    const startSized = async (rows: number) => {
      server = await startServer(options, rows, undefined, prebuild(BENCH_RESOURCE));
      return { url: server.url, apiKey: server.apiKey };
    };
    const tenthServer = await startSized(tenthRows);
    const tenth = sqliteTarget('sync-tenth');
    await measure('sync-sqlite-tenth', { ...sync(tenth), server: tenthServer } as StageRequest);
    await server.request({ type: 'remove', count: removedTenthRows });
    await measure('full-refresh-sqlite-tenth', {
      ...sync(tenth, { fullRefresh: true }),
      server: tenthServer,
    } as StageRequest);
    if (options.memoryRows > 0) {
      await server.close();
      output.progress(
        `Starting the fake server with ${formatInteger(options.memoryRows)} rows ...`,
      );
      const sizedServer = await startSized(options.memoryRows);
      await measure('sync-sqlite-memory', {
        ...sync(sqliteTarget('sync-memory')),
        server: sizedServer,
      } as StageRequest);
    }

    const settings: BenchSettings = {
      rows: options.rows,
      pageSize,
      pagesInFlight,
      latencyMs: options.latencyMs,
      baselinePageSize: BASELINE_PAGE_SIZE,
      bytesPerRow,
      insertedRows,
      removedRows,
      removedTenthRows,
      postgres: options.postgresUrl !== undefined,
      rounds: options.rounds,
      slowLatencyMs: options.slowLatencyMs,
      prebuiltPages: !options.buildPages,
      sealedRows: options.sealedRows,
      memoryRows: options.memoryRows,
      node: process.version,
      cpus: `${cpuList.length} CPU${cpuList.length === 1 ? '' : 's'} (${cpuList[0]?.model.trim() ?? 'unknown'})`,
    };
    const sealed = medianBy(sealedRates, (rate) => rate.valuesPerSecond / rate.singleCoreRate);
    const goals = goalChecks(
      {
        fetch: stages['fetch-only']!,
        write: stages['write-only-sqlite']!,
        sync: stages['sync-sqlite']!,
        slowFetch: stages['fetch-only-slow'],
        slowChase: stages['cursor-chase-slow'],
        slowSync: stages['sync-sqlite-slow'],
        ...(stages['sync-postgres'] && stages['write-only-postgres']
          ? { postgres: { sync: stages['sync-postgres'], write: stages['write-only-postgres'] } }
          : {}),
        ...(stages['sync-sqlite-history'] && stages['sync-sqlite-audit']
          ? {
              audit: { history: stages['sync-sqlite-history'], audit: stages['sync-sqlite-audit'] },
            }
          : {}),
        ...(sealed ? { sealed } : {}),
      },
      cores,
      options.slowLatencyMs,
    );
    const memory = stages['sync-sqlite-memory'];
    if (memory) {
      const [small, large] = [stages['sync-sqlite']!, memory].sort((a, b) => a.rows - b.rows);
      const growth = large!.peakRssMb / small!.peakRssMb;
      goals.push(
        {
          name: `peak RSS at ${formatInteger(large!.rows)} / at ${formatInteger(small!.rows)} rows`,
          value: growth,
          shown: growth.toFixed(2),
          target: `<= ${GOALS.rssGrowth}`,
          met: growth <= GOALS.rssGrowth,
          detail: `${large!.peakRssMb.toFixed(1)} MB / ${small!.peakRssMb.toFixed(1)} MB`,
        },
        {
          name: `peak RSS of the sync at ${formatInteger(memory.rows)} rows`,
          value: memory.peakRssMb,
          shown: `${memory.peakRssMb.toFixed(1)} MB`,
          target: `< ${GOALS.peakRssMb} MB`,
          met: memory.peakRssMb < GOALS.peakRssMb,
          detail: 'whole syncing process, maxRSS',
        },
      );
    }
    return {
      settings,
      stages,
      checks: [...computeChecks(settings, stages), ...goals],
      sqliteRatioByRound,
      goalRounds,
    };
  } finally {
    await server.close();
    await sealedServer?.close();
    rmSync(directory, { recursive: true, force: true });
    if (options.postgresUrl) {
      // Stages drop their schemas; this catches one left by a stage that failed half-way.
      for (const name of [
        'sync',
        ...Array.from({ length: options.rounds }, (_, round) => [
          `write_only_${round}`,
          `sync_${round}`,
        ]).flat(),
      ]) {
        await dropPostgresSchema(options.postgresUrl, `${schemaPrefix}_${name}`).catch(
          () => undefined,
        );
      }
    }
  }
}

/** One round's stages, for its goals. */
function roundOf(
  rounds: Record<RatioStageId, MeasuredStage[]>,
  round: number,
  sealed: GoalRound['sealed'],
): GoalRound {
  const at = (id: RatioStageId) => rounds[id][round];
  const pgSync = at('sync-postgres');
  const pgWrite = at('write-only-postgres');
  const history = at('sync-sqlite-history');
  const audit = at('sync-sqlite-audit');
  return {
    fetch: at('fetch-only')!,
    write: at('write-only-sqlite')!,
    sync: at('sync-sqlite')!,
    slowFetch: at('fetch-only-slow'),
    slowChase: at('cursor-chase-slow'),
    slowSync: at('sync-sqlite-slow'),
    ...(pgSync && pgWrite ? { postgres: { sync: pgSync, write: pgWrite } } : {}),
    ...(history && audit ? { audit: { history, audit } } : {}),
    ...(sealed ? { sealed } : {}),
  };
}

/** The middle item by `key` (the lower of the two middles for an even count). */
function medianBy<T>(items: T[], key: (item: T) => number): T | undefined {
  const sorted = [...items].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

const defaultOutput: BenchOutput = {
  out: (text) => process.stdout.write(`${text}\n`),
  progress: (text) => process.stderr.write(`${text}\n`),
};

/** Parses the flags, runs, prints. Returns the exit code (0 ran, 1 failed, 2 usage). */
export async function main(argv: string[], output: BenchOutput = defaultOutput): Promise<number> {
  if (argv[0] === 'soak') {
    const rest = argv.slice(1);
    return rest.includes('--chaos') ? chaosMain(rest, output) : soakMain(rest, output);
  }
  if (argv[0] === 'sealed') return sealedMain(argv.slice(1), output);
  if (argv[0] === 'concurrency') return concurrencyMain(argv.slice(1), output);
  if (argv[0] === 'teams') return teamsMain(argv.slice(1), output);
  if (argv[0] === 'small') return smallTeamMain(argv.slice(1), output);
  if (argv[0] === 'files') return filesStoreMain(argv.slice(1), output);
  let options: BenchOptions;
  try {
    options = parseBenchArgs(argv);
  } catch (error) {
    if (!(error instanceof BenchUsageError)) throw error;
    output.progress(error.message);
    return 2;
  }
  try {
    if (!options.startupOnly) {
      const results = await runBenchmark(options, output);
      output.results?.(results);
      output.out(options.json ? resultsAsJson(results) : formatReport(results));
    }
    if (options.startupRounds > 0) {
      output.progress('Start-up: node -e 0, ocs-sync --help, ocs-sync status ...');
      const startup = measureStartup({ rounds: options.startupRounds });
      output.startup?.(startup);
      output.out(
        options.json ? JSON.stringify({ startup }, null, 2) : `\n${formatStartup(startup)}`,
      );
    }
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
