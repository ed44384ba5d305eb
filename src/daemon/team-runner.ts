/**
 * One team's part of the daemon: its schedules (scheduler.ts), its runs, its metrics and its
 * health. The daemon of one team (daemon.ts) runs one; a fleet (fleet.ts) runs one per team,
 * each waiting for one of the fleet's slots (`teams_at_once`) before a run.
 *
 * In a fleet a run that stops moving is stopped: when nothing has moved (no page, no file, no
 * step of any stage) for `health.max_age_seconds` — when the team turns unhealthy anyway — its
 * signal aborts, as SIGTERM would abort it (the page in flight commits or rolls back, the lock is
 * released), and the run counts as failed, with the reason. If it has not ended `graceMs` later
 * (a request that no signal reaches, bounded by the HTTP deadlines), its slot goes to the next
 * team all the same, and the team stays "running" (and unhealthy) until the run ends; one that
 * still has not ended after another max age makes the process not live (`/livez`).
 */
import { linkedAbortController } from '../abort.js';
import { InterruptedError, describeError, errorKindOf, type ErrorKind } from '../errors.js';
import type { AuditOutcome, RunKind, StageProgress } from '../interfaces.js';
import type { Logger } from '../log.js';
import type { RequestEvent } from '../source/http-source.js';
import type { SyncEvents, SyncReport } from '../sync/engine.js';
import { describeProgress, evaluateHealth, type HealthReport } from './health.js';
import { SyncMetrics } from './metrics.js';
import { combineEvents } from '../sync/run-types.js';
import type { RunExporter } from './run-export.js';
import {
  Scheduler,
  nodeCronScheduleFunction,
  type BackoffPolicy,
  type RunOutcome,
  type ScheduleFunction,
  type SchedulerClock,
} from './scheduler.js';
import type { Slot, Slots } from './slots.js';
import type { WarehouseFacts } from './warehouse-facts.js';

/** What the daemon hands the sync for one run. */
export interface DaemonSyncRequest {
  kind: RunKind;
  signal: AbortSignal;
  events: SyncEvents;
  onAttempt: (event: RequestEvent) => void;
}

/** A team as the daemon runs it: its schedules, its sync, and what it reads of its warehouse. */
export interface TeamJobs {
  /** Cron expression of incremental syncs. */
  schedule: string;
  /** Cron expression of full refreshes; null = none. */
  fullRefreshSchedule: string | null;
  timezone: string;
  /** One sync pass (the CLI passes `syncOnce`). Throws when the run could not complete. */
  sync(request: DaemonSyncRequest): Promise<SyncReport>;
  /**
   * What the warehouse says (its last run and success, resources, files, audit), read at start
   * and after each run for the metrics; undefined while there is no warehouse yet.
   */
  readFacts?(): Promise<WarehouseFacts | undefined>;
  /** Where each run's metrics go besides /metrics (a Pushgateway, a textfile), if anywhere. */
  exporter?: RunExporter;
  /**
   * The newest full refresh the warehouse records, when it did not complete (interrupted,
   * failed, or its process died): the start's run is then a full refresh. Read once at start,
   * with a full refresh schedule.
   */
  readUnfinishedFullRefresh?(): Promise<{ runId: number; status: string } | undefined>;
}

export interface TeamRunnerOptions extends TeamJobs {
  maxAgeSeconds: number;
  logger: Logger;
  /** The daemon's: aborting it stops every run. */
  signal: AbortSignal;
  scheduleFunction?: ScheduleFunction;
  clock: SchedulerClock;
  backoff?: Partial<BackoffPolicy>;
  metrics: SyncMetrics;
  /** A fleet's slots: each run waits for one. */
  slots?: Slots;
  /** Stop a run that has not moved for `maxAgeSeconds` (a fleet's runs). */
  stopStalledRuns?: boolean;
  /** How long a stopped run may take to end before its slot is given up. */
  graceMs: number;
}

/** Whether the process is still of use to this team (`/livez`). */
export interface Liveness {
  live: boolean;
  reason?: string;
}

const WAITING: StageProgress = {
  stage: 'waiting for a free slot (teams_at_once)',
  unit: 'teams',
  done: 0,
};

/** What a run left for the metrics once the scheduler has counted it. */
interface RunEnd {
  since: number;
  errorKind?: ErrorKind;
  facts?: WarehouseFacts;
  audit?: AuditOutcome;
}

export class TeamRunner {
  readonly scheduler: Scheduler;
  readonly metrics: SyncMetrics;
  private lastRunEnd: RunEnd | undefined;
  // The run in progress: when it last moved, and the step it made (glossary: Progress).
  private lastProgressAt: number | null = null;
  private lastProgress: StageProgress | null = null;
  /** When a run that stopped moving was told to stop, until it ends. */
  private stoppedAt: number | null = null;

