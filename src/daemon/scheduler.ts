/**
 * When the daemon runs a sync. The decisions (run, skip because a run is in progress, skip to back
 * off after failures) are pure functions; the `Scheduler` class holds the state and takes its
 * clock and its cron `schedule` function from outside, so tests drive ticks by hand.
 *
 * Backoff: after n consecutive failed runs, the next 2^n - 1 scheduled ticks are skipped (1, 3,
 * 7, 15, ...), at most `maxSkippedTicks` of them, and never once `maxBackoffMs` has passed since
 * the failure. So a server that is down is not hammered every minute, while an hourly or daily
 * schedule (whose ticks are already that far apart) simply tries again at its next tick.
 *
 * Full refreshes are never lost: a full-refresh tick that is skipped (overlap or backoff) makes
 * the next run that does start a full refresh; a full refresh that fails is retried the same way;
 * and one that a process before this one did not complete (killed, stopped, failed: `fullRefreshOwed`,
 * read from the warehouse) makes the start's run a full refresh.
 */
import * as nodeCron from 'node-cron';
import { describeError } from '../errors.js';
import type { RunKind, RunStatus } from '../interfaces.js';
import type { Logger } from '../log.js';

/** A started cron job. */
export interface ScheduledJob {
  stop(): void | Promise<void>;
  /** When it fires the next `count` times, if the implementation knows. */
  nextRuns?(count: number): Date[];
}

/** Starts a cron job; the real one wraps node-cron, tests pass their own. */
export type ScheduleFunction = (
  cronExpression: string,
  timezone: string,
  callback: () => void,
  name: string,
) => ScheduledJob;

export interface SchedulerClock {
  now(): number;
}

export interface BackoffPolicy {
  /** Ticks skipped at most after a run of failures. */
  maxSkippedTicks: number;
  /** No tick is skipped once this long has passed since the last failure. */
  maxBackoffMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { maxSkippedTicks: 15, maxBackoffMs: 60 * 60 * 1000 };

/** How a run ended, as the scheduler sees it. `partial` counts as a success (data moved). */
export interface RunOutcome {
  status: Exclude<RunStatus, 'running'>;
  /** What the run was recorded as, when it differs from what was asked (`initial`). */
  kind?: RunKind;
  /** Safe-to-show reason for a failed or partial run. */
  error?: string;
}

export type SkipReason = 'overlap' | 'backoff';
export type TickSource = 'start' | 'schedule' | 'full_refresh_schedule';

// ---------------------------------------------------------------------------------------------
// Pure decisions.

/** Ticks to skip after `consecutiveFailures` failed runs in a row: 2^n - 1, capped. */
export function ticksToSkipAfter(consecutiveFailures: number, policy: BackoffPolicy): number {
  if (consecutiveFailures <= 0) return 0;
  // 2^31 is past any sane cap; avoid Infinity from large exponents.
  const uncapped = 2 ** Math.min(consecutiveFailures, 31) - 1;
  return Math.max(0, Math.min(uncapped, policy.maxSkippedTicks));
}

export interface TickState {
  running: boolean;
  /** Ticks still to skip for backoff. */
  ticksToSkip: number;
  lastFailureAt: number | null;
}

export type TickDecision = { action: 'run' } | { action: 'skip'; reason: SkipReason };

/** What to do with a tick. The start tick ignores backoff (there is none yet). */
export function decideTick(state: TickState, now: number, policy: BackoffPolicy): TickDecision {
  if (state.running) return { action: 'skip', reason: 'overlap' };
  if (
    state.ticksToSkip > 0 &&
    state.lastFailureAt !== null &&
    now - state.lastFailureAt < policy.maxBackoffMs
  ) {
    return { action: 'skip', reason: 'backoff' };
  }
  return { action: 'run' };
}

// ---------------------------------------------------------------------------------------------

export interface SchedulerStatus {
  running: { kind: RunKind; startedAt: number } | null;
  lastRun: {
    kind: RunKind;
    status: RunOutcome['status'];
    startedAt: number;
    finishedAt: number;
    error?: string;
  } | null;
  lastSuccessAt: number | null;
  consecutiveFailures: number;
  ticksToSkip: number;
  /** A full refresh is owed because its tick was skipped or its run failed. */
  fullRefreshPending: boolean;
  skippedTicks: Record<SkipReason, number>;
  /** When each cron job fires next, when known. */
  nextRunAt: Date | null;
  nextFullRefreshAt: Date | null;
}

export interface SchedulerOptions {
  /** Cron expression of incremental runs. */
  schedule: string;
  /** Cron expression of full refreshes; null = none. */
  fullRefreshSchedule: string | null;
  timezone: string;
  clock: SchedulerClock;
  scheduleFunction: ScheduleFunction;
  /**
   * A full refresh is owed from before this process (the last one recorded did not complete):
   * the start's run is a full refresh. Ignored without a full refresh schedule.
   */
  fullRefreshOwed?: boolean;
  /** Runs one sync. May throw; a throw counts as a failed run. */
  run(kind: RunKind): Promise<RunOutcome>;
  logger: Logger;
  backoff?: Partial<BackoffPolicy>;
  onTickSkipped?(reason: SkipReason, kind: RunKind): void;
  /** After each run, with the kind it was recorded as; awaited before the run counts as over. */
  onRunFinished?(outcome: RunOutcome, kind: RunKind, status: SchedulerStatus): void | Promise<void>;
}

/** Starts runs on the schedules, never two at once, backing off after failures. */
export class Scheduler {
  private readonly policy: BackoffPolicy;
  private readonly jobs: Array<{ name: string; job: ScheduledJob }> = [];
  private current: Promise<void> | undefined;
  private stopped = false;
  private running: SchedulerStatus['running'] = null;
  private lastRun: SchedulerStatus['lastRun'] = null;
  private lastSuccessAt: number | null = null;
  private lastFailureAt: number | null = null;
  private consecutiveFailures = 0;
  private ticksToSkip = 0;
  private fullRefreshPending = false;
  private readonly skippedTicks: Record<SkipReason, number> = { overlap: 0, backoff: 0 };

