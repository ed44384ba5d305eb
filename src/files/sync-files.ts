/**
 * The files step of a sync run: after the resources (so the `files` table is current), walk the
 * `files` rows in id order, plan which need their bytes fetched (plan.ts), fetch a bounded number
 * at once into the blob store while as many go on into place (two-stages.ts), and record each
 * outcome in the ledger once its blob is in place.
 */
import {
  AuthError,
  HttpStatusError,
  InterruptedError,
  ResponseTooLargeError,
  describeError,
} from '../errors.js';
import type {
  FileCandidate,
  FileLedgerStore,
  FileRecord,
  FileTotals,
  ProgressListener,
} from '../interfaces.js';
import type { Logger } from '../log.js';
import { repeatedEvents, type RepeatedKind } from '../repeated-events.js';
import type { ContentStore } from './content-store.js';
import { fetchFile, type FileContentSource } from './fetcher.js';
import { nextAttemptAt, planFetches, type PlannedFetch } from './plan.js';
import { forEachInTwoStages, type Received } from './two-stages.js';

export interface FilesReport {
  /** The blob store: its folder, or `s3://bucket/prefix`. */
  dir: string;
  /** `files` rows looked at. */
  rows: number;
  /** Blobs fetched and recorded in this run, and their bytes. */
  fetched: number;
  bytesFetched: number;
  /** 404s in this run (recorded `missing`; not a failure of the run). */
  missing: number;
  /** Fetches that failed in this run (recorded `failed`, retried next run). */
  failed: number;
  /** Rows whose bytes are already stored, or whose 404 is still in its back-off. */
  unchanged: number;
  /** Some of this run's failures (file id and reason), for the summary. */
  failures: Array<{ fileId: string; error: string }>;
  /** Why the step stopped before the end (the server stayed unavailable, the disk failed). */
  error?: string;
  /** The ledger after the step. */
  totals: FileTotals;
}

/** What the sync engine runs after the resources. */
export interface FilesStep {
  /** `progress` hears of each file done ("downloading file contents: 3 of 9 files"). */
  run(signal?: AbortSignal, progress?: ProgressListener): Promise<FilesReport>;
}

export interface FilesStepOptions {
  ledger: FileLedgerStore;
  store: ContentStore;
  source: FileContentSource;
  /** Downloads at once, and as many files stored at once. */
  concurrency: number;
  logger: Logger;
  /** Rows read from the warehouse at a time. */
  batchSize?: number;
  /** No file is stored larger (`files.max_file_mib`), whatever its row's `content_size` says. */
  maxFileBytes?: number;
  now?: () => number;
}

const FAILURES_SHOWN = 10;

export function createFilesStep(options: FilesStepOptions): FilesStep {
  return {
    run: async (signal, progress) => {
      try {
        return await syncFiles(options, signal, progress);
      } finally {
        options.store.close();
      }
    },
  };
}

const DOWNLOADING = 'downloading file contents';

/** Per file, at debug; one line for all of them at the end of the step (repeated-events.ts). */
const FILE_NOT_FOUND: RepeatedKind = {
  level: 'warn',
  message: 'File content not found on the server (404)',
  summary: (count) => `File content not found on the server (404) for ${count} files`,
};
/**
 * A note, not a failure: the server keeps `content_size` from the file's last save, and a stored
 * `files` row keeps the old one until a full refresh re-reads it (REFERENCE.md, File contents).
 * The bytes are trusted and the ledger records their real size.
 */
const SIZE_NOT_AS_ROW_SAYS: RepeatedKind = {
  level: 'info',
  message:
    "File stored with a size other than its row's content_size (a stale row; the bytes are kept as received)",
  summary: (count) =>
    `${count} files were stored with a size other than their row's content_size (stale rows; the bytes are kept as received, and \`ocs-sync sync --full-refresh files\` re-reads the rows)`,
};
const FILE_NOT_FETCHED: RepeatedKind = {
  level: 'error',
  message: 'Could not fetch file content',
  summary: (count) => `Could not fetch the content of ${count} files`,
};