  private constructor(
    private readonly options: TeamRunnerOptions,
    fullRefreshOwed: boolean,
  ) {
    this.metrics = options.metrics;
    this.scheduler = new Scheduler({
      schedule: options.schedule,
      fullRefreshSchedule: options.fullRefreshSchedule,
      timezone: options.timezone,
      clock: options.clock,
      scheduleFunction: options.scheduleFunction ?? nodeCronScheduleFunction(options.logger),
      backoff: options.backoff,
      fullRefreshOwed,
      logger: options.logger,
      run: (kind) => this.run(kind),
      onTickSkipped: (reason) => this.metrics.tickSkipped(reason),
      onRunFinished: async (outcome, kind, status) => {
        const last = status.lastRun;
        const end = this.lastRunEnd;
        this.metrics.runFinished({
          kind,
          status: outcome.status,
          durationMs: last ? last.finishedAt - last.startedAt : 0,
          finishedAt: last?.finishedAt ?? options.clock.now(),
          consecutiveFailures: status.consecutiveFailures,
          errorKind: end?.errorKind,
        });
        this.lastProgressAt = null;
        this.lastProgress = null;
        // With a signing key, every run ends with a checkpoint, or why it could not.
        if (end?.audit) this.metrics.checkpointWritten(end.audit.error === undefined);
        if (!end?.facts) return;
        this.metrics.warehouseFacts(end.facts, end);
        // A run the warehouse has no word on is not pushed: its group keeps the last run's.
        if (!options.signal.aborted) await options.exporter?.export(this.metrics.runRegistry);
      },
    });
  }

  /** A runner, its metrics read from the warehouse (a failure to read it is logged). */
  static async create(options: TeamRunnerOptions): Promise<TeamRunner> {
    const runner = new TeamRunner(options, await fullRefreshOwed(options));
    const facts = await runner.readFacts();
    if (facts) runner.metrics.warehouseFacts(facts);
    return runner;
  }

  /** Starts the schedules. */
  start(): void {
    this.scheduler.start();
    const intervalMs = this.scheduler.scheduleIntervalMs();
    if (intervalMs !== undefined) this.metrics.scheduleIntervalSeconds(intervalMs / 1000);
  }

  private async readFacts(): Promise<WarehouseFacts | undefined> {
    if (!this.options.readFacts) return undefined;
    try {
      return await this.options.readFacts();
    } catch (error) {
      this.options.logger.warn(
        { error: describeError(error) },
        'Could not read the warehouse for the metrics',
      );
      return undefined;
    }
  }

  health(): HealthReport {
    const status = this.scheduler.status();
    return evaluateHealth({
      now: this.options.clock.now(),
      maxAgeSeconds: this.options.maxAgeSeconds,
      running: status.running !== null,
      lastProgressAt: this.lastProgressAt,
      progress: this.lastProgress,
      lastSuccessAt: status.lastSuccessAt,
      lastRunStatus: status.lastRun?.status ?? null,
      lastError: status.lastRun?.error ?? null,
      consecutiveFailures: status.consecutiveFailures,
    });
  }

  liveness(): Liveness {
    if (this.stoppedAt === null) return { live: true };
    const since = this.options.clock.now() - this.stoppedAt;
    if (since <= this.options.maxAgeSeconds * 1000) return { live: true };
    return {
      live: false,
      reason: `a run told to stop ${Math.round(since / 1000)} s ago (it had stopped moving) has not ended; only a restart frees it`,
    };
  }

