/**
 * `npm run bench -- teams --small N` (issue 47, point 3): N small teams in one daemon, every team
 * on one schedule, so that one tick runs them all, `--teams-at-once` at a time.
 *
 * Each team is the sample team with a few rows a resource on a fake server of its own (all in one
 * child process, teams-servers-process.ts), with a budget no run comes near. `sync --team all`
 * fills every warehouse first; then the daemon starts (its first tick runs every team at start),
 * and its second tick, where nothing changed, is measured:
 *
 * - the CPU the daemon used from the end of its first tick to the end of its second (/proc, so
 *   Linux only), per team: goal < 30 ms, as for one team's daemon (small-team.ts);
 * - the tick's wall time (first run started to last run ended) against the sum of its requests'
 *   times (each team's requests replayed by a keep-alive client, replay-process.ts) over
 *   `teams_at_once`: what the tick would take if the teams cost only their requests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchUsageError, positiveInteger, type BenchOutput } from './bench.js';
import { DEFAULT_BENCH_SEED } from './bench-dataset.js';
import { parseModeFlags, runBenchMode } from './bench-mode.js';
import { ask, exited, startBenchChild } from './child-process.js';
import type { LoggedRequest } from './fake-server-process.js';
import type { ReplayRequest, ReplayResult } from './replay-process.js';
import { SMALL_TEAM_GOALS, clockTicks, cpuSecondsOf, run } from './small-team.js';
import { launcher } from './startup.js';
import type {
  TeamServerSpec,
  TeamServersRequest,
  TeamServersStarted,
} from './teams-servers-process.js';

export interface SmallTeamsOptions {
  teams: number;
  teamsAtOnce: number;
  rowsPerResource: number;
  /** Seconds between the daemon's ticks (each team's `schedule`). */
  scheduleSeconds: number;
  seed: number;
  json: boolean;
}

export interface SmallTeamsResults {
  settings: SmallTeamsOptions & { node: string };
  /** The measured (second) tick. */
  tick: {
    seconds: number;
    runs: number;
    requests: number;
    /** Sum over the teams of their requests replayed one after another. */
    requestsSeconds: number;
    /** requestsSeconds / teams at once. */
    boundSeconds: number;
    ratio: number;
  };
  /** CPU milliseconds a team's unchanged run (undefined without /proc). */
  cpuMsPerTeamRun?: number;
  ok: { cpu?: boolean };
}

const USAGE = `Usage: npm run bench -- teams --small N [options]
  --small N            small teams in one daemon (each the sample team, a few rows a resource)
  --teams-at-once N    teams syncing together (default 4)
  --rows N             rows of each resource of each team (default 3)
  --schedule-seconds N seconds between the daemon's ticks (default 30; longer than a tick)
  --seed N             seed of the teams (default ${DEFAULT_BENCH_SEED})
  --json               print the results as JSON`;

export function parseSmallTeamsArgs(argv: string[]): SmallTeamsOptions {
  const values = parseModeFlags(
    argv,
    ['small', 'teams-at-once', 'rows', 'schedule-seconds', 'seed'] as const,
    USAGE,
    (message) => new BenchUsageError(message),
  );
  const teamsAtOnce = positiveInteger(values['teams-at-once'], '--teams-at-once', 4);
  if (teamsAtOnce > 64) throw new BenchUsageError('--teams-at-once goes from 1 to 64.');
  const scheduleSeconds = positiveInteger(values['schedule-seconds'], '--schedule-seconds', 30);
  if (scheduleSeconds > 59) throw new BenchUsageError('--schedule-seconds goes from 1 to 59.');
  return {
    teams: positiveInteger(values.small, '--small', 100),
    teamsAtOnce,
    rowsPerResource: positiveInteger(values.rows, '--rows', 3),
    scheduleSeconds,
    seed: positiveInteger(values.seed, '--seed', DEFAULT_BENCH_SEED, true),
    json: values.json,
  };
}

const teamName = (index: number) => `team-${String(index + 1).padStart(3, '0')}`;

