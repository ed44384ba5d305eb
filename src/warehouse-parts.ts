/**
 * The Warehouse interface and its parts, each small: what a sync writes (SyncWriter), the
 * bookkeeping of runs, cursors and state, the operator's column tools, analysts' reads, and the
 * stores of `serve` (archive), the audit chain and the file ledger. SQLite and PostgreSQL
 * implement the dialect-specific parts; the bookkeeping, audit and file-ledger stores are one
 * kysely implementation each, shared. Re-exported by interfaces.ts (the glossary).
 */
import type { TransferListItem } from 'node:worker_threads';
import type { AuditStore } from './audit-types.js';
import type { Row } from './export-types.js';
import type { FileLedgerStore } from './file-ledger-types.js';
import type {
  ArchiveRowQuery,
  ChatbotChoiceRecord,
  ColumnSpec,
  DeleteMode,
  ExportDocumentKind,
  IndexSpec,
  Lock,
  MissingUnderChoice,
  OriginalValue,
  PageWrite,
  PageWriteResult,
  ReferenceCheck,
  ResourceOutcome,
  ResourceState,
  ResourceStatus,
  RowBatchQuery,
  RunKind,
  RunSummary,
  SavedCursor,
  SchemaChange,
  StoredRow,
} from './warehouse-types.js';

/**
 * Where pages are written: encoded and committed with their cursors, in walk order, none after
 * a page of the same walk that failed (warehouse/commit-order.ts). The warehouse writes its own
 * through one; the sync's page thread opens one of its own (warehouse/open.ts, openPageSink).
 */
export interface PageSink {
  /** Hands a page over; resolves once it committed. */
  writePage(page: PageWrite): Promise<PageWriteResult>;
  /** The tables' shapes changed: statements prepared for them are dropped. */
  forget(): void;
  /** Waits for the pages handed over, then lets go of what the sink holds. */
  close(): Promise<void>;
}

/** What a thread needs to open a page sink on a warehouse: plain data and ports (posted to it). */
export interface PageSinkSetup {
  readonly dialect: 'sqlite' | 'postgres';
  /** The young generation of the thread the sink runs on, in MB (absent: V8's default). */
  readonly youngGenerationMb?: number;
}

/** What a sync writes: table shapes, pages with their cursors, and the rows a walk did not see. */
export interface SyncWriter {
  /** The stored logical columns of a table, or undefined when the table does not exist. */
  describeTable(table: string): Promise<ColumnSpec[] | undefined>;
  /** Create tables, add columns, widen columns; records each in `_ocs_schema_changes`. */
  applySchemaChanges(
    changes: SchemaChange[],
    checksums: { from: string | null; to: string | null },
  ): Promise<void>;
  /** Upsert rows by id and save the cursor, in one transaction. */
  writePage(page: PageWrite): Promise<PageWriteResult>;
  /** Saves a resource's cursor without rows (a full refresh's, once it has walked everything). */
  saveCursor(cursor: SavedCursor): Promise<void>;
  /**
   * How another thread (the sync's page thread) opens a page sink of its own on this warehouse:
   * the setup and the ports to transfer with it. Undefined when pages can only be written on
   * this thread, through writePage (SQLite without a writer thread: `:memory:`, or as planned by
   * src/page-threads.ts).
   */
  pageSinkSetup(): { setup: PageSinkSetup; transfer: TransferListItem[] } | undefined;
  /** Throws when this process no longer holds the writer lock (it was taken over). */
  assertLockHeld(): void;
  /** After a complete full refresh: rows of `table` not written by `runId` are marked or removed. */
  markMissingAsDeleted(
    table: string,
    runId: number,
    mode: DeleteMode,
    history: boolean,
  ): Promise<number>;
  /**
   * After a complete walk from the start under a chatbot choice: rows of `table` not written by
   * `runId` under `selection` are marked out of scope (a `scope_exit` history version each), or,
   * with `proofs`, marked or removed when they were last served under this same choice and a
   * proof holds for them. Never deletes anything else.
   */
  markMissingUnderChoice(
    table: string,
    runId: number,
    options: MissingUnderChoice,
  ): Promise<{ deleted: number; outOfScope: number }>;
}

/**
 * The warehouse's own records of runs, cursors, outcomes, state and chatbot choices
 * (`_ocs_runs`, `_ocs_resources`, `_ocs_state`, ...): one kysely implementation for both
 * dialects (warehouse/bookkeeping.ts), chained into the audit chain when it is on.
 */