  constructor(private readonly options: SchedulerOptions) {
    this.policy = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.fullRefreshPending =
      options.fullRefreshOwed === true && options.fullRefreshSchedule !== null;
  }

  /** Start the cron jobs and the first run. */
  start(): void {
    const { schedule, fullRefreshSchedule, timezone, scheduleFunction } = this.options;
    this.jobs.push({
      name: 'incremental',
      job: scheduleFunction(
        schedule,
        timezone,
        () => this.tick('incremental', 'schedule'),
        'ocs-sync incremental',
      ),
    });
    if (fullRefreshSchedule !== null) {
      this.jobs.push({
        name: 'full_refresh',
        job: scheduleFunction(
          fullRefreshSchedule,
          timezone,
          () => this.tick('full_refresh', 'full_refresh_schedule'),
          'ocs-sync full refresh',
        ),
      });
    }
    this.tick('incremental', 'start');
  }

  /** Handle one tick: run now, or skip and say why. */
  tick(kind: RunKind, source: TickSource): void {
    if (this.stopped) return;
    const { logger, clock } = this.options;
    const now = clock.now();
    const decision =
      source === 'start'
        ? { action: 'run' as const }
        : decideTick(
            {
              running: this.running !== null,
              ticksToSkip: this.ticksToSkip,
              lastFailureAt: this.lastFailureAt,
            },
            now,
            this.policy,
          );
    if (decision.action === 'skip') {
      this.skippedTicks[decision.reason] += 1;
      if (kind === 'full_refresh') this.fullRefreshPending = true;
      if (decision.reason === 'overlap') {
        logger.warn(
          {
            tick: kind,
            runningKind: this.running?.kind,
            runningForSeconds: this.running
              ? Math.round((now - this.running.startedAt) / 1000)
              : undefined,
            ...(kind === 'full_refresh' ? { fullRefreshDeferred: true } : {}),
          },
          'Skipped a scheduled sync: the previous run is still in progress',
        );
      } else {
        this.ticksToSkip -= 1;
        logger.warn(
          {
            tick: kind,
            consecutiveFailures: this.consecutiveFailures,
            ticksStillSkipped: this.ticksToSkip,
            ...(kind === 'full_refresh' ? { fullRefreshDeferred: true } : {}),
          },
          'Skipped a scheduled sync to back off after failed runs',
        );
      }
      this.options.onTickSkipped?.(decision.reason, kind);
      return;
    }
    this.ticksToSkip = 0;
    const runKind: RunKind =
      kind === 'full_refresh' || this.fullRefreshPending ? 'full_refresh' : 'incremental';
    this.fullRefreshPending = false;
    this.current = this.execute(runKind);
  }

