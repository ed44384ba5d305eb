/**
 * The soak (`npm run bench -- soak [--minutes 60]`): `ocs-sync daemon` as a child process on a
 * fast schedule, with full refreshes now and then, against the built-in fake server in a process
 * of its own (faults at a steady rate, rows changing all the time). The soak reads the daemon's
 * /metrics every second and prints the runs that ended ok and failed, the minimum RSS and heap
 * used of each window and their slope per hour, and which groups of objects grew between two heap
 * snapshots taken between runs.
 *
 * The snapshots use Node's own `--heapsnapshot-signal`: the soak starts the daemon with it and
 * sends SIGUSR2 when /metrics says no run is in progress (and checks afterwards that none started
 * or ended meanwhile). Nothing in ocs-sync itself is needed or enabled for it.
 */
import { parseModeFlags, runBenchMode } from './bench-mode.js';
import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { runStageProcess } from './bench.js';
import { exited, startBenchChild } from './child-process.js';
import {
  heapGrowth,
  summarizeSnapshotFile,
  type HeapGrowth,
  type HeapSummary,
} from './heap-snapshot.js';
import {
  SoakUsageError,
  divisorOf60,
  followLog,
  numberOption,
  openSoakBed,
  sleep,
  withTimeout,
} from './soak-bed.js';

export interface SoakOptions {
  minutes: number;
  scheduleSeconds: number;
  /** 0: no full refreshes. */
  fullRefreshMinutes: number;
  windowMinutes: number;
  /** Left out of the slopes; ended by the first heap snapshot. */
  warmUpMinutes: number;
  rowsPerResource: number;
  pageSize: number;
  faultRate: number;
  changeSeconds: number;
  /** PostgreSQL instead of a SQLite file (a schema of its own, dropped at the end). */
  postgresUrl?: string;
  /** The daemon keeps the audit chain; the soak verifies it once the daemon stopped. */
  audit: boolean;
  seed: number;
  json: boolean;
}

export interface SoakOutput {
  out(text: string): void;
  progress(text: string): void;
  soak?(results: SoakResults): void;
}

export const SOAK_USAGE = `Usage: npm run bench -- soak [options]
  --minutes N               how long the daemon runs (default 60; fractions allowed)
  --schedule-seconds N      seconds between scheduled syncs, a divisor of 60 (default 10)
  --full-refresh-minutes N  minutes between full refreshes, a divisor of 60; 0 for none (default 5)
  --window-minutes N        window of the memory minimums (default 5; fractions allowed)
  --warm-up-minutes N       first minutes, left out of the slopes and ended by the first heap
                            snapshot: V8 compiles and optimizes code for the first few dozen
                            runs (default 10, or a quarter of --minutes when that is less)
  --rows N                  rows per resource of the fake team (default 200)
  --page-size N             page size of the daemon (default 100)
  --fault-rate P            share of requests the server answers with a fault (default 0.05)
  --change-seconds N        seconds between two rounds of changes on the server (default 10)
  --postgres URL            a PostgreSQL warehouse (a schema of its own) instead of SQLite
  --audit                   the daemon keeps the audit chain (OCS_AUDIT), verified at the end
  --seed N                  seed of the fake team and its faults (default 28)
  --json                    print the results as JSON

npm run bench -- soak --chaos --help: the daemon killed and restarted at random moments while
the server misbehaves, then the warehouse compared with the server`;

const soakNumber = (
  text: string | undefined,
  flag: string,
  fallback: number,
  check: (value: number) => boolean,
  what: string,
) => numberOption(text, flag, fallback, check, what, SOAK_USAGE);