/** The daemon's log, as far as ticks go: when each run started and ended, and its CPU then. */
class TickWatch {
  private readonly started: number[] = [];
  private readonly ended: Array<{ at: number; cpu: number | undefined }> = [];
  private waiting?: { count: number; resolve: () => void };

  constructor(
    private readonly pid: number,
    private readonly ticks: number,
  ) {}

  line(text: string): void {
    let entry: { msg?: unknown; runId?: unknown };
    try {
      entry = JSON.parse(text) as typeof entry;
    } catch {
      return;
    }
    if (typeof entry.msg !== 'string') return;
    if (entry.msg === 'Sync starting') this.started.push(performance.now());
    else if (entry.msg.startsWith('Sync ') && entry.runId !== undefined) {
      this.ended.push({ at: performance.now(), cpu: cpuSecondsOf(this.pid, this.ticks) });
      if (this.waiting && this.ended.length >= this.waiting.count) this.waiting.resolve();
    }
  }

  /** Resolves once `count` runs have ended. */
  endedRuns(count: number): Promise<void> {
    if (this.ended.length >= count) return Promise.resolve();
    return new Promise((resolve) => (this.waiting = { count, resolve }));
  }

  /** Wall seconds from the first start after run `after` ended to the end of run `to`. */
  span(after: number, to: number): number {
    const from = this.ended[after - 1]!.at;
    const first = this.started.find((at) => at > from)!;
    return (this.ended[to - 1]!.at - first) / 1000;
  }

  cpuBetween(after: number, to: number): number | undefined {
    const [from, until] = [this.ended[after - 1]!.cpu, this.ended[to - 1]!.cpu];
    return from === undefined || until === undefined ? undefined : until - from;
  }
}

export async function runSmallTeams(
  options: SmallTeamsOptions,
  progress: (text: string) => void,
): Promise<SmallTeamsResults> {
  const bin = launcher();
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-small-teams-'));
  const keys = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const keyFile = join(directory, 'private.pem');
  writeFileSync(keyFile, keys.privateKey, { mode: 0o600 });
  const servers = startBenchChild('teams-servers-process');
  const replayer = startBenchChild('replay-process');
  const request = <T>(message: TeamServersRequest) => ask<T>(servers, message);
  let daemon: ChildProcess | undefined;
  try {
    progress(`starting ${options.teams} fake servers ...`);
    const specs: TeamServerSpec[] = Array.from({ length: options.teams }, (_, index) => ({
      name: teamName(index),
      seed: options.seed + index,
      rowCounts: {},
      rowsPerResource: options.rowsPerResource,
    }));
    const started = await request<TeamServersStarted>({
      type: 'start',
      teams: specs,
      budget: { limit: 1_000_000, windowSeconds: 300 },
      faultRate: 0,
      pageLatencyMs: 0,
      teamPublicKeyPem: keys.publicKey,
    });
    const config = join(directory, 'teams.yaml');
    writeFileSync(
      config,
      [
        `teams_at_once: ${options.teamsAtOnce}`,
        `schedule: '*/${options.scheduleSeconds} * * * * *'`,
        'full_refresh_schedule: false',
        `private_key_file: ${keyFile}`,
        'teams:',
        ...specs.map((spec) =>
          [
            `  - name: ${spec.name}`,
            `    base_url: ${started.urls[spec.name]}`,
            '    api_key_env: OCS_BENCH_TEAMS_KEY',
            `    warehouse: { url: '${join(directory, `${spec.name}.db`)}' }`,
            `    files: { dir: '${join(directory, `${spec.name}-files`)}' }`,
          ].join('\n'),
        ),
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('OCS_'))),
      OCS_BENCH_TEAMS_KEY: started.apiKey,
      OCS_HEALTH_LISTEN: 'off',
      OCS_LOG_LEVEL: 'warn',
    };
    progress('sync --team all: every warehouse filled ...');
    await run([bin, '--config', config, 'sync', '--team', 'all'], env, directory);
    progress('the daemon: its first tick at start, then the measured one ...');
    daemon = spawn(process.execPath, [bin, '--config', config, 'daemon'], {
      env: { ...env, OCS_LOG_LEVEL: 'info', OCS_LOG_FORMAT: 'json' },
      cwd: directory,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const watch = new TickWatch(daemon.pid!, clockTicks());
    let pending = '';
    const onData = (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) watch.line(line);
    };
    daemon.stdout!.on('data', onData);
    daemon.stderr!.on('data', onData);
    const died = new Promise<never>((_, reject) =>
      daemon!.once('exit', (code) => reject(new Error(`The daemon exited (${String(code)}).`))),
    );
    died.catch(() => undefined);
    const teams = options.teams;
    await Promise.race([watch.endedRuns(teams), died]);
    await request<Record<string, LoggedRequest[]>>({ type: 'request-log' });
    await Promise.race([watch.endedRuns(2 * teams), died]);
    const logged = await request<Record<string, LoggedRequest[]>>({ type: 'request-log' });
    progress('replaying each team’s requests ...');
    let requestsSeconds = 0;
    let requests = 0;
    for (const spec of specs) {
      const replay = await ask<ReplayResult>(replayer, {
        url: started.urls[spec.name]!,
        apiKey: started.apiKey,
        requests: logged[spec.name] ?? [],
      } satisfies ReplayRequest);
      requestsSeconds += replay.seconds;
      requests += logged[spec.name]?.length ?? 0;
    }
    const seconds = watch.span(teams, 2 * teams);
    const cpu = watch.cpuBetween(teams, 2 * teams);
    const cpuMsPerTeamRun = cpu === undefined ? undefined : (cpu / teams) * 1000;
    const boundSeconds = requestsSeconds / options.teamsAtOnce;
    return {
      settings: { ...options, node: process.version },
      tick: {
        seconds,
        runs: teams,
        requests,
        requestsSeconds,
        boundSeconds,
        ratio: seconds / boundSeconds,
      },
      ...(cpuMsPerTeamRun === undefined ? {} : { cpuMsPerTeamRun }),
      ok: {
        ...(cpuMsPerTeamRun === undefined
          ? {}
          : { cpu: cpuMsPerTeamRun < SMALL_TEAM_GOALS.daemonCpuMs }),
      },
    };
  } finally {
    if (daemon) {
      daemon.kill('SIGTERM');
      await exited(daemon);
    }
    await request({ type: 'close' }).catch(() => undefined);
    servers.disconnect();
    if (replayer.connected) replayer.disconnect();
    await Promise.all([exited(servers), exited(replayer)]);
    rmSync(directory, { recursive: true, force: true });
  }
}