  private async execute(kind: RunKind): Promise<void> {
    const { clock, logger } = this.options;
    const startedAt = clock.now();
    this.running = { kind, startedAt };
    let outcome: RunOutcome;
    try {
      outcome = await this.options.run(kind);
    } catch (error) {
      outcome = { status: 'failed', error: describeError(error) };
    }
    const finishedAt = clock.now();
    this.running = null;
    const recordedAs = outcome.kind ?? kind;
    this.lastRun = {
      kind: recordedAs,
      status: outcome.status,
      startedAt,
      finishedAt,
      error: outcome.error,
    };
    switch (outcome.status) {
      case 'ok':
      case 'partial':
        this.lastSuccessAt = finishedAt;
        this.consecutiveFailures = 0;
        this.ticksToSkip = 0;
        this.lastFailureAt = null;
        break;
      case 'failed':
        this.consecutiveFailures += 1;
        this.lastFailureAt = finishedAt;
        this.ticksToSkip = ticksToSkipAfter(this.consecutiveFailures, this.policy);
        if (kind === 'full_refresh') this.fullRefreshPending = true;
        logger.error(
          {
            kind,
            consecutiveFailures: this.consecutiveFailures,
            ticksSkippedForBackoff: this.ticksToSkip,
            error: outcome.error,
          },
          'Sync run failed; the daemon keeps running',
        );
        break;
      case 'interrupted':
        // Shutdown: neither a success nor the server's fault.
        if (kind === 'full_refresh') this.fullRefreshPending = true;
        logger.info(
          { kind, status: 'interrupted' },
          'Sync run interrupted; every committed page is kept',
        );
        break;
    }
    try {
      // Awaited, so whenIdle (and shutdown) waits for what follows a run (its metrics pushed).
      await this.options.onRunFinished?.(outcome, recordedAs, this.status());
    } catch (error) {
      logger.warn({ error: describeError(error) }, 'Could not finish recording the run');
    }
  }

  /** Resolves when no run is in progress. */
  async whenIdle(): Promise<void> {
    while (this.current) {
      const current = this.current;
      await current;
      if (this.current === current) this.current = undefined;
    }
  }

  /** Stop the cron jobs; no run starts after this. The run in progress is not touched. */
  async stop(): Promise<void> {
    this.stopped = true;
    const jobs = this.jobs.splice(0);
    for (const { name, job } of jobs) {
      try {
        await job.stop();
      } catch (error) {
        this.options.logger.warn(
          { job: name, error: describeError(error) },
          'Could not stop a cron job',
        );
      }
    }
  }

  /** Milliseconds between the next two incremental ticks, when the cron job can tell. */
  scheduleIntervalMs(): number | undefined {
    const runs = this.jobs.find((entry) => entry.name === 'incremental')?.job.nextRuns?.(2);
    return runs && runs.length === 2 ? runs[1]!.getTime() - runs[0]!.getTime() : undefined;
  }

  status(): SchedulerStatus {
    const next = (name: string) =>
      this.jobs.find((entry) => entry.name === name)?.job.nextRuns?.(1)[0] ?? null;
    return {
      running: this.running,
      lastRun: this.lastRun,
      lastSuccessAt: this.lastSuccessAt,
      consecutiveFailures: this.consecutiveFailures,
      ticksToSkip: this.ticksToSkip,
      fullRefreshPending: this.fullRefreshPending,
      skippedTicks: { ...this.skippedTicks },
      nextRunAt: next('incremental'),
      nextFullRefreshAt: next('full_refresh'),
    };
  }
}

/**
 * Milliseconds between the next two ticks of a cron expression (for a `sync` whose scheduler is
 * a CronJob's): the task is made to ask it, never started.
 */
export function cronIntervalMs(expression: string, timezone: string): number | undefined {
  try {
    const task = nodeCron.createTask(expression, () => undefined, { timezone });
    try {
      const [first, second] = task.getNextRuns(2);
      return first && second ? second.getTime() - first.getTime() : undefined;
    } finally {
      void task.destroy();
    }
  } catch {
    return undefined;
  }
}

/** The real cron: node-cron, its own log lines sent to our logger. */
export function nodeCronScheduleFunction(logger: Logger): ScheduleFunction {
  const cronLogger: nodeCron.Logger = {
    info: (message) => logger.debug({ source: 'node-cron' }, message),
    warn: (message) => logger.warn({ source: 'node-cron' }, message),
    error: (message, error) =>
      logger.error(
        { source: 'node-cron', error: describeError(error ?? message) },
        String(message),
      ),
    debug: (message) => logger.debug({ source: 'node-cron' }, String(message)),
  };
  return (cronExpression, timezone, callback, name) => {
    const task = nodeCron.schedule(cronExpression, () => callback(), {
      timezone,
      name,
      logger: cronLogger,
    });
    return {
      stop: () => task.destroy(),
      nextRuns: (count) => task.getNextRuns(count),
    };
  };
}
