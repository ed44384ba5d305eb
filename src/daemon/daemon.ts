/**
 * The long-running service of one team: a sync at start, then one per cron tick (and full
 * refreshes on their own schedule), never two at once, backing off after failures
 * (team-runner.ts); /healthz, /livez and /metrics over HTTP. A fleet of teams: fleet.ts, which
 * shares the health server and the shutdown below. The sync itself is injected (`sync`), as are
 * the clock and the cron function, so the whole daemon runs in tests without waiting for real time.
 *
 * Shutdown (the `signal` aborts: SIGTERM/SIGINT): the run in progress has a signal of its own that
 * follows it (released when the run ends, so nothing piles up on the daemon's), so the engine
 * stops after the page in flight commits or rolls back and releases the writer lock; the cron
 * jobs stop; the HTTP server closes. Every part registers its cleanup when it starts and
 * cleanups run in reverse. If the run does not stop within `shutdownGraceMs` the daemon stops
 * waiting for it (an uncommitted page rolls back; the lock dies with the process, and the next
 * start closes the run as interrupted) so the process can exit.
 */
import type { ListenAddress } from '../listen-address.js';
import type { Logger } from '../log.js';
import { CleanupStack } from './cleanup-stack.js';
import type { HealthReport } from './health.js';
import { startHealthServer, type HealthAnswer, type HealthServer } from './health-server.js';
import { SyncMetrics } from './metrics.js';
import type { BackoffPolicy, ScheduleFunction, Scheduler, SchedulerClock } from './scheduler.js';
import { TeamRunner, type TeamJobs } from './team-runner.js';

export type { DaemonSyncRequest } from './team-runner.js';

export interface DaemonOptions extends TeamJobs {
  health: { listen: ListenAddress | null; maxAgeSeconds: number };
  logger: Logger;
  /** Aborting it stops the daemon. */
  signal: AbortSignal;
  scheduleFunction?: ScheduleFunction;
  clock?: SchedulerClock;
  backoff?: Partial<BackoffPolicy>;
  /** How long shutdown waits for the run in progress to stop. Default 7 s (exit within 10 s). */
  shutdownGraceMs?: number;
  metrics?: SyncMetrics;
  /** The `team` label of every series (`metrics.team`); none by default. */
  team?: string;
  /** Cleanups registered by the caller before the daemon starts (they run last). */
  cleanup?: CleanupStack;
}

export interface DaemonStopResult {
  /** True when shutdown gave up waiting for the run in progress. */
  abandonedRun: boolean;
}

export interface Daemon {
  readonly scheduler: Scheduler;
  readonly metrics: SyncMetrics;
  /** Undefined when health.listen is off. */
  readonly healthServer: HealthServer | undefined;
  health(): HealthReport;
  /** Resolves once the daemon has shut down after the signal. */
  readonly stopped: Promise<DaemonStopResult>;
}

export const DEFAULT_SHUTDOWN_GRACE_MS = 7_000;

export async function startDaemon(options: DaemonOptions): Promise<Daemon> {
  const { logger, signal } = options;
  const clock = options.clock ?? { now: () => Date.now() };
  const cleanup = options.cleanup ?? new CleanupStack();
  const metrics =
    options.metrics ?? new SyncMetrics({ clock, processMetrics: true, team: options.team });
  const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  const runner = await TeamRunner.create({
    ...options,
    maxAgeSeconds: options.health.maxAgeSeconds,
    clock,
    metrics,
    graceMs,
  });
  const { scheduler } = runner;

  const healthServer = await serveHealth({
    listen: options.health.listen,
    logger,
    cleanup,
    health: (team) => {
      if (team !== null) {
        return notFound(
          'this daemon runs one team, without a name (its configuration has no teams: list); /healthz is its health',
        );
      }
      const { httpStatus, ...report } = runner.health();
      return { httpStatus, body: report };
    },
    live: () => livenessAnswer([{ name: undefined, liveness: runner.liveness() }]),
    metrics: () => metrics.render(),
  });

  const stopped = stopOnSignal({
    signal,
    cleanup,
    logger,
    graceMs,
    schedulers: [scheduler],
  });

  if (!signal.aborted) {
    runner.start();
    logger.info(
      {
        schedule: options.schedule,
        fullRefreshSchedule: options.fullRefreshSchedule ?? 'off',
        timezone: options.timezone,
        health: healthServer?.url ?? 'off',
      },
      'Daemon started',
    );
    warnIfMaxAgeTooShort(scheduler, options.health.maxAgeSeconds, logger);
  }

  return { scheduler, metrics, healthServer, health: () => runner.health(), stopped };
}

