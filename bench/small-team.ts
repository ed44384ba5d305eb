/**
 * `npm run bench -- small`: a small team's runs (issue 47, point 1): pay for the requests, not
 * for the machinery.
 *
 * The sample team (every resource, a few rows each, sealed fields) on a fake server in its own
 * process, no added latency. Each round, back to back so that machine noise hits them alike:
 *
 * - the libraries' floor: a fresh `node` that loads undici, better-sqlite3, kysely and pino, and
 *   exits (its wall time);
 * - a first sync (`bin/ocs-sync.js sync`, a fresh process, into a fresh SQLite file), then an
 *   unchanged one: each one's wall time, and the requests it made, replayed by a plain keep-alive
 *   client (replay-process.ts): each run's floor is the libraries' floor + its replay.
 *
 * Then a daemon on that warehouse, a run every 2 seconds, nothing changing: the CPU it uses a run
 * (from /proc, so Linux only), over `--daemon-runs` runs after its first; also over their later
 * half (V8 compiles what runs call more often on its helper threads for the first tens of runs)
 * and on the main thread alone.
 *
 * Goals: unchanged run ≤ 1.5 × its floor, first sync ≤ 2.5 × its floor, daemon ≤ 30 ms of CPU a
 * run. The medians of the rounds count.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BenchUsageError, positiveInteger, type BenchOutput } from './bench.js';
import { DEFAULT_BENCH_SEED } from './bench-dataset.js';
import { parseModeFlags, runBenchMode } from './bench-mode.js';
import { ask, exited, startBenchChild } from './child-process.js';
import type { LoggedRequest, ServerRequest, ServerStarted } from './fake-server-process.js';
import type { ReplayRequest, ReplayResult } from './replay-process.js';
import { table } from './report.js';
import { launcher } from './startup.js';

export const SMALL_TEAM_GOALS = { unchanged: 1.5, first: 2.5, daemonCpuMs: 30 } as const;

/** What issue 47 measured before (demo-sized team, 61 resources; Node 20). */
export const SMALL_TEAM_ISSUE_FIGURES = {
  unchanged: '0.64 s against 0.013 s + 0.15 s (3.9×)',
  daemonCpuMs: 'two threads started a run (about 0.5 s of CPU each)',
} as const;

export interface SmallTeamOptions {
  rowsPerResource: number;
  rounds: number;
  /** Daemon runs measured after its first (0 skips the daemon). */
  daemonRuns: number;
  seed: number;
  json: boolean;
}

/** One run of `ocs-sync sync` and its floor. */
export interface MeasuredRun {
  seconds: number;
  requests: number;
  replaySeconds: number;
  /** The libraries' floor of its round + its replay. */
  floorSeconds: number;
}

export interface SmallTeamRound {
  librariesSeconds: number;
  first: MeasuredRun;
  unchanged: MeasuredRun;
}

export interface SmallTeamResults {
  node: string;
  rowsPerResource: number;
  rounds: SmallTeamRound[];
  /** Medians over the rounds of each run / its floor. */
  ratio: { first: number; unchanged: number };
  median: { librariesSeconds: number; first: MeasuredRun; unchanged: MeasuredRun };
  /**
   * CPU milliseconds a daemon run (undefined: not measured, or no /proc): over every measured run;
   * over the later half (V8 has optimized what the runs call by then); the main thread's share.
   */
  daemon?: {
    runs: number;
    cpuMsPerRun: number;
    laterHalfMsPerRun: number;
    mainThreadMsPerRun: number;
  };
  ok: { first: boolean; unchanged: boolean; daemon?: boolean };
}

const USAGE = `Usage: npm run bench -- small [options]
  --rows N         rows of each resource of the sample team (default 3)
  --rounds N       rounds of: the libraries' floor, a first sync, an unchanged sync, with their
                   requests replayed (default 5; the medians count)
  --daemon-runs N  unchanged daemon runs measured for their CPU (default 10; 0 skips the daemon)
  --seed N         dataset seed (default ${DEFAULT_BENCH_SEED})
  --json           print the results as JSON`;

