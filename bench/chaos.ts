/**
 * The chaos soak (`npm run bench -- soak --chaos`): `ocs-sync daemon` against the fake server of
 * the soak (soak.ts, soak-server-process.ts) while the server rotates through the faults of issue
 * 34 (rate-limit headers a proxy made blank or zero, 503 with Retry-After, a file replaced under
 * its row, line breaks in its text) on top of 5xx, resets, cut bodies and 429s, and a supervisor
 * (chaos-supervisor.ts) kills the daemon at seeded random moments and restarts it after a
 * back-off, as Kubernetes would. Then the server goes quiet, one sync and one full refresh run,
 * and the warehouse is compared with the server row for row (chaos-compare.ts), and searched for
 * what a dead process could leave behind: a run still `running`, a lock, temporary files.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { setTimeout as wait } from 'node:timers/promises';
import type { FakeFault } from '../src/fake-server/faults.js';
import { SeededRandom } from '../src/fake-server/random.js';
import { openWarehouseReader } from '../src/warehouse/open.js';
import { parseModeFlags, runBenchMode } from './bench-mode.js';
import { runStageProcess } from './bench.js';
import {
  compareFileContents,
  compareWithServer,
  type LedgerRow,
  type TableComparison,
} from './chaos-compare.js';
import {
  drawEnd,
  live,
  pidNamespaceWorks,
  restartDelayMs,
  startOcsSync,
  type Life,
  type LifeEnd,
  type LifePolicy,
  type OcsProcess,
} from './chaos-supervisor.js';
import {
  SoakUsageError,
  divisorOf60,
  numberOption,
  openSoakBed,
  withTimeout,
  type SoakBed,
} from './soak-bed.js';
import type { ServerTruth } from './soak-server-process.js';
import { connectPostgres, readTable, sqliteQuery } from './warehouse-rows.js';

export interface ChaosOptions extends LifePolicy {
  /** How long the chaos lasts, before the final quiet runs. */
  minutes: number;
  scheduleSeconds: number;
  fullRefreshMinutes: number;
  rowsPerResource: number;
  pageSize: number;
  faultRate: number;
  changeSeconds: number;
  /** How long each fault of the rotation lasts. */
  phaseSeconds: number;
  /** The first back-off before a restart (restartDelayMs). */
  restartSeconds: number;
  /** Run the daemon as pid 1 of a PID namespace of its own, as a container does. */
  pidNamespace: boolean;
  postgresUrl?: string;
  audit: boolean;
  seed: number;
  json: boolean;
}

export interface ChaosOutput {
  out(text: string): void;
  progress(text: string): void;
  chaos?(results: ChaosResults): void;
}

export const CHAOS_USAGE = `Usage: npm run bench -- soak --chaos [options]
  --minutes N               how long the chaos lasts, before the final quiet runs (default 10)
  --schedule-seconds N      seconds between scheduled syncs, a divisor of 60 (default 5)
  --full-refresh-minutes N  minutes between full refreshes, a divisor of 60; 0 for none (default 1)
  --rows N                  rows per resource of the fake team (default 200)
  --page-size N             page size of the daemon (default 100)
  --fault-rate P            share of requests the server answers with a fault (default 0.1)
  --change-seconds N        seconds between two rounds of changes on the server (default 5)
  --phase-seconds N         seconds each fault of the rotation lasts (default 30)
  --kill-seconds N          how long a daemon lives before it is ended (default 20): a third
                            at a random moment of the first half of it (starting, the first
                            run), a third in the middle of a run once one has ended ok, a
                            third at a random moment of it after their first run ended ok
  --stop-share P            share of the ends that are SIGTERM, then -9 past the grace period,
                            as docker stop does (default 0.25; the others are -9)
  --grace-seconds N         the grace period after SIGTERM (default 10, as docker stop)
  --restart-seconds N       the back-off before a restart, doubled for each process in a row
                            that died before a run ended ok, at most ten times (default 1)
  --stuck-seconds N         a process with no run ended ok this long after its start is a hang
                            (default 180)
  --no-pid-namespace        run the daemon as an ordinary child process (default: as pid 1 of a
                            PID namespace of its own, as in a container, when unshare works)
  --postgres URL            a PostgreSQL warehouse (a schema of its own) instead of SQLite
  --audit                   the daemon keeps the audit chain; audit verify must pass at the end
  --seed N                  seed of the fake team, its faults and the kills (default 34)
  --json                    print the results as JSON`;

