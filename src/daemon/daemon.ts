/**
 * The long-running service: a sync at start, then one per cron tick (and full refreshes on their
 * own schedule), never two at once, backing off after failures; /healthz and /metrics over HTTP.
 * The sync itself is injected (`sync`), as are the clock and the cron function, so the whole
 * daemon runs in tests without waiting for real time.
 *
 * Shutdown (the `signal` aborts: SIGTERM/SIGINT): the run in progress has a signal of its own that
 * follows it (released when the run ends, so nothing piles up on the daemon's), so the engine
 * stops after the page in flight commits or rolls back and releases the writer lock; the cron
 * jobs stop; the HTTP server closes. Every part registers its cleanup when it starts and
 * cleanups run in reverse. If the run does not stop within `shutdownGraceMs` the daemon stops
 * waiting for it (an uncommitted page rolls back; the lock dies with the process, and the next
 * start closes the run as interrupted) so the process can exit.
 */
import { linkedAbortController } from '../abort.js';
import { InterruptedError, describeError } from '../errors.js';
import type { ListenAddress } from '../listen-address.js';
import type { ResourceStatus, RunKind, StageProgress } from '../interfaces.js';
import type { Logger } from '../log.js';
import type { RequestEvent } from '../source/http-source.js';
import type { SyncEvents, SyncReport } from '../sync/engine.js';
import { CleanupStack } from './cleanup-stack.js';
import { evaluateHealth, type HealthReport } from './health.js';
import { startHealthServer, type HealthServer } from './health-server.js';
import { SyncMetrics, combineEvents } from './metrics.js';
import {
  Scheduler,
  nodeCronScheduleFunction,
  type BackoffPolicy,
  type RunOutcome,
  type ScheduleFunction,
  type SchedulerClock,
} from './scheduler.js';

/** What the daemon hands the sync for one run. */
export interface DaemonSyncRequest {
  kind: RunKind;
  signal: AbortSignal;
  events: SyncEvents;
  onAttempt: (event: RequestEvent) => void;
}

export interface DaemonOptions {
  /** Cron expression of incremental syncs. */
  schedule: string;
  /** Cron expression of full refreshes; null = none. */
  fullRefreshSchedule: string | null;
  timezone: string;
  health: { listen: ListenAddress | null; maxAgeSeconds: number };
  logger: Logger;
  /** Aborting it stops the daemon. */
  signal: AbortSignal;
  /** One sync pass (the CLI passes `syncOnce`). Throws when the run could not complete. */
  sync(request: DaemonSyncRequest): Promise<SyncReport>;
  /** The warehouse's per-resource status, read after each run for the lag and row metrics. */
  readStatus?(): Promise<ResourceStatus[]>;
  /** When the warehouse's last successful run finished (epoch ms), read once at start. */
  readLastSuccess?(): Promise<number | undefined>;
  /**
   * The newest full refresh the warehouse records, when it did not complete (interrupted,
   * failed, or its process died): the start's run is then a full refresh. Read once at start,
   * with a full refresh schedule.
   */
  readUnfinishedFullRefresh?(): Promise<{ runId: number; status: string } | undefined>;
  scheduleFunction?: ScheduleFunction;
  clock?: SchedulerClock;
  backoff?: Partial<BackoffPolicy>;
  /** How long shutdown waits for the run in progress to stop. Default 7 s (exit within 10 s). */
  shutdownGraceMs?: number;
  metrics?: SyncMetrics;
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
  const metrics = options.metrics ?? new SyncMetrics({ clock, processMetrics: true });
  // The run in progress: when it last moved, and the step it made (glossary: Progress).
  let lastProgressAt: number | null = null;
  let lastProgress: StageProgress | null = null;
  let abandonedRun = false;
  if (options.readLastSuccess) {
    try {
      const lastSuccess = await options.readLastSuccess();
      if (lastSuccess !== undefined) metrics.restoreLastSuccess(lastSuccess);
    } catch (error) {
      logger.warn(
        { error: describeError(error) },
        'Could not read the last success from the warehouse',
      );
    }
  }

  let fullRefreshOwed = false;
  if (options.readUnfinishedFullRefresh && options.fullRefreshSchedule !== null) {
    try {
      const unfinished = await options.readUnfinishedFullRefresh();
      if (unfinished) {
        fullRefreshOwed = true;
        logger.info(
          unfinished,
          `The last full refresh (run ${unfinished.runId}) ended ${unfinished.status}: this start runs a full refresh`,
        );
      }
    } catch (error) {
      logger.warn(
        { error: describeError(error) },
        'Could not read the last full refresh from the warehouse',
      );
    }
  }

  const progressEvents: SyncEvents = {
    onRunStart: () => (lastProgressAt = clock.now()),
    onProgress: (progress) => {
      lastProgressAt = clock.now();
      lastProgress = progress;
    },
  };

