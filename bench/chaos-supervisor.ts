/**
 * The chaos soak's supervisor (chaos.ts): starts `ocs-sync` as a process of its own, as pid 1 of a
 * PID namespace of its own when it can (`unshare --pid --fork --kill-child`, as a container runs
 * it: the same pid after every restart), follows its JSON log, and ends it as a platform does:
 * `kill -9`, or SIGTERM and, past a grace period, -9 (`docker stop`). Restarts wait a back-off
 * that doubles while processes die before their first successful run, as Kubernetes' restart
 * policy does (10 s doubled up to 5 minutes there, reset once a container runs well).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as wait } from 'node:timers/promises';
import type { SeededRandom } from '../src/fake-server/random.js';
import { benchChildCommand } from './child-process.js';
import { followLog, sleep, withTimeout, type DaemonLog, type DaemonLogEntry } from './soak-bed.js';

/** Whether processes can run as pid 1 of a PID namespace of their own here (root, util-linux). */
export function pidNamespaceWorks(): boolean {
  return spawnSync('unshare', ['--pid', '--fork', '--kill-child', 'true']).status === 0;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface OcsProcess {
  log: DaemonLog;
  /** Lines of its stderr that are not JSON, but unshare's own (it says why it could not re-raise). */
  notJson(): string[];
  /** Resolves once the process has ended and its log is read to the end. */
  exited: Promise<Exit>;
  running(): boolean;
  /** Sends `signal` to ocs-sync itself (under unshare: pid 1 of its namespace). */
  signal(signal: NodeJS.Signals): Promise<void>;
}

/** `ocs-sync ARGS` from this build (built, or from source through vite-node). */
export function startOcsSync(
  args: string[],
  options: {
    env: NodeJS.ProcessEnv;
    pidNamespace: boolean;
    logFile: string;
    onEntry?: (entry: DaemonLogEntry) => void;
  },
): OcsProcess {
  const command = benchChildCommand('daemon-process', args);
  const node = [process.execPath, command.module, ...command.args];
  const child = options.pidNamespace
    ? spawn('unshare', ['--pid', '--fork', '--kill-child', ...node], spawnOptions(options, command))
    : spawn(node[0]!, node.slice(1), spawnOptions(options, command));
  const log = followLog(child.stderr!, options.logFile, options.onEntry);
  let ended = false;
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => {
      ended = true;
      void log.closed.then(() => resolve({ code, signal }));
    }),
  );
  return {
    log,
    notJson: () => log.notJson.filter((line) => !line.startsWith('unshare: ')),
    exited,
    running: () => !ended,
    signal: async (signal) => {
      const pid = options.pidNamespace ? await childOf(child.pid!, () => ended) : child.pid;
      if (pid === undefined || ended) return;
      try {
        process.kill(pid, signal);
      } catch {
        // Gone meanwhile.
      }
    },
  };
}

function spawnOptions(
  options: { env: NodeJS.ProcessEnv },
  command: ReturnType<typeof benchChildCommand>,
) {
  return {
    cwd: command.cwd,
    env: options.env,
    stdio: ['ignore', 'ignore', 'pipe'] as Array<'ignore' | 'pipe'>,
  };
}

/** The one child of `pid` (unshare's forked ocs-sync), once it is there. */
async function childOf(pid: number, ended: () => boolean): Promise<number | undefined> {
  const file = `/proc/${pid}/task/${pid}/children`;
  while (!ended()) {
    const first = existsSync(file) ? readFileSync(file, 'utf8').trim().split(/\s+/)[0] : '';
    if (first) return Number(first);
    await sleep(5);
  }
  return undefined;
}

/**
 * The back-off before a restart: `baseMs`, doubled for each process in a row that died before
 * a run of its own ended ok, at most ten times `baseMs`.
 */
export function restartDelayMs(baseMs: number, deathsBeforeSuccess: number): number {
  return Math.min(baseMs * 2 ** deathsBeforeSuccess, baseMs * 10);
}

// ---------------------------------------------------------------------------------------------
// A process's life, from its start to its end.

/**
 * How a process is ended: -9 or SIGTERM, at a moment drawn from one of three, alike often:
 * - `start`: `fraction` of half of --kill-seconds after its start (starting up, taking the lock,
 *   its first run);
 * - `run`: once a run of its own has ended ok, `fraction` of the way into its next run (as long
 *   as the one before it took), so the middle of a run is hit often;
 * - `later`: `fraction` of --kill-seconds after its first run that ended ok (idle or in a run).
 */
export interface EndPlan {
  signal: 'SIGKILL' | 'SIGTERM';
  at: 'start' | 'run' | 'later';
  /** In [0, 1). */
  fraction: number;
}