/** Start the daemon and resolve once it has shut down. */
export async function runDaemon(options: DaemonOptions): Promise<DaemonStopResult> {
  const daemon = await startDaemon(options);
  return daemon.stopped;
}

// ---------------------------------------------------------------------------------------------
// What the daemon of one team and a fleet share.

/** The health server on `listen` (none when it is off), closed by `cleanup`. */
export async function serveHealth(options: {
  listen: ListenAddress | null;
  logger: Logger;
  cleanup: CleanupStack;
  health(team: string | null): HealthAnswer;
  live(): HealthAnswer;
  metrics(): Promise<{ contentType: string; body: string }>;
}): Promise<HealthServer | undefined> {
  const { listen, cleanup, logger } = options;
  if (listen === null) return undefined;
  try {
    const server = await startHealthServer({ ...options, listen });
    cleanup.add('health server', () => server.close());
    return server;
  } catch (error) {
    await cleanup.runAll(logger);
    throw error;
  }
}

export function notFound(error: string): HealthAnswer {
  return { httpStatus: 404, body: { error } };
}

/** /livez: 200 while every team's runs can still end; 503 naming those that cannot. */
export function livenessAnswer(
  teams: ReadonlyArray<{ name: string | undefined; liveness: { live: boolean; reason?: string } }>,
): HealthAnswer {
  const stuck = teams.filter((team) => !team.liveness.live);
  if (stuck.length === 0) return { httpStatus: 200, body: { status: 'ok' } };
  return {
    httpStatus: 503,
    body: {
      status: 'not live',
      reason: stuck
        .map((team) => `${team.name === undefined ? '' : `${team.name}: `}${team.liveness.reason}`)
        .join('; '),
    },
  };
}

/**
 * The shutdown on the signal: the schedules stop, each run in progress gets `graceMs` to stop
 * (then the daemon exits without it), cleanups run in reverse.
 */
export function stopOnSignal(options: {
  signal: AbortSignal;
  cleanup: CleanupStack;
  logger: Logger;
  graceMs: number;
  schedulers: readonly Scheduler[];
}): Promise<DaemonStopResult> {
  const { signal, cleanup, logger, graceMs, schedulers } = options;
  let abandonedRun = false;
  cleanup.add('scheduler', async () => {
    await Promise.all(schedulers.map((scheduler) => scheduler.stop()));
    const finished = await waitAtMost(
      Promise.all(schedulers.map((scheduler) => scheduler.whenIdle())),
      graceMs,
    );
    if (!finished) {
      abandonedRun = true;
      logger.warn(
        { graceSeconds: graceMs / 1000 },
        'The run in progress did not stop in time; exiting without it (an uncommitted page rolls back, the writer lock is freed with the process, and the next start closes the run as interrupted)',
      );
    }
  });
  return new Promise<DaemonStopResult>((resolve) => {
    const stop = () => {
      logger.info('Stopping: finishing or rolling back the page in flight, then exiting');
      void cleanup.runAll(logger).then(() => {
        logger.info('Stopped');
        resolve({ abandonedRun });
      });
    };
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
  });
}

/** The max age must outlast the time between runs, or /healthz answers 503 between them. */
export function warnIfMaxAgeTooShort(
  scheduler: Scheduler,
  maxAgeSeconds: number,
  logger: Logger,
): void {
  const intervalMs = scheduler.scheduleIntervalMs();
  if (intervalMs !== undefined && intervalMs > maxAgeSeconds * 1000) {
    logger.warn(
      { maxAgeSeconds, scheduleIntervalSeconds: intervalMs / 1000 },
      'health.max_age_seconds is shorter than the time between scheduled runs, so /healthz will answer 503 between runs; raise it',
    );
  }
}

/** True when `promise` settled within `ms`. */
async function waitAtMost(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