export function parseChaosArgs(argv: string[]): ChaosOptions {
  const values = parseModeFlags(
    argv,
    [
      'minutes',
      'schedule-seconds',
      'full-refresh-minutes',
      'rows',
      'page-size',
      'fault-rate',
      'change-seconds',
      'phase-seconds',
      'kill-seconds',
      'stop-share',
      'grace-seconds',
      'restart-seconds',
      'stuck-seconds',
      'postgres',
      'seed',
    ],
    CHAOS_USAGE,
    (message) => new SoakUsageError(message),
    ['chaos', 'audit', 'no-pid-namespace'],
  );
  const positive = (value: number) => value > 0;
  const integer = (value: number) => Number.isSafeInteger(value) && value > 0;
  const share = (value: number) => value >= 0 && value < 1;
  const number = (
    flag: keyof typeof values & string,
    fallback: number,
    check: (value: number) => boolean,
    what: string,
  ) =>
    numberOption(
      values[flag] as string | undefined,
      `--${flag}`,
      fallback,
      check,
      what,
      CHAOS_USAGE,
    );
  return {
    minutes: number('minutes', 10, positive, 'a positive number'),
    scheduleSeconds: number('schedule-seconds', 5, divisorOf60, 'a divisor of 60'),
    fullRefreshMinutes: number(
      'full-refresh-minutes',
      1,
      (value) => value === 0 || divisorOf60(value),
      'a divisor of 60, or 0',
    ),
    rowsPerResource: number('rows', 200, integer, 'a positive integer'),
    pageSize: number(
      'page-size',
      100,
      (value) => integer(value) && value <= 1000,
      'an integer from 1 to 1000',
    ),
    faultRate: number('fault-rate', 0.1, share, 'a share from 0 to below 1'),
    changeSeconds: number('change-seconds', 5, positive, 'a positive number'),
    phaseSeconds: number('phase-seconds', 30, positive, 'a positive number'),
    killSeconds: number('kill-seconds', 20, positive, 'a positive number'),
    stopShare: number(
      'stop-share',
      0.25,
      (value) => value >= 0 && value <= 1,
      'a share from 0 to 1',
    ),
    graceSeconds: number('grace-seconds', 10, positive, 'a positive number'),
    restartSeconds: number('restart-seconds', 1, (value) => value >= 0, 'a number of seconds'),
    stuckSeconds: number('stuck-seconds', 180, positive, 'a positive number'),
    pidNamespace: values['no-pid-namespace'] !== true && pidNamespaceWorks(),
    postgresUrl: values.postgres,
    audit: values.audit === true,
    seed: number('seed', 34, (value) => Number.isSafeInteger(value), 'an integer'),
    json: values.json,
  };
}

// ---------------------------------------------------------------------------------------------
// The faults, in rotation.

/** One turn of the rotation: faults drawn at the fault rate, headers on every answer, files. */
export interface ChaosPhase {
  name: string;
  kinds: FakeFault[];
  proxyHeaders?: Record<string, string>;
  /** Faults for the next file content requests (files are few: drawn ones would rarely hit). */
  nextFiles?: { count: number; fault: FakeFault };
}

/** What a real deployment meets all the time: a proxy's 502 page, 503s, resets, cut bodies, 429s. */
const EVERY_PHASE: FakeFault[] = [
  { kind: 'status', status: 503 },
  { kind: 'status', status: 502, html: true },
  { kind: 'status', status: 500 },
  { kind: 'drop' },
  { kind: 'truncate' },
  { kind: 'truncate', declareLength: true },
  { kind: 'rate_limit', retryAfterSeconds: 1 },
];

/** Spent, with a window that ends at once: what used to leave the pacer waiting for ever. */
const SPENT = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '0' };
const FORGED = '\r\nFAKE LOG {"level":30,"msg":"forged"}\u2028FAKE\nFAKE';