export async function syncFiles(
  options: FilesStepOptions,
  signal?: AbortSignal,
  progress?: ProgressListener,
): Promise<FilesReport> {
  const { ledger, store, logger } = options;
  const now = options.now ?? Date.now;
  const batchSize = options.batchSize ?? 500;
  const report: FilesReport = {
    dir: store.location,
    rows: 0,
    fetched: 0,
    bytesFetched: 0,
    missing: 0,
    failed: 0,
    unchanged: 0,
    failures: [],
    totals: { ok: 0, missing: 0, failed: 0, blobs: 0, bytes: 0 },
  };
  const removed = await store.prepare();
  if (removed > 0) {
    logger.info(
      { removed },
      /^s3:\/\//i.test(store.location)
        ? `Aborted ${removed} unfinished uploads an interrupted run left in ${store.location}`
        : 'Removed partial downloads an interrupted run left behind',
    );
  }

  // Counted first (reads only), so progress can say "N of total"; nothing to fetch, nothing more.
  const counted = await countFetches(ledger, batchSize, now());
  let done = 0;
  progress?.({ stage: DOWNLOADING, done, total: counted.fetches, unit: 'files' });
  const fileDone = () => {
    done += 1;
    // The count can fall short by a 404 whose back-off ended since.
    progress?.({
      stage: DOWNLOADING,
      done,
      total: Math.max(done, counted.fetches),
      unit: 'files',
    });
  };

  const fetchOne = async (planned: PlannedFetch, received: Received): Promise<void> => {
    const base = { fileId: planned.fileId, file: planned.file, updatedAt: planned.updatedAt };
    let record: FileRecord;
    try {
      const fetched = await fetchFile(options.source, store, planned.fileId, {
        signal,
        maxBytes: options.maxFileBytes,
        received: async () => {
          // Its bytes in hand move the run (a daemon's /healthz), before it waits to be stored.
          progress?.({
            stage: DOWNLOADING,
            done,
            total: Math.max(done, counted.fetches),
            unit: 'files',
          });
          await received();
          // Interrupted while it waited for its turn: not stored, and fetched again next run.
          if (signal?.aborted) throw interrupted();
        },
      });
      const fetchedAt = new Date(now()).toISOString();
      if (fetched.status === 'ok') {
        const { contentSize } = planned;
        if (contentSize !== null && contentSize !== fetched.blob.size) {
          repeatedEvents(logger).add(SIZE_NOT_AS_ROW_SAYS, {
            id: planned.fileId,
            fields: { fileId: planned.fileId, contentSize, size: fetched.blob.size },
          });
        }
        record = {
          ...base,
          sha256: fetched.blob.sha256,
          size: fetched.blob.size,
          contentType: fetched.contentType,
          status: 'ok',
          error: null,
          fetchedAt,
          attempts: 0,
          nextAttemptAt: null,
        };
        report.fetched += 1;
        report.bytesFetched += fetched.blob.size;
      } else {
        const attempts =
          (planned.previous?.status === 'missing' ? planned.previous.attempts : 0) + 1;
        record = {
          ...base,
          ...nothingStored,
          status: 'missing',
          error: 'HTTP 404: the server has no content for this file',
          fetchedAt,
          attempts,
          nextAttemptAt: nextAttemptAt('missing', attempts, now()),
        };
        report.missing += 1;
        repeatedEvents(logger).add(FILE_NOT_FOUND, {
          id: planned.fileId,
          fields: { fileId: planned.fileId },
        });
      }
    } catch (error) {
      if (signal?.aborted) throw interrupted();
      if (error instanceof AuthError) throw error;
      const message = describeError(error);
      await ledger.record({
        ...base,
        ...nothingStored,
        status: 'failed',
        error: message,
        fetchedAt: new Date(now()).toISOString(),
        attempts: (planned.previous?.status === 'failed' ? planned.previous.attempts : 0) + 1,
        nextAttemptAt: null,
      });
      report.failed += 1;
      if (report.failures.length < FAILURES_SHOWN) {
        report.failures.push({ fileId: planned.fileId, error: message });
      }
      repeatedEvents(logger).add(FILE_NOT_FETCHED, {
        id: planned.fileId,
        fields: { fileId: planned.fileId, error: message },
      });
      fileDone();
      // A refused or oversized file is that file's problem; anything else (server gone, disk
      // full) would fail every file after it too.
      if (!(error instanceof HttpStatusError || error instanceof ResponseTooLargeError)) {
        // Its hint is on the file's own line already.
        throw new StopFiles(
          `at file ${planned.fileId}: ${error instanceof Error ? error.message : message}`,
        );
      }
      return;
    }
    await ledger.record(record);
    fileDone();
  };

  try {
    if (counted.fetches === 0) {
      report.rows = report.unchanged = counted.rows;
    } else {
      // One stream of fetches over the batches: a large file holds its own slot, never the
      // next batch's files back.
      const planned = async function* (): AsyncGenerator<PlannedFetch> {
        for await (const candidates of candidateBatches(ledger, batchSize)) {
          if (signal?.aborted) throw interrupted();
          report.rows += candidates.length;
          const fetches = planFetches(candidates, now());
          report.unchanged += candidates.length - fetches.length;
          yield* fetches;
        }
      };
      await forEachInTwoStages(planned(), Math.max(1, options.concurrency), fetchOne);
    }
  } catch (error) {
    if (!(error instanceof StopFiles)) throw error;
    report.error = `The files step stopped early: ${error.message}`;
  }
  repeatedEvents(logger).flush();
  report.totals = await ledger.totals();
  logger.info(
    {
      fetched: report.fetched,
      bytesFetched: report.bytesFetched,
      missing: report.missing,
      failed: report.failed,
      unchanged: report.unchanged,
      stored: report.totals,
    },
    `Files: ${report.fetched} fetched, ${report.totals.ok} stored`,
  );
  return report;
}

const nothingStored = { sha256: null, size: null, contentType: null } as const;

/** The live `files` rows with their ledger records, `batchSize` at a time in id order. */
async function* candidateBatches(
  ledger: FileLedgerStore,
  batchSize: number,
): AsyncGenerator<FileCandidate[]> {
  let afterId: string | null = null;
  for (;;) {
    const candidates = await ledger.candidates(afterId, batchSize);
    if (candidates.length === 0) return;
    afterId = candidates[candidates.length - 1]!.fileId;
    yield candidates;
  }
}

/** `files` rows, and how many of them need a fetch at `now`. */
async function countFetches(
  ledger: FileLedgerStore,
  batchSize: number,
  now: number,
): Promise<{ rows: number; fetches: number }> {
  let rows = 0;
  let fetches = 0;
  for await (const candidates of candidateBatches(ledger, batchSize)) {
    rows += candidates.length;
    fetches += planFetches(candidates, now).length;
  }
  return { rows, fetches };
}

/** Ends the files step (not the run): the rest of the files would fail the same way. */
class StopFiles extends Error {}

function interrupted(): InterruptedError {
  return new InterruptedError(
    'The run was interrupted; every recorded file is complete and the next run fetches the rest.',
  );
}