export function parseSoakArgs(argv: string[]): SoakOptions {
  const values = parseModeFlags(
    argv,
    [
      'minutes',
      'schedule-seconds',
      'full-refresh-minutes',
      'window-minutes',
      'warm-up-minutes',
      'rows',
      'page-size',
      'fault-rate',
      'change-seconds',
      'postgres',
      'seed',
    ],
    SOAK_USAGE,
    (message) => new SoakUsageError(message),
    ['audit'],
  );
  const positive = (value: number) => value > 0;
  const integer = (value: number) => Number.isSafeInteger(value) && value > 0;
  const minutes = soakNumber(values.minutes, '--minutes', 60, positive, 'a positive number');
  const options: SoakOptions = {
    minutes,
    scheduleSeconds: soakNumber(
      values['schedule-seconds'],
      '--schedule-seconds',
      10,
      divisorOf60,
      'a divisor of 60',
    ),
    fullRefreshMinutes: soakNumber(
      values['full-refresh-minutes'],
      '--full-refresh-minutes',
      5,
      (value) => value === 0 || divisorOf60(value),
      'a divisor of 60, or 0',
    ),
    windowMinutes: soakNumber(
      values['window-minutes'],
      '--window-minutes',
      5,
      positive,
      'a positive number',
    ),
    warmUpMinutes: soakNumber(
      values['warm-up-minutes'],
      '--warm-up-minutes',
      Math.min(10, minutes / 4),
      positive,
      'a positive number',
    ),
    rowsPerResource: soakNumber(values.rows, '--rows', 200, integer, 'a positive integer'),
    pageSize: soakNumber(
      values['page-size'],
      '--page-size',
      100,
      (value) => integer(value) && value <= 1000,
      'an integer from 1 to 1000',
    ),
    faultRate: soakNumber(
      values['fault-rate'],
      '--fault-rate',
      0.05,
      (value) => value >= 0 && value < 1,
      'a share from 0 to below 1',
    ),
    changeSeconds: soakNumber(
      values['change-seconds'],
      '--change-seconds',
      10,
      positive,
      'a positive number',
    ),
    postgresUrl: values.postgres,
    audit: values.audit === true,
    seed: soakNumber(
      values.seed,
      '--seed',
      28,
      (value) => Number.isSafeInteger(value),
      'an integer',
    ),
    json: values.json,
  };
  if (options.warmUpMinutes + options.windowMinutes > options.minutes) {
    throw new SoakUsageError(
      `--warm-up-minutes (${options.warmUpMinutes}) and one --window-minutes (${options.windowMinutes}) ` +
        `must fit in --minutes (${options.minutes}).`,
    );
  }
  return options;
}

// ---------------------------------------------------------------------------------------------
// What /metrics says.

export interface MetricsSample {
  /** Milliseconds since the daemon started. */
  at: number;
  rssBytes: number;
  heapUsedBytes: number;
  running: boolean;
  /** Runs ended, by `kind/status`. */
  runs: Record<string, number>;
  skippedTicks: number;
  /** Major (mark-compact) garbage collections so far: right after one, heap used is what lives. */
  majorGcs: number;
}

/** The few values the soak follows, from the daemon's Prometheus text. */
export function readMetrics(text: string, at: number): MetricsSample {
  const sample: MetricsSample = {
    at,
    rssBytes: 0,
    heapUsedBytes: 0,
    running: false,
    runs: {},
    skippedTicks: 0,
    majorGcs: 0,
  };
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match) continue;
    const [, name, labels = '', valueText] = match;
    const value = Number(valueText);
    const label = (key: string) => new RegExp(`${key}="([^"]*)"`).exec(labels)?.[1] ?? '';
    switch (name) {
      case 'process_resident_memory_bytes':
        sample.rssBytes = value;
        break;
      case 'nodejs_heap_size_used_bytes':
        sample.heapUsedBytes = value;
        break;
      case 'ocs_sync_run_in_progress':
        sample.running = value > 0;
        break;
      case 'ocs_sync_runs_total':
        sample.runs[`${label('kind')}/${label('status')}`] = value;
        break;
      case 'ocs_sync_skipped_ticks_total':
        sample.skippedTicks += value;
        break;
      case 'nodejs_gc_duration_seconds_count':
        if (label('kind') === 'major') sample.majorGcs = value;
        break;
    }
  }
  return sample;
}

function runsEnded(sample: MetricsSample): number {
  return Object.values(sample.runs).reduce((sum, count) => sum + count, 0);
}