export const CHAOS_PHASES: ChaosPhase[] = [
  {
    name: 'blank rate-limit headers',
    kinds: [],
    proxyHeaders: { 'x-ratelimit-limit': '', ...SPENT },
  },
  {
    name: 'zero rate-limit headers',
    kinds: [],
    proxyHeaders: { 'x-ratelimit-limit': '0', ...SPENT },
  },
  {
    name: '503 with Retry-After',
    kinds: [
      { kind: 'status', status: 503, retryAfterSeconds: 3 },
      { kind: 'status', status: 503, retryAfterSeconds: 3 },
      { kind: 'status', status: 503, html: true, retryAfterSeconds: 20 },
    ],
  },
  {
    name: 'files replaced under their rows (stale content_size)',
    kinds: [{ kind: 'replace_file', extraBytes: 4096 }],
    nextFiles: { count: 3, fault: { kind: 'replace_file', extraBytes: 4096 } },
  },
  {
    name: 'line breaks in server text',
    kinds: [
      { kind: 'status', status: 503, body: { detail: `Unavailable${FORGED}` } },
      { kind: 'status', status: 502, body: { detail: `Bad gateway${FORGED}` } },
    ],
  },
  { name: '5xx, resets, cut bodies and 429 only', kinds: [] },
];

// ---------------------------------------------------------------------------------------------
// The soak.

export interface ChaosResults {
  options: Omit<ChaosOptions, 'postgresUrl' | 'json'> & { warehouse: 'SQLite' | 'PostgreSQL' };
  node: string;
  chaosMinutes: number;
  phases: string[];
  /** Turns of the rotation (the first phase included). */
  phaseTurns: number;
  /** Rounds of changes the server made. */
  changes: number;
  /** Daemon processes started; every one but the first is a restart. */
  processes: number;
  restarts: number;
  /** The longest back-off before a restart. */
  longestBackOffSeconds: number;
  /** kill -9 at a random moment, and how many of them during a run. */
  kills: number;
  killsDuringRun: number;
  /** SIGTERM at a random moment (the one at the end apart), and how many exited 0 in the grace. */
  stops: number;
  stopsExitedZero: number;
  /** SIGTERM that needed the -9, the one at the end included. */
  stopsPastGrace: number;
  /** Of those, the ones sent before the process had logged anything: before its handlers. */
  stopsPastGraceAtStart: number;
  /** Processes that ended by themselves, and ones with no run ended ok within --stuck-seconds. */
  died: number;
  stuck: number;
  /** From a restart to the end of that process's first run that ended ok. */
  restartToOk: {
    measured: number;
    /** Restarts ended before a run of theirs ended ok. */
    endedBefore: number;
    longestSeconds: number | null;
    medianSeconds: number | null;
  };
  /** Runs as the warehouse records them, the two final runs apart. */
  runs: {
    ok: number;
    partial: number;
    failed: number;
    interrupted: number;
    running: number;
    /** Interrupted runs a later start closed: their process died without recording its end. */
    closedByNextStart: number;
    fullRefreshes: number;
    fullRefreshesOk: number;
  };
  /** `forged`: lines not JSON that start with what server text tried to start a line with. */
  logLines: { warn: number; error: number; notJson: number; forged: number };
  /** The first few lines of the daemon's stderr that were not JSON. */
  notJson: string[];
  final: FinalChecks;
  /** Every check that failed, one line each; none: the soak passed. */
  problems: string[];
}

export interface FinalChecks {
  /** `sync` once the server is quiet: exit code (null: it hung), and nothing lost. */
  sync: { exitCode: number | null; comparison: TableComparison };
  /** `sync --full-refresh` then: exit code, and the warehouse equals the server. */
  fullRefresh: { exitCode: number | null; comparison: TableComparison };
  files: { files: number; problems: string[] };
  /** `kind status` of the two final runs as recorded. */
  finalRuns: string[];
  runsLeftRunning: number;
  /** Whether a process holds the writer lock (null: cannot tell), and a record left in `_ocs_lock`. */
  lockHeld: boolean | null;
  lockRecord: string | null;
  /** Temporary files, partial downloads, SQLite journals: paths. */
  leftBehind: string[];
  auditVerified?: { entries: number; versions: number };
  auditProblem?: string;
}

