/**
 * What both dialects' one-writer locks share: the lock's name, how a waiting writer asks again
 * (and stops waiting when its run is stopped), the heartbeat's pace, the error a writer that lost
 * its lock stops with, and what the new holder does about runs a dead one left `running`.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostname } from 'node:os';
import { InterruptedError, LockHeldError, WarehouseError } from '../errors.js';
import type { Lock } from '../interfaces.js';
import type { LockRecord } from './reader.js';

export interface WarehouseLogger {
  warn(obj: object, msg?: string): void;
  info?(obj: object, msg?: string): void;
}

/** The one row of `_ocs_lock`. */
export const LOCK_NAME = 'writer';
/** How often a waiting writer asks again. */
export const LOCK_POLL_MS = 250;
/**
 * A first refusal may be `check` or `status` looking at the lock for an instant: the second
 * attempt comes this soon, even when the writer would not wait at all (`lock.wait_seconds: 0`).
 */
const SECOND_ATTEMPT_MS = 50;

/** A lock just taken, and the record a holder that ended without releasing it left behind. */
export interface TakenLock extends Lock {
  previous?: LockRecord;
}

/** Heartbeat pace: a quarter of the stale age, between 1 and 5 seconds. */
export function heartbeatIntervalMs(lockStaleAfterMs: number): number {
  return Math.max(1000, Math.min(5000, lockStaleAfterMs / 4));
}

/**
 * Between two attempts at a held lock: throws LockHeldError naming the holder once `waitMs` have
 * passed, InterruptedError as soon as `signal` aborts (SIGTERM while waiting), else waits.
 */
export async function nextLockAttempt(options: {
  attempt: number;
  started: number;
  waitMs: number;
  signal?: AbortSignal;
  holder: LockRecord | undefined;
  logger?: WarehouseLogger;
}): Promise<void> {
  const { attempt, started, waitMs, signal, holder, logger } = options;
  const waited = performance.now() - started;
  if (attempt > 0 && waited >= waitMs) throw new LockHeldError(holder, waited);
  if (attempt === 0 && waitMs > 0) {
    logger?.info?.(
      { holder: holder && { pid: holder.pid, host: holder.host, since: holder.since } },
      `Waiting up to ${Math.round(waitMs / 1000)} s for the writer lock`,
    );
  }
  const pause =
    attempt === 0 ? SECOND_ATTEMPT_MS : Math.max(0, Math.min(LOCK_POLL_MS, waitMs - waited));
  try {
    await sleep(pause, undefined, { signal });
  } catch (error) {
    if (!signal?.aborted) throw error;
    throw new InterruptedError(
      'Stopped while waiting for the writer lock; nothing was written to the warehouse.',
    );
  }
}

/** The text a run closed by the next start keeps as its error (`runs` shows its start). */
function closedByNextStartNote(closer = { pid: process.pid, host: hostname() }): string {
  return (
    `Closed by the next start (pid ${closer.pid} on ${closer.host}): the process of this run ended ` +
    'without recording its end (killed, out of memory, or the machine stopped). Every page it ' +
    'committed is kept; the next run resumed from there.'
  );
}

/**
 * When a dead holder's run ended: its last heartbeat (within seconds of its death), never before
 * the run started; now when nothing better is known. In the fixed form of our time columns.
 */
function endOfDeadRun(startedAt: string, previous: LockRecord | undefined): string {
  const beat = previous ? Date.parse(previous.heartbeatAt) : NaN;
  const start = Date.parse(startedAt);
  const end = !Number.isFinite(beat)
    ? Date.now()
    : Number.isFinite(start)
      ? Math.max(beat, start)
      : beat;
  return `${new Date(end).toISOString().slice(0, 23)}000Z`;
}

/**
 * What a process does once it has taken the lock: closes the runs a holder that died left
 * `running` (bookkeeping.ts, `closeRunsLeftRunning`) and says what it found. Releases the lock
 * when that fails.
 */
export async function closeRunsOfDeadHolders(
  taken: TakenLock,
  closeRunsLeftRunning: (note: string, endOf: (startedAt: string) => string) => Promise<number[]>,
  logger: WarehouseLogger | undefined,
): Promise<Lock> {
  try {
    const closed = await closeRunsLeftRunning(closedByNextStartNote(), (startedAt) =>
      endOfDeadRun(startedAt, taken.previous),
    );
    logTakeOver(logger, taken.previous, closed);
  } catch (error) {
    await taken.release();
    throw error;
  }
  return { release: taken.release };
}

/** Logs what the new holder found: the record a dead holder left, the runs it closed. */
function logTakeOver(
  logger: WarehouseLogger | undefined,
  previous: LockRecord | undefined,
  closedRuns: readonly number[],
): void {
  if (!logger) return;
  const holder = previous && { pid: previous.pid, host: previous.host, since: previous.since };
  if (closedRuns.length > 0) {
    logger.warn(
      { runs: closedRuns, holder },
      `Closed ${closedRuns.length === 1 ? `run ${closedRuns[0]}` : `runs ${closedRuns.join(', ')}`} as interrupted: its process ended without recording its end; every committed page is kept`,
    );
  } else if (previous) {
    logger.warn(
      { holder },
      'Took over the writer lock of a process that ended without releasing it',
    );
  }
}

export function lockLostError(what: string, hint: string): WarehouseError {
  return new WarehouseError(`This ocs-sync lost the warehouse lock (${what}); stopping writes.`, {
    hint,
  });
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
