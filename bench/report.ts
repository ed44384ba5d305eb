/**
 * Pure: the benchmark's results as a table, the ratios against their targets, and JSON.
 */
import type { StageResult } from './stages.js';

export type StageId =
  | 'sync-sqlite'
  | 'sync-postgres'
  | 'fetch-only'
  | 'write-only-sqlite'
  | 'write-only-postgres'
  | 'baseline'
  | 'rerun-unchanged'
  | 'rerun-incremental'
  | 'full-refresh-sqlite'
  | 'full-refresh-postgres'
  | 'sync-sqlite-tenth'
  | 'full-refresh-sqlite-tenth'
  | 'fetch-only-slow'
  | 'cursor-chase-slow'
  | 'sync-sqlite-slow'
  | 'sync-sqlite-history'
  | 'sync-sqlite-audit'
  | 'sync-sealed'
  | 'sync-sqlite-memory';

export const STAGE_LABELS: Record<StageId, string> = {
  'sync-sqlite': 'full sync -> SQLite',
  'sync-postgres': 'full sync -> PostgreSQL',
  'fetch-only': 'fetch-only floor (HTTP + parse)',
  'write-only-sqlite': 'write-only floor (SQLite writePage)',
  'write-only-postgres': 'write-only floor (PostgreSQL writePage)',
  baseline: 'baseline: limit 100, one at a time',
  'rerun-unchanged': 'rerun, nothing changed',
  'rerun-incremental': 'rerun after 1% new rows',
  'full-refresh-sqlite': 'full refresh -> SQLite, 1% deleted',
  'full-refresh-postgres': 'full refresh -> PostgreSQL, 1% deleted',
  'sync-sqlite-tenth': 'full sync -> SQLite at N/10',
  'full-refresh-sqlite-tenth': 'full refresh -> SQLite at N/10',
  'fetch-only-slow': 'fetch-and-parse loop, slow pages',
  'cursor-chase-slow': 'cursor-chasing loop, slow pages (the limit)',
  'sync-sqlite-slow': 'full sync -> SQLite, slow pages',
  'sync-sqlite-history': 'full sync -> SQLite, history on',
  'sync-sqlite-audit': 'full sync -> SQLite, audit on',
  'sync-sealed': 'sealed walk (participant_data)',
  'sync-sqlite-memory': 'full sync -> SQLite, memory size',
};

export interface BenchSettings {
  rows: number;
  pageSize: number;
  pagesInFlight: number;
  latencyMs: number;
  baselinePageSize: number;
  bytesPerRow: number;
  /** Rows added before the incremental rerun. */
  insertedRows: number;
  /** Rows deleted on the server before the full refreshes at N and at N/10. */
  removedRows: number;
  removedTenthRows: number;
  postgres: boolean;
  /** Interleaved rounds of the stages in RatioStageId; the table shows each one's median. */
  rounds: number;
  /** The slow pages' latency (0: not measured). */
  slowLatencyMs: number;
  /** Every page was built before the stages (the server costs next to nothing). */
  prebuiltPages: boolean;
  /** Rows of each round's sealed walk (0: not measured). */
  sealedRows: number;
  /** Rows of the sync that shows memory against the rows (0: not measured). */
  memoryRows: number;
  node: string;
  cpus: string;
}

/** The stages the goals compare, measured once per round. */
export type RatioStageId =
  | 'fetch-only'
  | 'write-only-sqlite'
  | 'sync-sqlite'
  | 'fetch-only-slow'
  | 'cursor-chase-slow'
  | 'sync-sqlite-slow'
  | 'write-only-postgres'
  | 'sync-postgres'
  | 'sync-sqlite-history'
  | 'sync-sqlite-audit'
  | 'sync-sealed';

export interface MeasuredStage extends StageResult {
  /** Requests the fake server answered during the stage. */
  serverRequests: number;
  /** Wall time of the stage's process, from its start (start-up included) to its result. */
  processSeconds: number;
  /** CPU seconds the fake server's process used during the stage. */
  serverCpuSeconds?: number;
}

export interface Check {
  name: string;
  value: number;
  /** How the value is shown, e.g. `1.12` or `3.4x`. */
  shown: string;
  target: string;
  met: boolean;
  /** How it was computed. */
  detail: string;
}