/** A final run that takes longer than this is taken for a hang. */
const FINAL_RUN_TIMEOUT_MS = 10 * 60_000;

export async function runChaos(options: ChaosOptions, output: ChaosOutput): Promise<ChaosResults> {
  const bed = await openSoakBed({ ...options, rateLimit: 10_000 }, 'chaos');
  const temporary = join(bed.directory, 'tmp');
  mkdirSync(temporary);
  const env = { ...bed.env, TMPDIR: temporary };
  const logFile = join(bed.directory, 'daemon.log');
  const processes: OcsProcess[] = [];
  const start = (args: string[], onEntry?: (message: string) => void) => {
    const started = startOcsSync(args, {
      env,
      pidNamespace: options.pidNamespace,
      logFile,
      onEntry: onEntry && ((entry) => onEntry(entry.msg ?? '')),
    });
    processes.push(started);
    return started;
  };
  const random = new SeededRandom(options.seed);
  const startedAt = performance.now();
  const now = () => performance.now() - startedAt;
  const chaosMs = options.minutes * 60_000;
  let rotation: NodeJS.Timeout | undefined;
  try {
    let phaseTurns = 0;
    const nextPhase = () => {
      const phase = CHAOS_PHASES[phaseTurns % CHAOS_PHASES.length]!;
      phaseTurns += 1;
      return bed.serverRequest({
        type: 'faults',
        kinds: [...phase.kinds, ...EVERY_PHASE],
        rate: options.faultRate,
        proxyHeaders: phase.proxyHeaders,
        nextFiles: phase.nextFiles,
      });
    };
    await nextPhase();
    rotation = setInterval(
      () => void nextPhase().catch(() => undefined),
      options.phaseSeconds * 1000,
    );
    output.progress(
      `chaos: the daemon ${options.pidNamespace ? 'as pid 1 of a PID namespace of its own' : 'as a child process'}, ended at random moments for ${options.minutes} min; faults rotate every ${options.phaseSeconds} s`,
    );

    const lives: Life[] = [];
    let deathsBeforeOk = 0;
    let longestBackOff = 0;
    let nextReport = 60_000;
    while (now() < chaosMs) {
      const life = await live(
        drawEnd(random, options),
        options,
        (onEntry) => start(['daemon'], onEntry),
        now,
        chaosMs - now(),
      );
      lives.push(life);
      if (now() >= nextReport) {
        output.progress(`  ${(now() / 60_000).toFixed(1)} min: ${describeLives(lives)}`);
        nextReport += 60_000;
      }
      if (life.end === 'chaos over') break;
      deathsBeforeOk = life.firstOkAfter === undefined ? deathsBeforeOk + 1 : 0;
      const delay = restartDelayMs(options.restartSeconds * 1000, deathsBeforeOk);
      if (now() + delay >= chaosMs) break;
      longestBackOff = Math.max(longestBackOff, delay);
      await wait(delay);
    }
    clearInterval(rotation);
    const chaosMinutes = now() / 60_000;
    const changes = await bed.serverRequest<number>({ type: 'changes' });
    await bed.serverRequest({ type: 'quiet' });
    output.progress(`chaos: ${describeLives(lives)}`);
    const final = await finalChecks(bed, options, temporary, (args) => start(args), output);
    const logs = processes.map((started) => started.log);
    return summarize(options, lives, final.checks, final.runs, {
      chaosMinutes,
      phaseTurns,
      changes,
      longestBackOffSeconds: longestBackOff / 1000,
      logLines: {
        warn: sum(logs.map((log) => log.counts.warn)),
        error: sum(logs.map((log) => log.counts.error)),
        notJson: sum(processes.map((started) => started.notJson().length)),
        forged: sum(
          processes.map(
            (started) => started.notJson().filter((line) => line.startsWith('FAKE')).length,
          ),
        ),
      },
      notJson: processes.flatMap((started) => started.notJson()).slice(0, 5),
    });
  } finally {
    clearInterval(rotation);
    for (const started of processes) {
      if (!started.running()) continue;
      await started.signal('SIGKILL');
      await started.exited;
    }
    await bed.close();
  }
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

function describeLives(lives: Life[]): string {
  const ended = (end: LifeEnd) => lives.filter((life) => life.end === end).length;
  return `${lives.length} processes, ${ended('killed')} killed, ${ended('stopped')} stopped, ${ended('died')} ended by themselves, ${ended('stuck')} stuck`;
}

/** Runs `ocs-sync ARGS` to its end; null when it had to be killed (a hang). */
async function runToEnd(started: OcsProcess): Promise<number | null> {
  try {
    return (await withTimeout(started.exited, FINAL_RUN_TIMEOUT_MS, 'a final run')).code;
  } catch {
    await started.signal('SIGKILL');
    await started.exited;
    return null;
  }
}

async function finalChecks(
  bed: SoakBed,
  options: ChaosOptions,
  temporary: string,
  start: (args: string[]) => OcsProcess,
  output: ChaosOutput,
): Promise<{ checks: FinalChecks; runs: ChaosResults['runs'] }> {
  const dialect = options.postgresUrl ? 'postgres' : 'sqlite';
  const connection =
    dialect === 'postgres'
      ? await connectPostgres(bed.warehouse.url, bed.warehouse.schema!)
      : { query: sqliteQuery(bed.warehouse.url), close: async () => undefined };
  try {
    const { query } = connection;
    const read = (table: string, includeDeleted: boolean) =>
      readTable(query, dialect, table, { includeDeleted });
    const truth = () => bed.serverRequest<ServerTruth>({ type: 'truth', dialect });

    output.progress('chaos: the server is quiet; a last sync, then a full refresh ...');
    const syncExit = await runToEnd(start(['sync']));
    const sync = {
      exitCode: syncExit,
      comparison: await compareWithServer(await truth(), read, 'incremental'),
    };
    const fullRefreshExit = await runToEnd(start(['sync', '--full-refresh']));
    // Before anything here opens the warehouse again: what the processes left.
    const leftBehind = leftovers(bed, temporary, dialect);
    const served = await truth();
    const fullRefresh = {
      exitCode: fullRefreshExit,
      comparison: await compareWithServer(served, read, 'full refresh'),
    };
    const ledger = (
      await query('SELECT CAST(file_id AS TEXT) AS file_id, sha256, size, status FROM "_ocs_files"')
    ).map((row): LedgerRow => ({
      fileId: String(row.file_id),
      status: String(row.status),
      sha256: (row.sha256 as string | null) ?? null,
      size: row.size === null ? null : Number(row.size),
    }));
    const runs = await query('SELECT kind, status, error FROM "_ocs_runs" ORDER BY id');
    const reader = await openWarehouseReader(bed.warehouse);
    let lockHeld: boolean | undefined;
    let lockRecord: Awaited<ReturnType<typeof reader.lockHolder>>;
    try {
      lockHeld = await reader.writerLockHeld();
      lockRecord = await reader.lockHolder();
    } finally {
      await reader.close();
    }
    const checks: FinalChecks = {
      sync,
      fullRefresh,
      files: compareFileContents(served, ledger, bed.filesDir),
      finalRuns: runs.slice(-2).map((run) => `${String(run.kind)} ${String(run.status)}`),
      runsLeftRunning: runs.filter((run) => run.status === 'running').length,
      lockHeld: lockHeld ?? null,
      lockRecord: lockRecord
        ? `pid ${lockRecord.pid} on ${lockRecord.host} since ${lockRecord.since}`
        : null,
      leftBehind,
    };
    if (options.audit) {
      output.progress('chaos: audit verify ...');
      try {
        const verified = await runStageProcess({ kind: 'verify', warehouse: bed.warehouse });
        checks.auditVerified = { entries: verified.pages, versions: verified.rows };
      } catch (error) {
        checks.auditProblem = (error as Error).message.split('\n')[0]!;
      }
    }
    return { checks, runs: countRuns(runs.slice(0, -2)) };
  } finally {
    await connection.close();
  }
}

/** The runs of the chaos, by status as recorded. */
function countRuns(runs: Array<Record<string, unknown>>): ChaosResults['runs'] {
  const withStatus = (status: string) => runs.filter((run) => run.status === status).length;
  return {
    ok: withStatus('ok'),
    partial: withStatus('partial'),
    failed: withStatus('failed'),
    interrupted: withStatus('interrupted'),
    running: withStatus('running'),
    closedByNextStart: runs.filter(
      (run) =>
        run.status === 'interrupted' &&
        String(run.error ?? '').startsWith('Closed by the next start'),
    ).length,
    fullRefreshes: runs.filter((run) => run.kind === 'full_refresh').length,
    fullRefreshesOk: runs.filter((run) => run.kind === 'full_refresh' && run.status === 'ok')
      .length,
  };
}

/**
 * What no process may leave once every one has ended: partial downloads in the blob store,
 * anything in the processes' TMPDIR, a SQLite journal beside the warehouse (its `-lock` side
 * file stays: it is the lock, held by nobody).
 */
function leftovers(bed: SoakBed, temporary: string, dialect: 'sqlite' | 'postgres'): string[] {
  const found: string[] = [];
  const partials = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.name.startsWith('.partial-')) found.push(path);
      else if (entry.isDirectory()) partials(path);
    }
  };
  try {
    partials(bed.filesDir);
  } catch {
    // No blob store (no files): nothing in it either.
  }
  found.push(...readdirSync(temporary).map((name) => join(temporary, name)));
  if (dialect === 'sqlite') {
    const file = basename(bed.warehouse.url);
    const folder = dirname(bed.warehouse.url);
    for (const name of readdirSync(folder)) {
      if (name.startsWith(file) && name !== file && name !== `${file}-lock`) {
        found.push(join(folder, name));
      }
    }
  }
  return found;
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function summarize(
  options: ChaosOptions,
  lives: Life[],
  final: FinalChecks,
  runs: ChaosResults['runs'],
  measured: Pick<
    ChaosResults,
    'chaosMinutes' | 'phaseTurns' | 'changes' | 'longestBackOffSeconds' | 'logLines' | 'notJson'
  >,
): ChaosResults {
  const ended = (end: LifeEnd) => lives.filter((life) => life.end === end);
  const restarts = lives.slice(1);
  const toOk = restarts.flatMap((life) =>
    life.firstOkAfter === undefined ? [] : [life.firstOkAfter / 1000],
  );
  const stops = ended('stopped');
  const pastGrace = lives.filter((life) => life.pastGrace);
  const problems: string[] = [];
  lives.forEach((life, index) => {
    const which = `process ${index + 1} (started at ${(life.startedAt / 60_000).toFixed(1)} min)`;
    if (life.end === 'died') {
      problems.push(
        `${which} ended by itself (${life.exit.signal ?? `exit code ${life.exit.code}`})${life.errors[0] ? `: ${life.errors[0]}` : ''}`,
      );
    }
    if (life.end === 'stuck') {
      problems.push(
        `${which} had no run end ok within ${options.stuckSeconds} s of its start: a hang`,
      );
    }
    if (life.pastGrace && life.hadLogged) {
      problems.push(`${which} was still running ${options.graceSeconds} s after SIGTERM`);
    }
    if (
      (life.end === 'stopped' || life.end === 'chaos over') &&
      !life.pastGrace &&
      life.exit.code !== 0 &&
      life.exit.code !== null
    ) {
      problems.push(`${which} exited ${life.exit.code} after SIGTERM, not 0`);
    }
  });
  if (measured.logLines.forged > 0) {
    problems.push(`server text started ${measured.logLines.forged} log line(s) of its own`);
  }
  const { sync, fullRefresh } = final;
  if (sync.exitCode !== 0)
    problems.push(`the final sync ${sync.exitCode === null ? 'hung' : `exited ${sync.exitCode}`}`);
  problems.push(...sync.comparison.problems.map((problem) => `after the final sync: ${problem}`));
  if (fullRefresh.exitCode !== 0) {
    problems.push(
      `the final full refresh ${fullRefresh.exitCode === null ? 'hung' : `exited ${fullRefresh.exitCode}`}`,
    );
  }
  problems.push(
    ...fullRefresh.comparison.problems.map((problem) => `after the full refresh: ${problem}`),
  );
  problems.push(...final.files.problems);
  if (final.finalRuns.join(', ') !== 'incremental ok, full_refresh ok') {
    problems.push(`the final runs are recorded as ${final.finalRuns.join(', ')}`);
  }
  if (final.runsLeftRunning > 0) problems.push(`${final.runsLeftRunning} run(s) left running`);
  if (final.lockHeld !== false)
    problems.push(`the writer lock is ${final.lockHeld ? 'held' : 'in an unknown state'}`);
  if (final.lockRecord) problems.push(`the lock's record is left: ${final.lockRecord}`);
  problems.push(...final.leftBehind.map((path) => `left behind: ${path}`));
  if (final.auditProblem) problems.push(`audit verify: ${final.auditProblem}`);
  return {
    options: {
      minutes: options.minutes,
      scheduleSeconds: options.scheduleSeconds,
      fullRefreshMinutes: options.fullRefreshMinutes,
      rowsPerResource: options.rowsPerResource,
      pageSize: options.pageSize,
      faultRate: options.faultRate,
      changeSeconds: options.changeSeconds,
      phaseSeconds: options.phaseSeconds,
      killSeconds: options.killSeconds,
      stopShare: options.stopShare,
      graceSeconds: options.graceSeconds,
      restartSeconds: options.restartSeconds,
      stuckSeconds: options.stuckSeconds,
      pidNamespace: options.pidNamespace,
      audit: options.audit,
      seed: options.seed,
      warehouse: options.postgresUrl ? 'PostgreSQL' : 'SQLite',
    },
    node: process.version,
    ...measured,
    phases: CHAOS_PHASES.map((phase) => phase.name),
    processes: lives.length,
    restarts: restarts.length,
    kills: ended('killed').length,
    killsDuringRun: ended('killed').filter((life) => life.duringRun).length,
    stops: stops.length,
    stopsExitedZero: stops.filter((life) => life.exit.code === 0).length,
    stopsPastGrace: pastGrace.length,
    stopsPastGraceAtStart: pastGrace.filter((life) => !life.hadLogged).length,
    died: ended('died').length,
    stuck: ended('stuck').length,
    restartToOk: {
      measured: toOk.length,
      endedBefore: restarts.length - toOk.length,
      longestSeconds: toOk.length > 0 ? Math.max(...toOk) : null,
      medianSeconds: median(toOk),
    },
    runs,
    final,
    problems,
  };
}