export function formatSmallTeams(results: SmallTeamsResults): string {
  const { settings, tick, cpuMsPerTeamRun, ok } = results;
  return [
    `${settings.teams} small teams (the sample team, ${settings.rowsPerResource} rows a resource) in one daemon, ${settings.teamsAtOnce} at once, a tick every ${settings.scheduleSeconds} s; node ${settings.node}. The daemon's second tick, nothing changed:`,
    `  CPU a team's unchanged run   ${cpuMsPerTeamRun === undefined ? 'not measured (no /proc)' : `${cpuMsPerTeamRun.toFixed(1)} ms`}  goal < ${SMALL_TEAM_GOALS.daemonCpuMs} ms  ${ok.cpu === undefined ? '' : ok.cpu ? 'met' : 'NOT MET'}`,
    `  tick wall / (its requests' times / teams at once)   ${tick.ratio.toFixed(2)}  (${tick.seconds.toFixed(2)} s / (${tick.requestsSeconds.toFixed(3)} s for ${tick.requests} requests replayed / ${settings.teamsAtOnce}) = ${tick.boundSeconds.toFixed(3)} s)`,
  ].join('\n');
}

export function smallTeamsMain(
  argv: string[],
  output: Pick<BenchOutput, 'out' | 'progress'> & { small?(results: SmallTeamsResults): void },
): Promise<number> {
  return runBenchMode(
    {
      name: 'small-teams benchmark',
      parse: parseSmallTeamsArgs,
      usageError: BenchUsageError,
      run: (options) => runSmallTeams(options, output.progress),
      format: formatSmallTeams,
      passed: (results) => results.ok.cpu !== false,
    },
    argv,
    { out: output.out, progress: output.progress, results: output.small },
  );
}