  const run = async (kind: RunKind): Promise<RunOutcome> => {
    lastProgressAt = clock.now();
    lastProgress = null;
    metrics.runStarted();
    logger.info({ kind }, kind === 'full_refresh' ? 'Full refresh starting' : 'Sync starting');
    let outcome: RunOutcome;
    // The run's own signal: what the run hangs on it goes away with the run (src/abort.ts).
    const runAbort = linkedAbortController(signal);
    try {
      const report = await options.sync({
        kind,
        signal: runAbort.signal,
        events: combineEvents(metrics.syncEvents(), progressEvents),
        onAttempt: metrics.onAttempt,
      });
      outcome = outcomeOfReport(report);
    } catch (error) {
      outcome = {
        status: signal.aborted || error instanceof InterruptedError ? 'interrupted' : 'failed',
        error: describeError(error),
      };
    } finally {
      runAbort.release();
    }
    if (outcome.status !== 'interrupted' && options.readStatus) {
      try {
        metrics.warehouseStatus(await options.readStatus());
      } catch (error) {
        logger.warn(
          { error: describeError(error) },
          'Could not read the warehouse status for metrics',
        );
      }
    }
    return outcome;
  };

  const scheduler = new Scheduler({
    schedule: options.schedule,
    fullRefreshSchedule: options.fullRefreshSchedule,
    timezone: options.timezone,
    clock,
    scheduleFunction: options.scheduleFunction ?? nodeCronScheduleFunction(logger),
    backoff: options.backoff,
    fullRefreshOwed,
    logger,
    run,
    onTickSkipped: (reason) => metrics.tickSkipped(reason),
    onRunFinished: (outcome, kind, status) => {
      const last = status.lastRun;
      metrics.runFinished({
        kind,
        status: outcome.status,
        durationMs: last ? last.finishedAt - last.startedAt : 0,
        finishedAt: last?.finishedAt ?? clock.now(),
        consecutiveFailures: status.consecutiveFailures,
      });
      lastProgressAt = null;
      lastProgress = null;
    },
  });

  const health = (): HealthReport => {
    const status = scheduler.status();
    return evaluateHealth({
      now: clock.now(),
      maxAgeSeconds: options.health.maxAgeSeconds,
      running: status.running !== null,
      lastProgressAt,
      progress: lastProgress,
      lastSuccessAt: status.lastSuccessAt,
      lastRunStatus: status.lastRun?.status ?? null,
      lastError: status.lastRun?.error ?? null,
      consecutiveFailures: status.consecutiveFailures,
    });
  };

  let healthServer: HealthServer | undefined;
  try {
    if (options.health.listen !== null) {
      const server = await startHealthServer({
        listen: options.health.listen,
        health,
        metrics: () => metrics.render(),
        logger,
      });
      healthServer = server;
      cleanup.add('health server', () => server.close());
    }
  } catch (error) {
    await cleanup.runAll(logger);
    throw error;
  }

  const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  cleanup.add('scheduler', async () => {
    await scheduler.stop();
    const finished = await waitAtMost(scheduler.whenIdle(), graceMs);
    if (!finished) {
      abandonedRun = true;
      logger.warn(
        { graceSeconds: graceMs / 1000 },
        'The run in progress did not stop in time; exiting without it (an uncommitted page rolls back, the writer lock is freed with the process, and the next start closes the run as interrupted)',
      );
    }
  });

  const stopped = new Promise<DaemonStopResult>((resolve) => {
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

  if (!signal.aborted) {
    scheduler.start();
    logger.info(
      {
        schedule: options.schedule,
        fullRefreshSchedule: options.fullRefreshSchedule ?? 'off',
        timezone: options.timezone,
        health: healthServer?.url ?? 'off',
      },
      'Daemon started',
    );
    const intervalMs = scheduler.scheduleIntervalMs();
    if (intervalMs !== undefined && intervalMs > options.health.maxAgeSeconds * 1000) {
      logger.warn(
        { maxAgeSeconds: options.health.maxAgeSeconds, scheduleIntervalSeconds: intervalMs / 1000 },
        'health.max_age_seconds is shorter than the time between scheduled runs, so /healthz will answer 503 between runs; raise it',
      );
    }
  }

  return { scheduler, metrics, healthServer, health, stopped };
}

/** Start the daemon and resolve once it has shut down. */
export async function runDaemon(options: DaemonOptions): Promise<DaemonStopResult> {
  const daemon = await startDaemon(options);
  return daemon.stopped;
}

function outcomeOfReport(report: SyncReport): RunOutcome {
  if (report.status === 'ok') return { status: 'ok' };
  const troubled = report.resources.filter((resource) => resource.status !== 'ok');
  const details = [
    ...troubled.map((resource) => `${resource.resource} ${resource.status}`),
    ...report.problems,
  ];
  const status = report.status === 'running' ? 'failed' : report.status;
  return {
    status,
    error:
      details.length > 0
        ? details.slice(0, 10).join('; ') + (details.length > 10 ? '; …' : '')
        : undefined,
  };
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