// ---------------------------------------------------------------------------------------------
// Pure: windows, minimums, slopes.

export interface SoakWindow {
  startMinutes: number;
  endMinutes: number;
  rssMinMb: number;
  heapUsedMinMb: number;
  /** Runs that ended in the window. */
  runs: number;
  /** Major garbage collections in the window (none: its heap-used minimum still holds garbage). */
  majorGcs: number;
}

const MB = 1024 * 1024;

/**
 * The minimums of the warm-up (before `from`, in ms since the start) and of each complete window
 * of `windowMs` after it (a last, shorter one is left out).
 */
export function memoryWindows(
  samples: MetricsSample[],
  windowMs: number,
  from: number,
): { warmUp: SoakWindow | undefined; windows: SoakWindow[] } {
  const end = samples.at(-1)?.at ?? 0;
  let before = { runs: 0, majorGcs: 0 };
  const window = (start: number, until: number): SoakWindow | undefined => {
    const inside = samples.filter((sample) => sample.at >= start && sample.at < until);
    if (inside.length === 0) return undefined;
    const last = inside.at(-1)!;
    const after = { runs: runsEnded(last), majorGcs: last.majorGcs };
    const counts = { runs: after.runs - before.runs, majorGcs: after.majorGcs - before.majorGcs };
    before = after;
    return {
      startMinutes: start / 60_000,
      endMinutes: until / 60_000,
      rssMinMb: Math.min(...inside.map((sample) => sample.rssBytes)) / MB,
      heapUsedMinMb: Math.min(...inside.map((sample) => sample.heapUsedBytes)) / MB,
      ...counts,
    };
  };
  const warmUp = window(0, from);
  const windows: SoakWindow[] = [];
  for (let start = from; start + windowMs <= end; start += windowMs) {
    const measured = window(start, start + windowMs);
    if (measured) windows.push(measured);
  }
  return { warmUp, windows };
}

/** Least-squares slope of `values` over `minutes`, in units per hour; undefined below 2 points. */
export function slopePerHour(minutes: number[], values: number[]): number | undefined {
  const count = minutes.length;
  if (count < 2) return undefined;
  const meanX = minutes.reduce((sum, x) => sum + x, 0) / count;
  const meanY = values.reduce((sum, y) => sum + y, 0) / count;
  let covariance = 0;
  let variance = 0;
  for (let index = 0; index < count; index += 1) {
    covariance += (minutes[index]! - meanX) * (values[index]! - meanY);
    variance += (minutes[index]! - meanX) ** 2;
  }
  return variance === 0 ? undefined : (covariance / variance) * 60;
}

// ---------------------------------------------------------------------------------------------

export interface SoakSnapshot {
  atMinutes: number;
  /** Runs ended when it was taken. */
  runs: number;
  /** Everything the snapshot holds: the daemon's live heap at that moment. */
  liveMb: number;
  /** The same without V8's own groups (its compiled code, and its maps): the program's objects. */
  programMb: number;
}

export interface SoakResults {
  options: Omit<SoakOptions, 'postgresUrl' | 'json'> & { warehouse: 'SQLite' | 'PostgreSQL' };
  node: string;
  durationMinutes: number;
  /** Runs ended, by `kind/status` (e.g. `incremental/ok`). */
  runs: Record<string, number>;
  skippedTicks: number;
  /** Rounds of changes the server made. */
  changes: number;
  /**
   * The first minutes: the first sync, code compiled and optimized, caches filled, and the first
   * heap snapshot (which leaves RSS higher once, by the native memory it took). Left out of the
   * slopes.
   */
  warmUp: SoakWindow | undefined;
  windows: SoakWindow[];
  /** Slopes of the windows' minimums after the warm-up. */
  rssSlopeMbPerHour: number | undefined;
  heapUsedSlopeMbPerHour: number | undefined;
  snapshots: { first: SoakSnapshot; second: SoakSnapshot; grown: HeapGrowth[] } | undefined;
  /** Why the snapshots are missing, when they are. */
  snapshotProblem?: string;
  logLines: { warn: number; error: number };
  /** The first few error lines of the daemon's log. */
  errors: string[];
  exitCode: number | null;
  /** With --audit: `audit verify` over the warehouse the daemon left (it throws when broken). */
  auditVerified?: { entries: number; versions: number };
}