export interface BenchResults {
  settings: BenchSettings;
  stages: Partial<Record<StageId, MeasuredStage>>;
  checks: Check[];
  /** The SQLite sync / floor ratio of each round on its own, to show how much the machine drifts. */
  sqliteRatioByRound: number[];
  /** Each round's goals (goals.ts), a line each. */
  goalRounds: string[][];
}

const TARGET_SYNC_OVER_FLOOR = 1.25;
const TARGET_RSS_GROWTH = 1.2;
const TARGET_RSS_MB = 256;

function need(stages: BenchResults['stages'], id: StageId): MeasuredStage {
  const stage = stages[id];
  if (!stage) throw new Error(`The benchmark has no result for stage ${id}.`);
  return stage;
}

function rowsPerSecond(stage: StageResult): number {
  return stage.seconds > 0 ? stage.rows / stage.seconds : 0;
}

/** The middle measurement by time (the faster of the two middles for an even count). */
export function medianStage(measured: MeasuredStage[]): MeasuredStage {
  const sorted = [...measured].sort((a, b) => a.seconds - b.seconds);
  const middle = sorted[Math.floor((sorted.length - 1) / 2)];
  if (!middle) throw new Error('The benchmark has no measurement to take the median of.');
  return middle;
}

/** Sync time over the slower of its two floors: 1.0 means the sync is as fast as it can be. */
export function floorRatio(sync: StageResult, fetch: StageResult, write: StageResult): number {
  return sync.seconds / Math.max(fetch.seconds, write.seconds);
}

function peakRss(name: string, stage: MeasuredStage): Check {
  return {
    name,
    value: stage.peakRssMb,
    shown: `${stage.peakRssMb.toFixed(1)} MB`,
    target: `< ${TARGET_RSS_MB} MB`,
    met: stage.peakRssMb < TARGET_RSS_MB,
    detail: 'whole syncing process, maxRSS',
  };
}

function syncOverFloor(
  name: string,
  sync: MeasuredStage,
  fetch: MeasuredStage,
  write: MeasuredStage,
): Check {
  const value = floorRatio(sync, fetch, write);
  return {
    name,
    value,
    shown: value.toFixed(2),
    target: `<= ${TARGET_SYNC_OVER_FLOOR}`,
    met: value <= TARGET_SYNC_OVER_FLOOR,
    detail: `${sync.seconds.toFixed(2)} s / max(fetch ${fetch.seconds.toFixed(2)} s, write ${write.seconds.toFixed(2)} s)`,
  };
}

