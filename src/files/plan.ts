/**
 * What to fetch, decided without I/O: a `files` row's bytes are fetched when the ledger has no
 * record of them, when the row changed (`file` path or `updated_at`) since, when the last attempt
 * failed, or, for a 404, once its back-off has passed.
 */
import type { FileCandidate, FileRecord, FileStatus } from '../interfaces.js';

export type FetchReason = 'new' | 'changed' | 'retry_failed' | 'retry_missing';

export interface PlannedFetch {
  fileId: string;
  file: string | null;
  updatedAt: string | null;
  /** The row's `content_size` (a positive number), or null when it gives none. */
  contentSize: number | null;
  reason: FetchReason;
  /** The ledger's record before this fetch (its attempt count drives the back-off). */
  previous: FileRecord | undefined;
}

/** First wait after a 404; it doubles with each 404 in a row, up to MISSING_BACKOFF_MAX_MS. */
export const MISSING_BACKOFF_MS = 60 * 60 * 1000;
export const MISSING_BACKOFF_MAX_MS = 7 * 24 * 60 * 60 * 1000;

/** Pure: the fetches one batch of candidates needs at `now` (epoch ms). */
export function planFetches(candidates: readonly FileCandidate[], now: number): PlannedFetch[] {
  const planned: PlannedFetch[] = [];
  for (const candidate of candidates) {
    const reason = fetchReason(candidate, now);
    if (reason === undefined) continue;
    planned.push({
      fileId: candidate.fileId,
      file: candidate.file,
      updatedAt: candidate.updatedAt,
      contentSize: candidate.contentSize,
      reason,
      previous: candidate.record,
    });
  }
  return planned;
}

export function fetchReason(candidate: FileCandidate, now: number): FetchReason | undefined {
  const { record } = candidate;
  if (!record) return 'new';
  if (record.file !== candidate.file || record.updatedAt !== candidate.updatedAt) return 'changed';
  if (record.status === 'failed') return 'retry_failed';
  if (record.status === 'missing') {
    const due = record.nextAttemptAt === null ? 0 : Date.parse(record.nextAttemptAt);
    return !Number.isFinite(due) || due <= now ? 'retry_missing' : undefined;
  }
  return undefined;
}

/**
 * When a row that stored nothing may be tried again. A failure is retried on the next run; a 404
 * (the server has no blob) waits an hour, then twice as long after each 404 in a row, up to a week:
 * blobs rarely come back, and each try costs a request of the team's budget.
 */
export function nextAttemptAt(status: FileStatus, attempts: number, now: number): string | null {
  if (status !== 'missing') return null;
  const wait = Math.min(
    MISSING_BACKOFF_MAX_MS,
    MISSING_BACKOFF_MS * 2 ** Math.max(0, attempts - 1),
  );
  return new Date(now + wait).toISOString();
}