/** The first file in `directory` not among `existing`, waiting for it up to `timeoutMs`. */
async function newFileIn(
  directory: string,
  existing: ReadonlySet<string>,
  timeoutMs: number,
): Promise<string> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const added = readdirSync(directory).find((name) => !existing.has(name));
    if (added) return join(directory, added);
    await sleep(20);
  }
  throw new Error(`No heap snapshot appeared in ${directory} within ${timeoutMs / 1000} s.`);
}

export async function runSoak(options: SoakOptions, output: SoakOutput): Promise<SoakResults> {
  const bed = await openSoakBed(options, 'soak');
  const { directory, warehouse, env, serverRequest } = bed;
  const snapshotDirectory = join(directory, 'snapshots');
  mkdirSync(snapshotDirectory);
  let daemon: ReturnType<typeof startBenchChild> | undefined;
  try {
    const startedAt = performance.now();
    daemon = startBenchChild('daemon-process', {
      args: ['daemon'],
      env,
      stderr: 'pipe',
      nodeOptions: ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDirectory}`],
    });
    const running = daemon;
    const exit = new Promise<number | null>((resolve) => running.once('exit', resolve));
    const log = followLog(running.stderr!, join(directory, 'daemon.log'));
    const healthUrl = await withTimeout(
      Promise.race([
        log.healthUrl,
        exit.then((code) => {
          throw new Error(`The daemon exited (code ${code}) before serving /metrics.`);
        }),
      ]),
      60_000,
      "the daemon's health server",
    );
    output.progress(`soak: the daemon serves ${healthUrl}/metrics; running ${options.minutes} min`);

    const samples: MetricsSample[] = [];
    const scrape = async (): Promise<MetricsSample> => {
      for (let attempt = 1; ; attempt += 1) {
        try {
          const response = await fetch(`${healthUrl}/metrics`);
          const sample = readMetrics(await response.text(), performance.now() - startedAt);
          samples.push(sample);
          return sample;
        } catch (error) {
          // After a heap snapshot held the daemon's loop, its server may close the kept-alive
          // connection the request went out on.
          if (attempt === 3) throw error;
          await sleep(200);
        }
      }
    };
    const windowMs = options.windowMinutes * 60_000;
    const snapshotPaths: Array<{ path: string; sample: MetricsSample }> = [];
    let snapshotProblem: string | undefined;
    const takeSnapshot = async (): Promise<void> => {
      // Between runs: asked for when no run is in progress, and kept only when no run started
      // between that moment and the end of the snapshot (a run may start right after it).
      const deadline = performance.now() + Math.max(120_000, 6 * options.scheduleSeconds * 1000);
      while (performance.now() < deadline) {
        const askedAt = Date.now();
        const before = await scrape();
        if (before.running) {
          await sleep(100);
          continue;
        }
        const existing = new Set(readdirSync(snapshotDirectory));
        process.kill(running.pid!, 'SIGUSR2');
        const file = await newFileIn(snapshotDirectory, existing, 60_000);
        // The daemon writes it on its main thread: /metrics answers again once it is complete,
        // and the log lines of a run that started before it are in the pipe by then.
        const after = await scrape();
        await sleep(100);
        const writtenAt = statSync(file).mtimeMs;
        const startedMeanwhile = log.runStarts.some((at) => at >= askedAt && at <= writtenAt);
        if (!startedMeanwhile && runsEnded(after) === runsEnded(before)) {
          snapshotPaths.push({ path: file, sample: after });
          return;
        }
        rmSync(file, { force: true });
      }
      throw new Error('No moment between two runs was found for a heap snapshot.');
    };

    const elapsed = () => performance.now() - startedAt;
    // Warm-up: the first window, ended by the first heap snapshot; then whole windows to the end.
    const watch = async (from: number, until: number, report: boolean) => {
      let windowStart = from;
      let windowStartRuns = runsEnded(samples.at(-1) ?? (await scrape()));
      while (elapsed() < until) {
        const sample = await scrape();
        if (report && sample.at - windowStart >= windowMs) {
          output.progress(
            `  ${(sample.at / 60_000).toFixed(1)} min: ${runsEnded(sample) - windowStartRuns} runs ended in the window, RSS ${(sample.rssBytes / MB).toFixed(1)} MB, heap used ${(sample.heapUsedBytes / MB).toFixed(1)} MB`,
          );
          windowStart += windowMs;
          windowStartRuns = runsEnded(sample);
        }
        await sleep(1000);
      }
    };
    const warmUpMs = options.warmUpMinutes * 60_000;
    await watch(0, warmUpMs, false);
    await takeSnapshot().catch((error: unknown) => (snapshotProblem = String(error)));
    const from = snapshotPaths[0]?.sample.at ?? warmUpMs;
    output.progress(`  ${(from / 60_000).toFixed(1)} min: warm-up over, first heap snapshot taken`);
    const windows = Math.max(1, Math.round((options.minutes * 60_000 - from) / windowMs));
    await watch(from, from + windows * windowMs + 500, true);
    if (snapshotPaths.length === 1) {
      await takeSnapshot().catch((error: unknown) => (snapshotProblem = String(error)));
    }
    const last = await scrape();
    const changes = await serverRequest<number>({ type: 'changes' });

    process.kill(running.pid!, 'SIGTERM');
    const exitCode = await withTimeout(exit, 30_000, 'the daemon to stop').catch(() => {
      running.kill('SIGKILL');
      return null;
    });

    let auditVerified: SoakResults['auditVerified'];
    if (options.audit) {
      output.progress('soak: audit verify over the warehouse the daemon left ...');
      const verified = await runStageProcess({ kind: 'verify', warehouse });
      auditVerified = { entries: verified.pages, versions: verified.rows };
    }

    let snapshots: SoakResults['snapshots'];
    if (snapshotPaths.length === 2) {
      output.progress('soak: comparing the two heap snapshots ...');
      const [first, second] = snapshotPaths as [
        (typeof snapshotPaths)[0],
        (typeof snapshotPaths)[0],
      ];
      const runsBetween = runsEnded(second.sample) - runsEnded(first.sample);
      const before = summarizeSnapshotFile(first.path);
      const after = summarizeSnapshotFile(second.path);
      const bytesOf = (summary: HeapSummary, include: (group: string) => boolean) =>
        [...summary].reduce((sum, [group, { bytes }]) => sum + (include(group) ? bytes : 0), 0);
      const describe = (sample: MetricsSample, summary: HeapSummary): SoakSnapshot => ({
        atMinutes: sample.at / 60_000,
        runs: runsEnded(sample),
        liveMb: bytesOf(summary, () => true) / MB,
        programMb: bytesOf(summary, (group) => !V8_GROUPS.has(group)) / MB,
      });
      snapshots = {
        first: describe(first.sample, before),
        second: describe(second.sample, after),
        grown: heapGrowth(before, after, runsBetween),
      };
    } else {
      snapshotProblem ??= 'The soak ended before the second heap snapshot.';
    }

    const { warmUp, windows: measured } = memoryWindows(samples, windowMs, from);
    const results: SoakResults = {
      options: {
        minutes: options.minutes,
        scheduleSeconds: options.scheduleSeconds,
        fullRefreshMinutes: options.fullRefreshMinutes,
        windowMinutes: options.windowMinutes,
        warmUpMinutes: options.warmUpMinutes,
        rowsPerResource: options.rowsPerResource,
        pageSize: options.pageSize,
        faultRate: options.faultRate,
        changeSeconds: options.changeSeconds,
        seed: options.seed,
        audit: options.audit,
        warehouse: options.postgresUrl ? 'PostgreSQL' : 'SQLite',
      },
      node: process.version,
      durationMinutes: last.at / 60_000,
      runs: last.runs,
      skippedTicks: last.skippedTicks,
      changes,
      warmUp,
      windows: measured,
      rssSlopeMbPerHour: slopePerHour(
        measured.map((window) => (window.startMinutes + window.endMinutes) / 2),
        measured.map((window) => window.rssMinMb),
      ),
      heapUsedSlopeMbPerHour: slopePerHour(
        measured.map((window) => (window.startMinutes + window.endMinutes) / 2),
        measured.map((window) => window.heapUsedMinMb),
      ),
      snapshots,
      ...(snapshotProblem ? { snapshotProblem } : {}),
      logLines: log.counts,
      errors: log.errors,
      exitCode,
      ...(auditVerified ? { auditVerified } : {}),
    };
    return results;
  } finally {
    if (daemon && daemon.exitCode === null && daemon.signalCode === null) {
      daemon.kill('SIGKILL');
      await exited(daemon);
    }
    await bed.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The report.

/** Objects added per run from which a group counts as growing with the runs. */
export const GROWS_WITH_RUNS = 1;
/** Groups of V8's own, not of the program: compiled code, and maps and feedback ("system"). */
const V8_GROUPS = new Set(['(compiled code)', '(system)']);
const GROUPS_SHOWN = 12;

function signed(value: number | undefined, digits: number): string {
  if (value === undefined) return 'n/a';
  return `${value >= 0 ? '+' : ''}${value.toFixed(digits)}`;
}

export function formatSoakReport(results: SoakResults): string {
  const { options } = results;
  const lines: string[] = [];
  lines.push(
    `ocs-sync soak: \`ocs-sync daemon\` for ${results.durationMinutes.toFixed(1)} min (Node ${results.node}), ` +
      `a sync every ${options.scheduleSeconds} s, ` +
      (options.fullRefreshMinutes > 0
        ? `a full refresh every ${options.fullRefreshMinutes} min`
        : 'no full refreshes') +
      `, ${options.warehouse}${options.audit ? ' with the audit chain' : ''}; fake server in its own process: ${options.rowsPerResource} rows per resource, ` +
      `${(options.faultRate * 100).toFixed(1)}% of requests faulty, rows changed every ${options.changeSeconds} s (${results.changes} rounds), page size ${options.pageSize}`,
  );
  lines.push('');
  const byStatus = (status: string) =>
    Object.entries(results.runs)
      .filter(([key]) => key.endsWith(`/${status}`))
      .reduce((sum, [, count]) => sum + count, 0);
  const fullRefreshes = Object.entries(results.runs)
    .filter(([key]) => key.startsWith('full_refresh/'))
    .reduce((sum, [, count]) => sum + count, 0);
  lines.push(
    `runs: ${byStatus('ok')} ok, ${byStatus('partial')} partial, ${byStatus('failed')} failed, ` +
      `${byStatus('interrupted')} interrupted (${fullRefreshes} of them full refreshes); ` +
      `${results.skippedTicks} ticks skipped; daemon log: ${results.logLines.warn} warnings (retries), ` +
      `${results.logLines.error} errors; exit code ${results.exitCode ?? 'none (killed)'}`,
  );
  for (const error of results.errors) lines.push(`  error: ${error}`);
  if (results.auditVerified) {
    lines.push(
      `audit verify after the soak: intact, ${results.auditVerified.entries} entries, ${results.auditVerified.versions} versions`,
    );
  }
  lines.push('');
  lines.push(`minimums per ${options.windowMinutes}-minute window, after the warm-up:`);
  lines.push('window (min)        | runs | major GCs | RSS min MB | heap used min MB');
  lines.push('--------------------|------|-----------|------------|-----------------');
  const row = (label: string, window: SoakWindow) =>
    lines.push(
      `${label.padEnd(19)} | ${String(window.runs).padStart(4)} | ${String(window.majorGcs).padStart(9)} | ${window.rssMinMb.toFixed(1).padStart(10)} | ${window.heapUsedMinMb.toFixed(1).padStart(16)}`,
    );
  const span = (window: SoakWindow) =>
    `${window.startMinutes.toFixed(1)}-${window.endMinutes.toFixed(1)}`;
  if (results.warmUp) row(`${span(results.warmUp)} (warm-up)`, results.warmUp);
  for (const window of results.windows) row(span(window), window);
  lines.push(
    `slope of the minimums after the warm-up: ` +
      `RSS ${signed(results.rssSlopeMbPerHour, 2)} MB/h, heap used ${signed(results.heapUsedSlopeMbPerHour, 2)} MB/h ` +
      `(goal: heap used under 1 MB/h)`,
  );
  lines.push('');
  const { snapshots } = results;
  if (!snapshots) {
    lines.push(`heap snapshots: none (${results.snapshotProblem ?? 'not taken'})`);
    return lines.join('\n');
  }
  const runsBetween = snapshots.second.runs - snapshots.first.runs;
  const change = (before: number, after: number) => {
    const kb = (after - before) * 1024;
    const perRun = runsBetween > 0 ? (kb * 1024) / runsBetween : undefined;
    return `${before.toFixed(2)} MB -> ${after.toFixed(2)} MB (${signed(kb, 1)} KB, ${signed(perRun, 0)} bytes per run)`;
  };
  lines.push(
    `heap snapshots between runs: at ${snapshots.first.atMinutes.toFixed(1)} min (after run ${snapshots.first.runs}) ` +
      `and at ${snapshots.second.atMinutes.toFixed(1)} min (after run ${snapshots.second.runs}), ${runsBetween} runs apart`,
  );
  lines.push(`live heap: ${change(snapshots.first.liveMb, snapshots.second.liveMb)}`);
  lines.push(
    `the program's objects (the live heap but V8's compiled code and maps): ${change(snapshots.first.programMb, snapshots.second.programMb)}`,
  );
  const growing = snapshots.grown.filter(
    (growth) => growth.countPerRun >= GROWS_WITH_RUNS && !V8_GROUPS.has(growth.group),
  );
  lines.push(
    growing.length === 0
      ? `no group of the program's objects grew by ${GROWS_WITH_RUNS} or more objects per run`
      : `${growing.length} group(s) of the program's objects grew by ${GROWS_WITH_RUNS} or more objects per run: ${growing.map((growth) => growth.group).join(', ')}`,
  );
  const engine = snapshots.grown.filter((growth) => V8_GROUPS.has(growth.group));
  if (engine.length > 0) {
    lines.push(
      `V8's own: ${engine
        .map(
          (growth) =>
            `${growth.group} ${signed(growth.countPerRun, 2)} objects and ${signed((growth.after.bytes - growth.before.bytes) / runsBetween, 0)} bytes per run`,
        )
        .join(', ')} (code it compiles and optimizes, and its maps)`,
    );
  }
  const shown = snapshots.grown.slice(0, GROUPS_SHOWN);
  if (shown.length > 0) {
    lines.push(
      `groups that grew, most bytes first (top ${shown.length} of ${snapshots.grown.length}):`,
    );
    lines.push(
      'group                                    |  count before |  count after | per run |  KB before |  KB after',
    );
    lines.push(
      '-----------------------------------------|---------------|--------------|---------|------------|----------',
    );
    for (const growth of shown) {
      lines.push(
        `${growth.group.slice(0, 40).padEnd(40)} | ${String(growth.before.count).padStart(13)} | ${String(growth.after.count).padStart(12)} | ${growth.countPerRun.toFixed(2).padStart(7)} | ${(growth.before.bytes / 1024).toFixed(1).padStart(10)} | ${(growth.after.bytes / 1024).toFixed(1).padStart(9)}`,
      );
    }
  }
  return lines.join('\n');
}

/** `npm run bench -- soak …`: parses, runs, prints; the exit code (0 ran, 1 failed, 2 usage). */
export function soakMain(argv: string[], output: SoakOutput): Promise<number> {
  return runBenchMode(
    {
      name: 'soak',
      parse: parseSoakArgs,
      usageError: SoakUsageError,
      run: (options) => runSoak(options, output),
      format: formatSoakReport,
    },
    argv,
    { out: output.out, progress: output.progress, results: output.soak },
  );
}