export function parseSmallTeamArgs(argv: string[]): SmallTeamOptions {
  const values = parseModeFlags(
    argv,
    ['rows', 'rounds', 'daemon-runs', 'seed'] as const,
    USAGE,
    (message) => new BenchUsageError(message),
  );
  return {
    rowsPerResource: positiveInteger(values.rows, '--rows', 3),
    rounds: positiveInteger(values.rounds, '--rounds', 5),
    daemonRuns: positiveInteger(values['daemon-runs'], '--daemon-runs', 10, true),
    seed: positiveInteger(values.seed, '--seed', DEFAULT_BENCH_SEED, true),
    json: values.json,
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Runs node with `args`; its wall time. */
export function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let stderr = '';
    const child = spawn(process.execPath, args, { env, cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const seconds = (performance.now() - started) / 1000;
      if (code === 0) resolve(seconds);
      else
        reject(new Error(`node ${args.join(' ')} exited ${String(code)}: ${stderr.slice(-2000)}`));
    });
  });
}

/**
 * CPU seconds (user + system) a process has used, from /proc; undefined elsewhere. `thread`: of
 * that thread only (the process's own id: its main thread).
 */
export function cpuSecondsOf(
  pid: number,
  ticksPerSecond: number,
  thread?: number,
): number | undefined {
  const file = thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`;
  if (!existsSync(file)) return undefined;
  // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
  const fields = readFileSync(file, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

export function clockTicks(): number {
  const answer = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const ticks = Number(answer.stdout?.trim());
  return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
}

/**
 * A daemon on the warehouse, a run every 2 s: the CPU it used between the end of its first run
 * and the end of run `runs + 1`, a run.
 */
async function daemonCpuPerRun(
  bin: string,
  env: NodeJS.ProcessEnv,
  cwd: string,
  runs: number,
): Promise<SmallTeamResults['daemon']> {
  const ticks = clockTicks();
  const child: ChildProcess = spawn(process.execPath, [bin, 'daemon'], {
    env: {
      ...env,
      OCS_SCHEDULE: '*/2 * * * * *',
      OCS_FULL_REFRESH_SCHEDULE: 'off',
      OCS_HEALTH_LISTEN: 'off',
      OCS_LOG_FORMAT: 'json',
      OCS_LOG_LEVEL: 'info',
    },
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    const ends: Array<{ cpu: number; main: number }> = [];
    await new Promise<void>((resolve, reject) => {
      let pending = '';
      const onData = (chunk: Buffer) => {
        pending += chunk.toString();
        const lines = pending.split('\n');
        pending = lines.pop()!;
        for (const line of lines) {
          let entry: { msg?: unknown; runId?: unknown };
          try {
            entry = JSON.parse(line) as typeof entry;
          } catch {
            continue;
          }
          if (typeof entry.msg !== 'string' || !entry.msg.startsWith('Sync ')) continue;
          if (entry.runId === undefined) continue;
          const cpu = cpuSecondsOf(child.pid!, ticks);
          const main = cpuSecondsOf(child.pid!, ticks, child.pid!);
          if (cpu === undefined || main === undefined) {
            resolve();
            return;
          }
          ends.push({ cpu, main });
          if (ends.length > runs) resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => reject(new Error(`The daemon exited (${String(code)}).`)));
    });
    if (ends.length <= runs) return undefined;
    const perRun = (from: number, pick: 'cpu' | 'main') =>
      ((ends[runs]![pick] - ends[from]![pick]) / (runs - from)) * 1000;
    return {
      runs,
      cpuMsPerRun: perRun(0, 'cpu'),
      laterHalfMsPerRun: perRun(Math.floor(runs / 2), 'cpu'),
      mainThreadMsPerRun: perRun(0, 'main'),
    };
  } finally {
    child.kill('SIGTERM');
    await exited(child);
  }
}

export async function runSmallTeam(
  options: SmallTeamOptions,
  progress: (text: string) => void = () => undefined,
): Promise<SmallTeamResults> {
  const bin = launcher();
  const root = dirname(dirname(bin));
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-small-'));
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const keyFile = join(directory, 'private-key.pem');
  writeFileSync(keyFile, privateKey, { mode: 0o600 });
  const server = startBenchChild('fake-server-process');
  const replayer = startBenchChild('replay-process');
  const request = <T>(message: ServerRequest) => ask<T>(server, message);
  try {
    const started = await request<ServerStarted>({
      type: 'start',
      rows: 0,
      seed: options.seed,
      pageLatencyMs: 0,
      sample: {
        rowCounts: {},
        teamPublicKeyPem: publicKey,
        rowsPerResource: options.rowsPerResource,
      },
    });
    const baseEnv: NodeJS.ProcessEnv = {
      // Only this benchmark's settings: none of this shell's OCS_* variables.
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('OCS_'))),
      OCS_BASE_URL: started.url,
      OCS_API_KEY: started.apiKey,
      OCS_PRIVATE_KEY_FILE: keyFile,
      OCS_LOG_LEVEL: 'warn',
    };
    const libraries = [
      '--input-type=module',
      '-e',
      "await import('undici'); await import('better-sqlite3'); await import('kysely'); await import('pino');",
    ];
    /** A sync of `warehouse` and its requests' replay. */
    const measureSync = async (env: NodeJS.ProcessEnv, librariesSeconds: number) => {
      await request<LoggedRequest[]>({ type: 'request-log' });
      const seconds = await run([bin, 'sync'], env, directory);
      const requests = await request<LoggedRequest[]>({ type: 'request-log' });
      const replay = await ask<ReplayResult>(replayer, {
        url: started.url,
        apiKey: started.apiKey,
        requests,
      } satisfies ReplayRequest);
      return {
        seconds,
        requests: requests.length,
        replaySeconds: replay.seconds,
        floorSeconds: librariesSeconds + replay.seconds,
      } satisfies MeasuredRun;
    };
    // One unmeasured round of each warms the file cache.
    await run(libraries, baseEnv, root);
    const rounds: SmallTeamRound[] = [];
    let env = baseEnv;
    for (let round = 0; round <= options.rounds; round++) {
      const database = join(directory, `round-${round}.db`);
      env = {
        ...baseEnv,
        OCS_WAREHOUSE_URL: database,
        OCS_FILES_DIR: join(directory, `files-${round}`),
      };
      const librariesSeconds = await run(libraries, baseEnv, root);
      const first = await measureSync(env, librariesSeconds);
      const unchanged = await measureSync(env, librariesSeconds);
      if (round === 0) continue;
      rounds.push({ librariesSeconds, first, unchanged });
      progress(
        `round ${round}: libraries ${librariesSeconds.toFixed(3)} s, first ${first.seconds.toFixed(3)} s (${first.requests} requests), unchanged ${unchanged.seconds.toFixed(3)} s (${unchanged.requests} requests)`,
      );
    }
    let daemon: SmallTeamResults['daemon'];
    if (options.daemonRuns > 0) {
      progress(`a daemon, ${options.daemonRuns + 1} unchanged runs ...`);
      daemon = await daemonCpuPerRun(bin, env, directory, options.daemonRuns);
    }
    const medianRun = (pick: (round: SmallTeamRound) => MeasuredRun): MeasuredRun => ({
      seconds: median(rounds.map((round) => pick(round).seconds)),
      requests: median(rounds.map((round) => pick(round).requests)),
      replaySeconds: median(rounds.map((round) => pick(round).replaySeconds)),
      floorSeconds: median(rounds.map((round) => pick(round).floorSeconds)),
    });
    const ratio = {
      first: median(rounds.map((round) => round.first.seconds / round.first.floorSeconds)),
      unchanged: median(
        rounds.map((round) => round.unchanged.seconds / round.unchanged.floorSeconds),
      ),
    };
    return {
      node: process.version,
      rowsPerResource: options.rowsPerResource,
      rounds,
      ratio,
      median: {
        librariesSeconds: median(rounds.map((round) => round.librariesSeconds)),
        first: medianRun((round) => round.first),
        unchanged: medianRun((round) => round.unchanged),
      },
      ...(daemon ? { daemon } : {}),
      ok: {
        first: ratio.first <= SMALL_TEAM_GOALS.first,
        unchanged: ratio.unchanged <= SMALL_TEAM_GOALS.unchanged,
        ...(daemon ? { daemon: daemon.cpuMsPerRun <= SMALL_TEAM_GOALS.daemonCpuMs } : {}),
      },
    };
  } finally {
    await request({ type: 'close' }).catch(() => undefined);
    if (replayer.connected) replayer.disconnect();
    await Promise.all([exited(server), exited(replayer)]);
    rmSync(directory, { recursive: true, force: true });
  }
}

export function formatSmallTeam(results: SmallTeamResults): string {
  const { median: figures, ratio, daemon, ok } = results;
  const verdict = (passed: boolean | undefined) =>
    passed === undefined ? '-' : passed ? 'ok' : 'MISSED';
  const runRow = (name: string, run: MeasuredRun, value: number, goal: number, passed: boolean) => [
    name,
    `${run.seconds.toFixed(3)} s`,
    `${figures.librariesSeconds.toFixed(3)} s + ${run.replaySeconds.toFixed(3)} s (${run.requests} requests)`,
    `${value.toFixed(2)}×`,
    `≤ ${goal}×`,
    verdict(passed),
  ];
  const rows = [
    runRow('first sync', figures.first, ratio.first, SMALL_TEAM_GOALS.first, ok.first),
    runRow(
      'unchanged sync',
      figures.unchanged,
      ratio.unchanged,
      SMALL_TEAM_GOALS.unchanged,
      ok.unchanged,
    ),
    [
      'daemon, unchanged run',
      daemon ? `${daemon.cpuMsPerRun.toFixed(1)} ms CPU` : 'not measured',
      daemon
        ? `a run of ${daemon.runs}; later half ${daemon.laterHalfMsPerRun.toFixed(1)} ms, main thread ${daemon.mainThreadMsPerRun.toFixed(1)} ms`
        : '',
      '',
      `< ${SMALL_TEAM_GOALS.daemonCpuMs} ms`,
      verdict(ok.daemon),
    ],
  ];
  return [
    `A small team (the sample team, ${results.rowsPerResource} rows a resource), ${results.rounds.length} rounds, node ${results.node}; medians.`,
    'Floor: a node that loads undici, better-sqlite3, kysely and pino + the run’s requests replayed by a keep-alive client.',
    '',
    ...table(['run', 'wall', 'floor: libraries + replay', 'ratio', 'goal', ''], rows, [
      false,
      true,
      false,
      true,
      false,
      false,
    ]),
    '',
    `Issue 47 measured: unchanged ${SMALL_TEAM_ISSUE_FIGURES.unchanged}; a daemon's run: ${SMALL_TEAM_ISSUE_FIGURES.daemonCpuMs}.`,
  ].join('\n');
}

export function smallTeamMain(
  argv: string[],
  output: Pick<BenchOutput, 'out' | 'progress'> & { small?(results: SmallTeamResults): void },
): Promise<number> {
  return runBenchMode(
    {
      name: 'small-team benchmark',
      parse: parseSmallTeamArgs,
      usageError: BenchUsageError,
      run: (options) => runSmallTeam(options, output.progress),
      format: formatSmallTeam,
      passed: (results) => Object.values(results.ok).every((passed) => passed !== false),
    },
    argv,
    { out: output.out, progress: output.progress, results: output.small },
  );
}
