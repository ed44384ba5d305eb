/**
 * What both dialects' one-writer locks share: the lock's name, how often they poll and beat, how a
 * holder's death is recognised, and the error a writer that lost its lock stops with.
 */
import { WarehouseError } from '../errors.js';

export interface WarehouseLogger {
  warn(obj: object, msg?: string): void;
}

/** The one row of `_ocs_lock`. */
export const LOCK_NAME = 'writer';
/** How often a waiting writer asks again. */
export const LOCK_POLL_MS = 250;

/** Heartbeat pace: a quarter of the stale age, between 1 and 5 seconds. */
export function heartbeatIntervalMs(lockStaleAfterMs: number): number {
  return Math.max(1000, Math.min(5000, lockStaleAfterMs / 4));
}

export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
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
