/**
 * The file ledger (`_ocs_files`): what each `files` row's content fetch found, as the files step
 * of a sync, `files verify`, `serve` and `status` see it. Re-exported by interfaces.ts.
 */
/** What the last attempt to fetch a file's bytes found: stored, 404 (no blob), or an error. */
export type FileStatus = 'ok' | 'missing' | 'failed';

/** One `_ocs_files` row: the newest fetch attempt of one `files` row's content. */
export interface FileRecord {
  /** The `files` row id, decimal. */
  fileId: string;
  /** Hex digest of the stored blob; set when status is `ok`. */
  sha256: string | null;
  size: number | null;
  /** As the server sent it with the bytes. */
  contentType: string | null;
  status: FileStatus;
  /** Why the last attempt failed (safe to show). */
  error: string | null;
  /** The row's `updated_at` and `file` the attempt was made for (a change makes us refetch). */
  updatedAt: string | null;
  file: string | null;
  /** When the last attempt finished, ISO text. */
  fetchedAt: string;
  /** Attempts in a row that did not store the blob (0 once stored). */
  attempts: number;
  /** A `missing` row waits until then before another attempt (ISO text); null otherwise. */
  nextAttemptAt: string | null;
}

export interface FileTotals {
  ok: number;
  missing: number;
  failed: number;
  /** Distinct blobs referenced by `ok` rows, and their bytes (each content counted once). */
  blobs: number;
  bytes: number;
}

/** The read side of the file ledger: what `serve` and `status` need. */
export interface FileLedger {
  get(fileId: string): Promise<FileRecord | undefined>;
  totals(): Promise<FileTotals>;
}

/** A `files` row as stored, with its ledger record, for planning what to fetch. */
export interface FileCandidate {
  fileId: string;
  file: string | null;
  /** The row's `updated_at` in the fixed form `YYYY-MM-DDTHH:MM:SS.ffffffZ`, or null. */
  updatedAt: string | null;
  /** The row's `content_size` when it is a positive whole number (null and 0 say nothing). */
  contentSize: number | null;
  record: FileRecord | undefined;
}

/** The whole file ledger, as the files step of a sync and `files verify` use it. */
export interface FileLedgerStore extends FileLedger {
  /** Live `files` rows with id above `afterId` (null: from the start), in id order. */
  candidates(afterId: string | null, limit: number): Promise<FileCandidate[]>;
  /** Ledger rows with file id above `afterId`, in id order. */
  records(afterId: string | null, limit: number): Promise<FileRecord[]>;
  record(record: FileRecord): Promise<void>;
}