  private async run(kind: RunKind): Promise<RunOutcome> {
    const { clock, logger, signal, slots } = this.options;
    this.lastRunEnd = undefined;
    this.lastProgressAt = clock.now();
    this.lastProgress = null;
    let slot: Slot | undefined;
    if (slots) {
      if (slots.inUse >= slots.size) {
        this.lastProgress = WAITING;
        this.metrics.waitingForSlot(true);
        logger.info(
          { kind, teamsAtOnce: slots.size, waiting: slots.waiting + 1 },
          'Waiting for a free slot: teams_at_once teams are syncing',
        );
      }
      try {
        slot = await slots.acquire(signal);
      } catch {
        return { status: 'interrupted' };
      } finally {
        this.metrics.waitingForSlot(false);
      }
      this.lastProgressAt = clock.now();
      this.lastProgress = null;
    }
    this.metrics.runStarted();
    const since = clock.now();
    const end: RunEnd = { since };
    this.lastRunEnd = end;
    logger.info({ kind }, kind === 'full_refresh' ? 'Full refresh starting' : 'Sync starting');
    // The run's own signal: what the run hangs on it goes away with the run (src/abort.ts).
    const runAbort = linkedAbortController(signal);
    const watch = this.options.stopStalledRuns ? this.watchForStall(runAbort, slot) : undefined;
    let outcome: RunOutcome;
    try {
      const report = await this.options.sync({
        kind,
        signal: runAbort.signal,
        events: combineEvents(this.metrics.syncEvents(), {
          onRunStart: () => (this.lastProgressAt = clock.now()),
          onProgress: (progress) => {
            this.lastProgressAt = clock.now();
            this.lastProgress = progress;
          },
        }),
        onAttempt: this.metrics.onAttempt,
      });
      outcome = outcomeOfReport(report);
      end.audit = report.audit;
    } catch (error) {
      outcome = {
        status: signal.aborted || error instanceof InterruptedError ? 'interrupted' : 'failed',
        error: describeError(error),
      };
      end.errorKind = errorKindOf(error);
    } finally {
      runAbort.release();
      watch?.stop();
      this.stoppedAt = null;
      slot?.release();
    }
    if (watch?.reason !== undefined && !signal.aborted) {
      outcome = { status: 'failed', error: `stopped: ${watch.reason}` };
      end.errorKind = 'stalled';
    }
    if (outcome.status !== 'interrupted') {
      const facts = await this.readFacts();
      end.facts = facts;
      // The warehouse's record names the run's kind: `initial` when it made the first load.
      const recorded = facts?.lastRun;
      if (recorded && recorded.finishedAt !== null && recorded.startedAt >= since)
        outcome = { ...outcome, kind: recorded.kind };
    }
    return outcome;
  }

  /** Stops the run when it has not moved for the max age; gives up its slot after the grace. */
  private watchForStall(
    runAbort: ReturnType<typeof linkedAbortController>,
    slot: Slot | undefined,
  ): { reason: string | undefined; stop(): void } {
    const { clock, logger, maxAgeSeconds, graceMs } = this.options;
    const maxAgeMs = maxAgeSeconds * 1000;
    let giveUp: NodeJS.Timeout | undefined;
    const state = {
      reason: undefined as string | undefined,
      stop: () => {
        clearInterval(timer);
        clearTimeout(giveUp);
      },
    };
    const check = () => {
      const idleMs = clock.now() - (this.lastProgressAt ?? clock.now());
      if (state.reason !== undefined || idleMs <= maxAgeMs) return;
      const at = this.lastProgress ? ` (stuck at ${describeProgress(this.lastProgress)})` : '';
      state.reason = `nothing moved for ${Math.round(idleMs / 1000)} s${at}, longer than health.max_age_seconds (${maxAgeSeconds} s)`;
      this.stoppedAt = clock.now();
      this.metrics.runStalled();
      logger.error(
        { maxAgeSeconds, idleSeconds: Math.round(idleMs / 1000) },
        `Stopping a run that has stopped moving: ${state.reason}`,
      );
      runAbort.abort(new InterruptedError(`The run stopped moving: ${state.reason}.`));
      giveUp = setTimeout(() => {
        logger.error(
          { graceSeconds: graceMs / 1000 },
          'The stopped run has not ended; its slot goes to the next team (the team stays unhealthy until the run ends)',
        );
        slot?.release();
      }, graceMs);
      giveUp.unref();
    };
    // Often enough that a run is stopped soon after the max age; never busier than 10 times a second.
    const timer = setInterval(check, Math.min(30_000, Math.max(100, maxAgeMs / 10)));
    timer.unref();
    return state;
  }
}

function outcomeOfReport(report: SyncReport): RunOutcome {
  if (report.status === 'ok') return { status: 'ok', kind: report.kind };
  const troubled = report.resources.filter((resource) => resource.status !== 'ok');
  const details = [
    ...troubled.map((resource) => `${resource.resource} ${resource.status}`),
    ...report.problems,
  ];
  const status = report.status === 'running' ? 'failed' : report.status;
  return {
    status,
    kind: report.kind,
    error:
      details.length > 0
        ? details.slice(0, 10).join('; ') + (details.length > 10 ? '; …' : '')
        : undefined,
  };
}

/** Whether a full refresh a process before this one did not complete is owed (logged once). */
async function fullRefreshOwed(options: TeamRunnerOptions): Promise<boolean> {
  if (!options.readUnfinishedFullRefresh || options.fullRefreshSchedule === null) return false;
  try {
    const unfinished = await options.readUnfinishedFullRefresh();
    if (!unfinished) return false;
    options.logger.info(
      unfinished,
      `The last full refresh (run ${unfinished.runId}) ended ${unfinished.status}: this start runs a full refresh`,
    );
    return true;
  } catch (error) {
    options.logger.warn(
      { error: describeError(error) },
      'Could not read the last full refresh from the warehouse',
    );
    return false;
  }
}