export interface BookkeepingStore {
  startRun(kind: RunKind, schemaChecksum: string | null): Promise<number>;
  finishRun(runId: number, summary: RunSummary): Promise<void>;
  /** Whether a sync run has ended ok or partial here: false until the initial load is done. */
  hasLoaded(): Promise<boolean>;
  /** Small key/value bookkeeping (`last_schema_checksum`, ...). */
  getState(key: string): Promise<string | undefined>;
  setState(key: string, value: string): Promise<void>;
  getResourceState(resource: string): Promise<ResourceState | undefined>;
  recordResourceOutcome(outcome: ResourceOutcome): Promise<void>;
  /** Forget a resource's cursor so the next walk starts from the beginning. */
  resetCursor(resource: string): Promise<void>;
  /** Record `ocs-sync reset` of these resources as a run of kind `reset`; returns its id. */
  recordReset(resources: readonly string[], note: string): Promise<number>;
  /** Records the chatbot choice a run walks under (`_ocs_chatbot_choices`, `_ocs_runs`). */
  recordRunChoice(runId: number, choice: ChatbotChoiceRecord): Promise<void>;
  /** Every choice recorded, by key. */
  chatbotChoices(): Promise<Map<string, ChatbotChoiceRecord>>;
}

/**
 * The operator's tools that rewrite stored data (`unseal`, `reset --drop-table`); the rewrites
 * are refused while the audit chain is on.
 */
export interface WarehouseTools {
  /** Page through one column's values by id. */
  readColumn(
    table: string,
    column: string,
    afterId: string | null,
    limit: number,
  ): Promise<Array<{ id: string; value: unknown }>>;
  /** Overwrite one column's value for the given ids, in one transaction. */
  updateColumn(
    table: string,
    column: string,
    values: Array<{ id: string; value: unknown }>,
  ): Promise<void>;
  /** Drop a resource's table and its history table, forget its columns; logged as `drop_table`. */
  dropTable(table: string): Promise<void>;
}

/** Stored rows read back (exports, stable sealed values) and what analysts' queries lean on. */
export interface WarehouseReads {
  /** Creates the indexes that do not exist yet (`<table>__<column>_idx`); returns how many. */
  ensureIndexes(indexes: readonly IndexSpec[]): Promise<number>;
  /** Counts the values of `table.column` and those that are no id of `target`. */
  checkReference(table: string, column: string, target: string): Promise<ReferenceCheck>;
  /** Reads a batch of rows in id order, decoded. */
  readRows(query: RowBatchQuery): Promise<StoredRow[]>;
  /** Rows of `table` with these ids, decoded as readRows does (any order; missing ids left out). */
  readRowsById(
    table: string,
    columns: readonly ColumnSpec[],
    ids: readonly string[],
  ): Promise<StoredRow[]>;
}

/** The warehouse as `serve` reads it. Rows come decoded, live rows only (not marked deleted). */
export interface ArchiveStore {
  /** Keeps a served document per (kind, checksum); saving it again marks it the latest. */
  saveExportDocument(kind: ExportDocumentKind, checksum: string, body: string): Promise<void>;
  /** The document for a checksum, or (no checksum) the one saved last. */
  exportDocument(
    kind: ExportDocumentKind,
    checksum?: string,
  ): Promise<{ checksum: string; body: string } | undefined>;
  originalValues(resource: string, ids: readonly string[]): Promise<OriginalValue[]>;
  readRows(query: ArchiveRowQuery): Promise<Row[]>;
  /** Whether `<table>__history` exists. */
  hasHistory(table: string): Promise<boolean>;
}

/** What the sync engine and the commands need from a database. SQLite and PostgreSQL implement it. */
export interface Warehouse extends SyncWriter {
  readonly dialect: 'sqlite' | 'postgres';
  /** A description safe for logs (no password). */
  readonly description: string;
  /** Apply the project's own migrations from `schema/<dialect>/`; idempotent. */
  migrate(): Promise<void>;
  /**
   * Catches up with what other processes may have done since it opened: their migrations, the
   * audit chain turned on, the tables' shapes (what was prepared for them is forgotten). A
   * warehouse kept open between runs (the daemon's) calls it before each run after its first.
   */
  refresh(): Promise<void>;
  /**
   * Take the one-writer lock, waiting up to waitMs; throws LockHeldError naming the holder, or
   * InterruptedError as soon as `signal` aborts while waiting. The lock dies with its process (the
   * kernel or the database frees it), so a restart never waits for its own dead holder; runs a
   * dead holder left `running` are closed as `interrupted` once it is taken.
   */
  acquireLock(waitMs: number, signal?: AbortSignal): Promise<Lock>;
  /** Every resource's state with its row counts. */
  status(): Promise<ResourceStatus[]>;
  close(): Promise<void>;

  readonly bookkeeping: BookkeepingStore;
  readonly tools: WarehouseTools;
  readonly reads: WarehouseReads;
  /** What `serve` reads and the sync keeps for it (documents, original values, rows in order). */
  readonly archive: ArchiveStore;
  /** The audit chain (refused: dropTable, updateColumn and dropping columns while it is on). */
  readonly audit: AuditStore;
  /** The file ledger (`_ocs_files`) on this warehouse's connection. */
  fileLedger(): FileLedgerStore;
}