// ---------------------------------------------------------------------------------------------
// The report.

const count = (value: number) => value.toLocaleString('en-US');
const seconds = (value: number | null) => (value === null ? 'n/a' : `${value.toFixed(1)} s`);

function describeComparison(
  comparison: TableComparison,
  after: 'incremental' | 'full refresh',
): string {
  const { tables, rows, deletedMarked, awaitingFullRefresh, problems } = comparison;
  const found = problems.length === 0 ? '' : `; ${problems.length} finding(s)`;
  return after === 'incremental'
    ? `every row the server has is there as it has it: ${count(rows)} rows in ${tables} tables` +
        ` (${count(awaitingFullRefresh)} deleted on the server, live until a full refresh)${found}`
    : `the warehouse equals the server: ${tables} tables, ${count(rows)} rows, none doubled, ` +
        `${count(deletedMarked)} marked deleted (each one the server deleted)${found}`;
}

export function formatChaosReport(results: ChaosResults): string {
  const { options, final, runs, restartToOk } = results;
  const lines: string[] = [];
  lines.push(
    `ocs-sync chaos soak: \`ocs-sync daemon\` ended at random moments and restarted for ${results.chaosMinutes.toFixed(1)} min (Node ${results.node}), ` +
      `${options.pidNamespace ? 'as pid 1 of a PID namespace of its own' : 'as a child process'}, ${options.warehouse}${options.audit ? ' with the audit chain' : ''}; ` +
      `a sync every ${options.scheduleSeconds} s, ${options.fullRefreshMinutes > 0 ? `a full refresh every ${options.fullRefreshMinutes} min` : 'no full refreshes'}; ` +
      `fake server: ${options.rowsPerResource} rows per resource, page size ${options.pageSize}, rows changed every ${options.changeSeconds} s (${results.changes} rounds), ` +
      `${(options.faultRate * 100).toFixed(1)}% of requests faulty; seed ${options.seed}`,
  );
  lines.push(
    `faults in rotation, ${options.phaseSeconds} s each (${results.phaseTurns} turns): ${results.phases.join('; ')}; each on top of 5xx, resets, cut bodies and 429s`,
  );
  lines.push('');
  lines.push(
    `processes: ${results.processes} (${results.restarts} restarts, after back-offs of up to ${results.longestBackOffSeconds.toFixed(0)} s); ` +
      `${results.kills} killed with -9 (${results.killsDuringRun} during a run), ` +
      `${results.stops} stopped with SIGTERM (${results.stopsExitedZero} exited 0 within the ${options.graceSeconds} s grace), ` +
      `${results.stopsPastGrace} SIGTERM that needed the -9` +
      (results.stopsPastGraceAtStart > 0
        ? ` (${results.stopsPastGraceAtStart} sent before the first log line: as pid 1, a SIGTERM before ocs-sync listens for it is ignored)`
        : '') +
      `, ${results.died} ended by themselves, ${results.stuck} stuck`,
  );
  lines.push(
    `restart to its first run ended ok: longest ${seconds(restartToOk.longestSeconds)}, median ${seconds(restartToOk.medianSeconds)} ` +
      `(${restartToOk.measured} restarts; ${restartToOk.endedBefore} more were ended before one)`,
  );
  lines.push(
    `runs as the warehouse records them: ${runs.ok} ok, ${runs.partial} partial, ${runs.failed} failed, ` +
      `${runs.interrupted} interrupted (${runs.closedByNextStart} of them closed by the next start), ${runs.running} running; ` +
      `${runs.fullRefreshes} of them full refreshes (${runs.fullRefreshesOk} ok)`,
  );
  lines.push(
    `daemon log: ${results.logLines.warn} warnings, ${results.logLines.error} errors, ${results.logLines.notJson} lines not JSON`,
  );
  for (const line of results.notJson) lines.push(`  not JSON: ${line.slice(0, 160)}`);
  lines.push('');
  lines.push('the final runs, the server quiet (no faults, no changes):');
  const exit = (code: number | null) => (code === null ? 'hung' : `exit ${code}`);
  lines.push(
    `  sync: ${exit(final.sync.exitCode)}; ${describeComparison(final.sync.comparison, 'incremental')}`,
  );
  lines.push(
    `  sync --full-refresh: ${exit(final.fullRefresh.exitCode)}; ${describeComparison(final.fullRefresh.comparison, 'full refresh')}`,
  );
  lines.push(
    `  file contents: ${final.files.files} files, ${final.files.problems.length === 0 ? "each stored whole with the server's bytes" : `${final.files.problems.length} finding(s)`}`,
  );
  lines.push(
    `  recorded as ${final.finalRuns.join(', ')}; runs left running: ${final.runsLeftRunning}; ` +
      `writer lock: ${final.lockHeld === false ? 'free' : final.lockHeld ? 'HELD' : 'unknown'}, ${final.lockRecord ? `record left (${final.lockRecord})` : 'no record left'}; ` +
      `left behind: ${final.leftBehind.length === 0 ? 'nothing' : final.leftBehind.length}`,
  );
  if (final.auditVerified) {
    lines.push(
      `  audit verify: intact, ${final.auditVerified.entries} entries, ${final.auditVerified.versions} versions`,
    );
  }
  lines.push('');
  if (results.problems.length === 0) {
    lines.push('PASSED: every run ended, nothing lost or doubled, nothing left behind');
  } else {
    lines.push(`FAILED: ${results.problems.length} problem(s)`);
    for (const problem of results.problems) lines.push(`  ${problem}`);
  }
  return lines.join('\n');
}

/** `npm run bench -- soak --chaos …`: exit 0 passed, 1 failed (or a problem found), 2 usage. */
export function chaosMain(argv: string[], output: ChaosOutput): Promise<number> {
  return runBenchMode(
    {
      name: 'chaos soak',
      parse: parseChaosArgs,
      usageError: SoakUsageError,
      run: (options) => runChaos(options, output),
      format: formatChaosReport,
      passed: (results) => results.problems.length === 0,
    },
    argv,
    { out: output.out, progress: output.progress, results: output.chaos },
  );
}