/** How long processes live and how they end (the chaos soak's flags). */
export interface LifePolicy {
  /** How long a process lives before it is ended, on average. */
  killSeconds: number;
  /** Share of the ends that are SIGTERM (then -9 past the grace period) rather than -9. */
  stopShare: number;
  graceSeconds: number;
  /** A process with no run ended ok this long after its start is stuck: a hang. */
  stuckSeconds: number;
}

export function drawEnd(random: SeededRandom, options: Pick<LifePolicy, 'stopShare'>): EndPlan {
  const signal = random.chance(options.stopShare) ? 'SIGTERM' : 'SIGKILL';
  const at = random.pick(['start', 'run', 'later'] as const);
  return { signal, at, fraction: random.next() };
}

/** -9 or SIGTERM at its planned moment; ended by itself; -9 for a hang; SIGTERM at the end. */
export type LifeEnd = 'killed' | 'stopped' | 'died' | 'stuck' | 'chaos over';

export interface Life {
  /** Ms since the soak started. */
  startedAt: number;
  /** Ms from its start to the end of its first run that ended ok. */
  firstOkAfter?: number;
  end: LifeEnd;
  /** A run was in progress when it was ended. */
  duringRun: boolean;
  /** SIGTERM that needed the -9: the process was still there after the grace period. */
  pastGrace: boolean;
  /** Whether it had logged anything (its signal handlers in place) when the signal came. */
  hadLogged: boolean;
  exit: Exit;
  errors: string[];
}

/** Runs one process of the daemon from its start to its end, as its plan says. */
export async function live(
  plan: EndPlan,
  options: LifePolicy,
  start: (onEntry: (message: string) => void) => OcsProcess,
  now: () => number,
  chaosLeftMs: number,
): Promise<Life> {
  const startedAt = now();
  let firstOkAt: number | undefined;
  let running = false;
  let logged = false;
  let runStartedAt = 0;
  let lastRunMs = 0;
  let firstOk: () => void = () => undefined;
  const okSeen = new Promise<void>((resolve) => (firstOk = resolve));
  let nextRunStarts: (() => void) | undefined;
  const daemon = start((message) => {
    logged = true;
    if (message.endsWith(' starting')) {
      running = true;
      runStartedAt = now();
      nextRunStarts?.();
    } else if (/^Sync (ok|partial)$|^Sync run (failed|interrupted)/.test(message)) {
      running = false;
      lastRunMs = now() - runStartedAt;
    }
    if (message === 'Sync ok' && firstOkAt === undefined) {
      firstOkAt = now();
      firstOk();
    }
  });
  const timers = new AbortController();
  const after = <T>(ms: number, value: T) =>
    wait(Math.max(0, ms), value, { signal: timers.signal }).catch(() => new Promise<T>(() => {}));
  const killMs = options.killSeconds * 1000;
  const moment =
    plan.at === 'start'
      ? after(plan.fraction * (killMs / 2), 'moment' as const)
      : plan.at === 'later'
        ? okSeen.then(() => after(plan.fraction * killMs, 'moment' as const))
        : okSeen
            .then(() => new Promise<void>((resolve) => (nextRunStarts = resolve)))
            .then(() => after(plan.fraction * lastRunMs, 'moment' as const));
  const reason = await Promise.race([
    daemon.exited.then(() => 'exit' as const),
    moment,
    after(options.stuckSeconds * 1000, 'stuck' as const).then((value) =>
      firstOkAt === undefined ? value : new Promise<never>(() => {}),
    ),
    after(chaosLeftMs, 'over' as const),
  ]);
  timers.abort();
  const duringRun = running;
  const hadLogged = logged;
  let pastGrace = false;
  let end: LifeEnd;
  if (reason === 'exit') end = 'died';
  else if (reason === 'stuck' || (reason === 'moment' && plan.signal === 'SIGKILL')) {
    await daemon.signal('SIGKILL');
    end = reason === 'stuck' ? 'stuck' : 'killed';
  } else {
    await daemon.signal('SIGTERM');
    pastGrace = await withTimeout(daemon.exited, options.graceSeconds * 1000, 'the stop').then(
      () => false,
      () => true,
    );
    if (pastGrace) await daemon.signal('SIGKILL');
    end = reason === 'over' ? 'chaos over' : 'stopped';
  }
  const exit = await daemon.exited;
  return {
    startedAt,
    ...(firstOkAt === undefined ? {} : { firstOkAfter: firstOkAt - startedAt }),
    end,
    duringRun,
    pastGrace,
    hadLogged,
    exit,
    errors: daemon.log.errors,
  };
}