/** The ratios and targets, from the measured stages. */
export function computeChecks(settings: BenchSettings, stages: BenchResults['stages']): Check[] {
  const sync = need(stages, 'sync-sqlite');
  const fetch = need(stages, 'fetch-only');
  const checks: Check[] = [
    syncOverFloor('sync / floor, SQLite (time)', sync, fetch, need(stages, 'write-only-sqlite')),
  ];
  const syncPostgres = stages['sync-postgres'];
  const writePostgres = stages['write-only-postgres'];
  if (syncPostgres && writePostgres) {
    checks.push(
      syncOverFloor('sync / floor, PostgreSQL (time)', syncPostgres, fetch, writePostgres),
    );
  }

  const tenth = need(stages, 'sync-sqlite-tenth');
  const growth = sync.peakRssMb / tenth.peakRssMb;
  checks.push({
    name: 'peak RSS(N) / RSS(N/10)',
    value: growth,
    shown: growth.toFixed(2),
    target: `<= ${TARGET_RSS_GROWTH}`,
    met: growth <= TARGET_RSS_GROWTH,
    detail: `${sync.peakRssMb.toFixed(1)} MB / ${tenth.peakRssMb.toFixed(1)} MB`,
  });
  checks.push(peakRss('peak RSS of the full sync at N', sync));

  // A full refresh holds what it needs to find deletions in the warehouse, not in memory.
  const refresh = need(stages, 'full-refresh-sqlite');
  const refreshTenth = need(stages, 'full-refresh-sqlite-tenth');
  const refreshGrowth = refresh.peakRssMb / refreshTenth.peakRssMb;
  checks.push({
    name: 'full refresh peak RSS(N) / RSS(N/10)',
    value: refreshGrowth,
    shown: refreshGrowth.toFixed(2),
    target: `<= ${TARGET_RSS_GROWTH}`,
    met: refreshGrowth <= TARGET_RSS_GROWTH,
    detail: `${refresh.peakRssMb.toFixed(1)} MB / ${refreshTenth.peakRssMb.toFixed(1)} MB`,
  });
  checks.push(peakRss('peak RSS of the full refresh at N, SQLite', refresh));
  const refreshPostgres = stages['full-refresh-postgres'];
  if (refreshPostgres) {
    checks.push(peakRss('peak RSS of the full refresh at N, PostgreSQL', refreshPostgres));
  }
  const marked = [
    refresh.deleted,
    refreshTenth.deleted,
    ...(refreshPostgres ? [refreshPostgres.deleted] : []),
  ];
  const removed = [
    settings.removedRows,
    settings.removedTenthRows,
    ...(refreshPostgres ? [settings.removedRows] : []),
  ];
  checks.push({
    name: 'rows the full refreshes marked deleted',
    value: refresh.deleted ?? 0,
    shown: marked.map((count) => formatInteger(count ?? 0)).join(' / '),
    target: `= ${removed.map(formatInteger).join(' / ')}`,
    met: marked.every((count, index) => count === removed[index]),
    detail: `rows deleted on the server before each: at N, at N/10${refreshPostgres ? ', PostgreSQL at N' : ''}`,
  });

  const baseline = need(stages, 'baseline');
  const speedUp = rowsPerSecond(sync) / rowsPerSecond(baseline);
  checks.push({
    name: 'speed-up over the baseline',
    value: speedUp,
    shown: `${speedUp.toFixed(1)}x`,
    target: '> 1x',
    met: speedUp > 1,
    detail: `${formatInteger(rowsPerSecond(sync))} rows/s vs ${formatInteger(rowsPerSecond(baseline))} rows/s`,
  });

  // manifest, team, and one page that says nothing is new.
  const unchanged = need(stages, 'rerun-unchanged');
  checks.push({
    name: 'requests of an unchanged rerun',
    value: unchanged.serverRequests,
    shown: String(unchanged.serverRequests),
    target: '<= 3',
    met: unchanged.serverRequests <= 3 && unchanged.rows === 0,
    detail: `manifest + team + 1 page; ${unchanged.rows} rows written, ${unchanged.seconds.toFixed(3)} s`,
  });
  const incremental = need(stages, 'rerun-incremental');
  const expectedPages = Math.max(1, Math.ceil(settings.insertedRows / settings.pageSize));
  const allowed = 2 + expectedPages + 1;
  checks.push({
    name: 'requests of the 1% incremental rerun',
    value: incremental.serverRequests,
    shown: String(incremental.serverRequests),
    target: `<= ${allowed}`,
    met: incremental.serverRequests <= allowed && incremental.rows === settings.insertedRows,
    detail: `${formatInteger(incremental.rows)} of ${formatInteger(settings.insertedRows)} new rows fetched, ${incremental.seconds.toFixed(2)} s`,
  });
  return checks;
}

export function formatInteger(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

function formatSeconds(seconds: number): string {
  return seconds < 10 ? seconds.toFixed(3) : seconds.toFixed(2);
}

const STAGE_ORDER: StageId[] = [
  'sync-sqlite',
  'sync-postgres',
  'fetch-only',
  'write-only-sqlite',
  'write-only-postgres',
  'baseline',
  'rerun-unchanged',
  'rerun-incremental',
  'full-refresh-sqlite',
  'full-refresh-postgres',
  'sync-sqlite-tenth',
  'full-refresh-sqlite-tenth',
  'fetch-only-slow',
  'cursor-chase-slow',
  'sync-sqlite-slow',
  'sync-sqlite-history',
  'sync-sqlite-audit',
  'sync-sealed',
  'sync-sqlite-memory',
];

export function table(header: string[], rows: string[][], rightAligned: boolean[]): string[] {
  const widths = header.map((cell, index) =>
    Math.max(cell.length, ...rows.map((row) => row[index]!.length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, index) =>
        rightAligned[index] ? cell.padStart(widths[index]!) : cell.padEnd(widths[index]!),
      )
      .join(' | ');
  return [line(header), widths.map((width) => '-'.repeat(width)).join('-|-'), ...rows.map(line)];
}

/**
 * The design the sync runs, and why: the table says what it measures. The alternatives are
 * measured by bench/overlap.ts (docs/performance.md).
 */
export const SYNC_DESIGN =
  "Design: a page pipeline. The sync's thread only fetches (pages in flight; the next request leaves " +
  "when a body's head names its cursor) and moves each body's bytes to a page thread, which parses, " +
  'checks, plans and encodes the page and hands it over while the page ahead commits: SQLite on its ' +
  "writer thread, PostgreSQL (by COPY for pages of many rows) on the page thread's own connections; " +
  'pages commit in order with their cursors, none after one that failed (docs/performance.md).';

/** The human-readable report. */
export function formatReport(results: BenchResults): string {
  const { settings, stages, checks } = results;
  const lines: string[] = [];
  lines.push(
    `ocs-sync benchmark: ${formatInteger(settings.rows)} rows of one chat-message-like resource ` +
      `(~${Math.round(settings.bytesPerRow)} bytes a row as JSON), page size ${settings.pageSize}, ` +
      `${settings.pagesInFlight} pages in flight, fake page latency ${settings.latencyMs} ms` +
      (settings.slowLatencyMs > 0 ? ` (slow pages: ${settings.slowLatencyMs} ms)` : ''),
  );
  lines.push(
    `Node ${settings.node}, ${settings.cpus}; the fake server runs in its own process, every stage in a fresh one; ` +
      (settings.prebuiltPages
        ? 'every page was built before the stages, so the server costs next to nothing.'
        : 'the server builds each page as it is asked.'),
  );
  lines.push(SYNC_DESIGN);
  lines.push('');
  const rows = STAGE_ORDER.filter((id) => stages[id]).map((id) => {
    const stage = stages[id]!;
    return [
      STAGE_LABELS[id],
      formatInteger(stage.rows),
      formatSeconds(stage.seconds),
      formatSeconds(stage.cpuSeconds),
      stage.rows > 0 ? formatInteger(rowsPerSecond(stage)) : '-',
      stage.peakRssMb.toFixed(1),
      String(stage.serverRequests),
    ];
  });
  lines.push(
    ...table(['stage', 'rows', 'seconds', 'CPU s', 'rows/s', 'peak RSS MB', 'requests'], rows, [
      false,
      true,
      true,
      true,
      true,
      true,
      true,
    ]),
  );
  lines.push('');
  const nameWidth = Math.max(...checks.map((check) => check.name.length));
  const shownWidth = Math.max(...checks.map((check) => check.shown.length));
  const targetWidth = Math.max(...checks.map((check) => check.target.length));
  for (const check of checks) {
    lines.push(
      `${check.name.padEnd(nameWidth)}  ${check.shown.padStart(shownWidth)}  target ${check.target.padEnd(targetWidth)}  ` +
        `${check.met ? 'met    ' : 'NOT MET'}  (${check.detail})`,
    );
  }
  if (settings.rounds > 1) {
    lines.push(
      `SQLite sync / floor in each of the ${settings.rounds} rounds: ` +
        `${results.sqliteRatioByRound.map((ratio) => ratio.toFixed(2)).join(' / ')} ` +
        '(the table shows the median round of each stage)',
    );
  }
  results.goalRounds.forEach((goals, round) => {
    lines.push(`Goals in round ${round + 1}:`, ...goals.map((goal) => `  ${goal}`));
  });
  const profiles = (['sync-sqlite', 'full-refresh-sqlite'] as const).filter(
    (id) => stages[id]?.rssProfileMb.length === 4,
  );
  if (profiles.length > 0) lines.push('');
  for (const id of profiles) {
    lines.push(
      `RSS along the ${id === 'sync-sqlite' ? 'full SQLite sync' : 'SQLite full refresh'} (10% / 50% / 90% / end of the run): ${stages[id]!.rssProfileMb.map((v) => v.toFixed(1)).join(' / ')} MB`,
    );
  }
  if (!settings.postgres) {
    lines.push(
      'PostgreSQL stages skipped: give --postgres URL (or OCS_BENCH_POSTGRES_URL / OCS_TEST_POSTGRES_URL).',
    );
  }
  return lines.join('\n');
}

export function resultsAsJson(results: BenchResults): string {
  return JSON.stringify(
    {
      settings: results.settings,
      stages: Object.fromEntries(
        Object.entries(results.stages).map(([id, stage]) => [
          id,
          {
            label: STAGE_LABELS[id as StageId],
            ...stage,
            rowsPerSecond: Math.round(rowsPerSecond(stage)),
          },
        ]),
      ),
      checks: results.checks,
      sqliteRatioByRound: results.sqliteRatioByRound,
      goalRounds: results.goalRounds,
    },
    null,
    2,
  );
}
