/**
 * Glossary
 *
 * - Server: an Open Chat Studio instance; we read its team-export API (`/api/export/`).
 * - Manifest: the server's list of resources in dependency order, with each one's cursor kind and
 *   whether some of its fields are sealed, plus a checksum of the export schema.
 * - Resource: one exported model (`chat_messages`, `participants`, ...). One warehouse table each,
 *   named exactly as the resource.
 * - Page: one response of a resource: up to `limit` rows plus the cursor to ask for the next page.
 * - Cursor: where a resource walk resumes. `pk` resources: the last id as a decimal string.
 *   `updated_at_id` resources: base64 of `{"updated_at", "id"}` of the last row.
 * - Warehouse: where rows land (SQLite file or PostgreSQL schema). A Dialect implements it.
 * - Sealed field: a field the server encrypts under the team's public key; a secrets policy says
 *   what we store for it. The manifest only says a resource has some (`secret`); which fields is
 *   read from the OpenAPI field descriptions and from the shape of the values (sealed-fields.ts).
 * - Run: one `sync` pass over the manifest; recorded in `_ocs_runs`.
 * - Full refresh: a walk from the start that also finds rows the server no longer has.
 * - Logical column type: our database-neutral type of a column; each dialect maps it to SQL.
 * - Blob: the bytes of one `files` row (`GET /api/files/{id}/content`), stored once per content
 *   under its SHA-256 in the blob store; `_ocs_files` (the file ledger) says which row has which.
 * - Live view: `<table>__live`, a resource table's rows not marked deleted.
 * - Relationship: an integer column whose values are ids of another table, found by name and
 *   verified against the stored data (src/sync/relationships.ts).
 * - Excluded field: a field `exclude_fields` keeps out of the warehouse (table and history).
 * - Original value: the server's text of a value its column would give back differently, kept in
 *   `_ocs_original_values` so `serve` answers exactly as the server did.
 * - Canonical content: the text of a row's data fields defined from the server's values
 *   (warehouse/canonical.ts); its SHA-256 is a history version's `_content_hash`.
 * - Audit chain: `_ocs_audit`, one entry per history version, run record, reset and file-ledger
 *   record, each hashing the one before (warehouse/audit-chain.ts). On from a warehouse's first
 *   run (`audit.enabled`), it stays on.
 * - Checkpoint: the chain's head (last sequence number and hash) signed with the operator's
 *   Ed25519 key at the end of a run, kept in `_ocs_audit_checkpoints` and in a file shipped
 *   elsewhere, so a chain rebuilt without the key is caught (src/audit/).
 * - Chatbot choice: the chatbots a team admin lets the export serve (newer servers, `team/`'s
 *   `exportable_chatbots`); none chosen means the whole team. Its selection key (`all`, or 32 hex
 *   digits) goes with every page request as `selection` (src/sync/chatbot-choice.ts).
 * - Scope: how the manifest classes a resource under a choice: `owned` (a chatbot's own rows),
 *   `referenced` (shared rows the chosen chatbots reach), `excluded` (served empty).
 * - Out of scope: a row the current choice does not serve (the server may still have it);
 *   marked `_ocs_out_of_scope_since`, never `_deleted_at`.
 * - Page pipeline: a walk's pages, from the bytes the sync's thread fetched to rows committed with
 *   their cursors: the page thread parses and prepares them, a page sink writes them (SQLite's on
 *   its writer thread) in walk order (src/sync/pipeline/).
 * - Deletion proof: under a choice, what shows a missing row last served under the same choice is
 *   gone from the server and not merely out of scope: its resource is owned (a chatbot's own rows
 *   never leave an unchanged choice), or the rows served in the same full refresh still reach it
 *   (src/sync/choice-reach.ts).
 * - Progress: a stage of a run moving one step (a page committed, a file stored, deleted rows
 *   marked). Every stage reports its steps to the run's ProgressListener; the daemon's /healthz
 *   counts any step as life and names the latest.
 */

import type { TransferListItem } from 'node:worker_threads';
import type { FileLedgerStore } from './file-ledger-types.js';

export type {
  FileCandidate,
  FileLedger,
  FileLedgerStore,
  FileRecord,
  FileStatus,
  FileTotals,
} from './file-ledger-types.js';

export type CursorKind = 'pk' | 'updated_at_id';

export interface ManifestEntry {
  /** Django model label, e.g. `chat.chatmessage`. */
  model: string;
  /** Resource name: URL segment and table name. */
  resource: string;
  cursor: CursorKind;
  /** True when some fields of every row are sealed (the manifest does not say which). */
  secret: boolean;
  /** The server's class of the resource under a chatbot choice, as sent; absent on older servers. */
  scope?: string;
}

export interface Manifest {
  schemaChecksum: string;
  entries: ManifestEntry[];
}

/** One row as the server sent it. `id` is a number, or a bigint past 2^53. */
export type Row = Record<string, unknown> & { id: number | bigint };

export interface Page {
  rows: Row[];
  /** Cursor for the next page as the server gave it; null on the last page. */
  cursor: string | null;
  hasMore: boolean;
  /** True when the server answered with a bare JSON array instead of `{cursor, has_more, results}`. */
  bare: boolean;
  /**
   * `cursor` and `has_more` as the body's first bytes said them, when it started with them and
   * the caller asked (`onHead`): the walk checks them against the full parse.
   */
  head?: PageHead;
}

export interface PageBodyOptions<T> {
  signal?: AbortSignal;
  /** The chatbot choice's key (see ExportSource.page). */
  selection?: string;
  /** Told the page's `cursor` and `has_more` as soon as the body's first bytes hold them. */
  onHead?: (head: PageHead) => void;
  /**
   * Turns the body's bytes (a buffer of their own, which may be transferred) into the answer.
   * Throws source/page-body.ts's BodyNotJsonError for a body that is not JSON (asked again),
   * JsonTooDeepError for JSON nested too deep, anything else to fail the page.
   */
  decode(body: Uint8Array): T | Promise<T>;
}

/** `cursor` and `has_more` read from the first bytes of a page body, before the rest arrived. */
export interface PageHead {
  /** '' and null both mean none, as in Page.cursor. */
  cursor: string | null;
  hasMore: boolean;
}

/** One step of a stage of a run (glossary: Progress), e.g. "downloading file contents: 3 of 9 files". */
export interface StageProgress {
  /** What is being done, for people: `syncing chat_messages`, `downloading file contents`. */
  stage: string;
  /** Steps of this stage done so far ... */
  done: number;
  /** ... of this many, when the stage knows. */
  total?: number;
  /** What a step is: `rows`, `files`. */
  unit: string;
}

/**
 * Told of every step of every stage of a run, as it happens. Any stage may call it (the walk, the
 * files step, deletion marking; later ones too): it must be cheap and must not throw.
 */
export type ProgressListener = (progress: StageProgress) => void;

/** The server's export API, seen from the sync engine. `HttpExportSource` is the real one. */
export interface ExportSource {
  /** `signal` (the run's) ends retries, their waits and pacing at once, as for every request. */
  manifest(signal?: AbortSignal): Promise<Manifest>;
  team(signal?: AbortSignal): Promise<Record<string, unknown>>;
  /**
   * The export OpenAPI document, or undefined when the server does not publish it (404, not JSON
   * or YAML, no answer): the schema is optional, the rows are the fallback.
   */
  openApi(signal?: AbortSignal): Promise<unknown>;
  /**
   * `selection`: the chatbot choice's key, sent only to a server that speaks the scoped protocol.
   * `onHead`: told, as soon as an answer's first bytes hold them, the page's `cursor` and
   * `has_more` (once per attempt whose body starts with them), so the next request can leave
   * before this body has arrived; the page then carries that head for the caller to check.
   */
  page(
    resource: string,
    cursor: string | null,
    limit: number,
    signal?: AbortSignal,
    selection?: string,
    onHead?: (head: PageHead) => void,
  ): Promise<Page>;
  /**
   * A page's body as bytes, handed to `decode` (on this thread or another: the sync's page thread
   * parses it) inside the request's attempt: a body `decode` finds is not JSON is asked for again.
   */
  pageBody<T>(
    resource: string,
    cursor: string | null,
    limit: number,
    options: PageBodyOptions<T>,
  ): Promise<{ value: T; head?: PageHead }>;
  close(): Promise<void>;
  /** HTTP requests sent so far, retries included (for run records and the benchmark). */
  readonly requestCount?: number;
}

/**
 * Logical column types, database-neutral. `integer` is a 64-bit integer, `number` a double,
 * `decimal` an exact number that holds both (what an integer column becomes when a fraction
 * arrives, so stored ids past 2^53 are never rounded). Widening order (a value that does not fit
 * moves its column up, never down): integer | number -> decimal -> json; boolean -> json;
 * date | datetime -> text -> json.
 */
export type ColumnType =
  'integer' | 'number' | 'decimal' | 'boolean' | 'text' | 'datetime' | 'date' | 'json';

export interface ColumnSpec {
  name: string;
  type: ColumnType;
}

/** A resource table's data columns (not `id`, not our `_` columns), in a stable order. */
export interface TableSpec {
  table: string;
  columns: ColumnSpec[];
}

export type SchemaChangeKind = 'create_table' | 'add_column' | 'widen_column' | 'drop_column';

export interface SchemaChange {
  kind: SchemaChangeKind;
  table: string;
  /** Absent for create_table. */
  column?: string;
  /** create_table only: the new table's data columns. */
  columns?: ColumnSpec[];
  fromType?: ColumnType;
  toType?: ColumnType;
  /**
   * Why: 'schema' (server's OpenAPI), 'rows' (seen in data), 'value' (a value that did not fit),
   * 'excluded' (drop_column: the field is listed in `exclude_fields`).
   */
  reason: 'schema' | 'rows' | 'value' | 'excluded';
}

/** Which fields of one resource hold sealed values (src/sync/sealed-fields.ts finds them). */
export interface SealedFields {
  /** Marked by the server's schema: a value there that is not sealed is refused, never stored. */
  readonly marked: ReadonlySet<string>;
  /** Every field known to hold sealed values: marked, or seen with a sealed value. */
  readonly all: ReadonlySet<string>;
}

/** A resource's cursor saved alone, as a page saves it with its rows (`_ocs_resources`). */
export interface SavedCursor {
  runId: number;
  resource: string;
  cursor: string;
  cursorKind: CursorKind;
  /** The chatbot choice's key the walk was served under (as PageWrite.selection). */
  selection?: string;
}

export interface PageWrite {
  runId: number;
  resource: string;
  /** The table's full current column list (data columns only), as stored by the warehouse. */
  columns: ColumnSpec[];
  rows: Row[];
  /**
   * The cursor to resume from after this page, saved in the same transaction as the rows.
   * null leaves the stored cursor as it is (the `team` table; full-refresh walks).
   */
  cursor: string | null;
  cursorKind: CursorKind | null;
  /** Keep every version in `<resource>__history`. */
  history: boolean;
  /**
   * The chatbot choice's key the page was requested under (`all` for the whole team): stored with
   * each row (`_ocs_served_under`) and with the cursor. Undefined is the whole team.
   */
  selection?: string;
  /**
   * Pages handed over with the same walk commit in order and none after one of them failed, so
   * the caller may hand over the next page before this one has committed (commit-order.ts).
   * Unique per warehouse: the sync uses `<run id>/<resource>`.
   */
  walk?: string;
  /** The originals of values the columns give back differently: saved with the page, atomically. */
  originals?: readonly OriginalValue[];
  /** The server's own JSON text of the rows' object and array values: json columns store it. */
  jsonTexts?: JsonTexts;
}

/**
 * The text a page body gave its rows' JSON values (objects and arrays), so a json column stores
 * what the server wrote instead of parsing it and writing it again.
 */
export interface JsonTexts {
  /**
   * A look-up of the texts of these fields (the table's json columns): the text of `value` as the
   * body gave it for that field of that row, or undefined when the body did not (the value is not
   * the one parsed from it, or not an object or array).
   */
  forFields(
    fields: readonly string[],
  ): (row: number, field: string, value: unknown) => string | undefined;
}

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
}

export interface PageWriteResult {
  rowsWritten: number;
  /** Values changed to fit the database (PostgreSQL: `\u0000` removed). */
  valuesAltered: number;
  /** Rows whose content differed from the stored version (history only; else 0). */
  versionsWritten: number;
}

/**
 * `initial`: a sync of a warehouse no run has yet loaded (every sync run until the first that
 * ends ok or partial: the initial load, however many runs it takes). `reset`: `ocs-sync reset`
 * forgot cursors (and maybe dropped tables); no data moved.
 */
export type RunKind = 'initial' | 'incremental' | 'full_refresh' | 'reset';
export type RunStatus = 'running' | 'ok' | 'partial' | 'failed' | 'interrupted';

export interface RunSummary {
  status: RunStatus;
  rows: number;
  pages: number;
  requests: number;
  error?: string;
}

/** `excluded`: not requested, the server serves it empty under the team's chatbot choice. */
export type ResourceOutcomeStatus = 'ok' | 'skipped' | 'failed' | 'excluded';

export interface ResourceOutcome {
  runId: number;
  resource: string;
  status: ResourceOutcomeStatus;
  rows: number;
  pages: number;
  durationMs: number;
  /** Safe-to-show reason (never a secret). */
  error?: string;
}

export interface ResourceState {
  resource: string;
  cursor: string | null;
  cursorKind: CursorKind | null;
  /** The chatbot choice's key the cursor was committed under (null or absent: the whole team). */
  cursorSelection?: string | null;
  lastRunId: number | null;
  lastSuccessAt: string | null;
  lastError: string | null;
  lastErrorAt: string | null;
  lastFullRefreshAt: string | null;
  /** Set while the team's chatbot choice excludes the resource (not requested since). */
  excludedAt?: string | null;
}

export interface ResourceStatus extends ResourceState {
  rows: number;
  rowsDeleted: number;
  /** Live rows marked out of the team's chatbot choice (absent: none). */
  rowsOutOfScope?: number;
  /** Newest `updated_at` stored, ISO text, when the table has that column. */
  newestUpdatedAt: string | null;
}

export interface LockHolder {
  pid: number;
  host: string;
  since: string;
}

export interface Lock {
  release(): Promise<void>;
}

export type DeleteMode = 'mark' | 'remove';

export interface MissingUnderChoice {
  selection: string;
  /**
   * Given after a complete full refresh under the choice: a missing row last served under it is
   * deleted (marked or removed by `mode`) when one of these shows the server no longer has it.
   * Absent: nothing is deleted, every missing row is marked out of scope.
   */
  proofs?: readonly DeletionProof[];
  mode: DeleteMode;
  history: boolean;
}

/**
 * Why a row that a full refresh under a chatbot choice did not see is gone from the server,
 * rather than out of the choice (planned in sync/choice-reach.ts, tested in SQL by the
 * warehouse). "Served" means written by this run under this choice.
 * - `owned`: the resource is a chatbot's own (manifest `owned`): a row last served under this same
 *   choice belongs to a chosen chatbot for its whole life, so the choice would serve it still.
 * - `every_row`: the resource is served whole under any choice (users, tags, ...).
 * - `named_by`: a served row of `table` names it in `column` (a list of ids when `list`), a link
 *   the choice follows: the server would have served it.
 * - `names`: it names a served row of `table` in `column`, the link the choice reaches it by.
 * - `parent_gone`: its required `column` names a row of `table` (walked completely in this run)
 *   the warehouse holds as deleted, or not at all: the server cannot keep a row whose required
 *   parent it deleted.
 */
export type DeletionProof =
  | { kind: 'owned' }
  | { kind: 'every_row' }
  | { kind: 'named_by'; table: string; column: string; list: boolean }
  | { kind: 'names'; column: string; table: string }
  | { kind: 'parent_gone'; column: string; table: string };

/** A chatbot choice as recorded: its key and the chatbots (public id, name) it stood for. */
export interface ChatbotChoiceRecord {
  key: string;
  chatbots: Array<{ publicId: string; name: string }>;
}

/** Why a `<resource>__history` version was written (`_ocs_version_kind`). */
export type VersionKind = 'served' | 'scope_exit' | 'scope_return';

/** An index ocs-sync keeps on one column of a resource table (references, `updated_at`). */
export interface IndexSpec {
  table: string;
  column: string;
}

/** How the values of an integer column match the ids of another table. */
export interface ReferenceCheck {
  /** Non-null values in the column. */
  values: number;
  /** Of those, values that are no id of the target table. */
  unmatched: number;
}

/** A batch of stored rows in id order (for exports). */
export interface RowBatchQuery {
  table: string;
  /** The table's data columns (describeTable). */
  columns: readonly ColumnSpec[];
  /** Decimal text of the last id of the previous batch; null for the first. */
  afterId: string | null;
  limit: number;
  /** Leave out the rows marked deleted. */
  live: boolean;
  /** JSON columns as their stored JSON text, not parsed (exports write the text as it is). */
  jsonAsText?: boolean;
}

/**
 * One stored row: `id` and the data columns decoded as readColumn does (date-times in the
 * server's text form, JSON parsed), plus `_synced_at`, `_run_id` and `_deleted_at`.
 */
export type StoredRow = Record<string, unknown> & { id: number | bigint };

/** What the sync engine needs from a database. SQLite and PostgreSQL implement it. */
export interface Warehouse {
  readonly dialect: 'sqlite' | 'postgres';
  /** A description safe for logs (no password). */
  readonly description: string;
  /** Apply the project's own migrations from `schema/<dialect>/`; idempotent. */
  migrate(): Promise<void>;
  /**
   * Take the one-writer lock, waiting up to waitMs; throws LockHeldError naming the holder, or
   * InterruptedError as soon as `signal` aborts while waiting. The lock dies with its process (the
   * kernel or the database frees it), so a restart never waits for its own dead holder; runs a
   * dead holder left `running` are closed as `interrupted` once it is taken.
   */
  acquireLock(waitMs: number, signal?: AbortSignal): Promise<Lock>;

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
  /** Records the chatbot choice a run walks under (`_ocs_chatbot_choices`, `_ocs_runs`). */
  recordRunChoice(runId: number, choice: ChatbotChoiceRecord): Promise<void>;
  /** Every choice recorded, by key. */
  chatbotChoices(): Promise<Map<string, ChatbotChoiceRecord>>;

  /** Page through one column's values by id (for tools such as `unseal`). */
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

  /** Creates the indexes that do not exist yet (`<table>__<column>_idx`); returns how many. */
  ensureIndexes(indexes: readonly IndexSpec[]): Promise<number>;
  /** Counts the values of `table.column` and those that are no id of `target`. */
  checkReference(table: string, column: string, target: string): Promise<ReferenceCheck>;
  /** Reads a batch of rows in id order, decoded. */
  readRows(query: RowBatchQuery): Promise<StoredRow[]>;

  status(): Promise<ResourceStatus[]>;
  /** What `serve` reads and the sync keeps for it (documents, original values, rows in order). */
  readonly archive: ArchiveStore;
  /** The file ledger (`_ocs_files`) on this warehouse's connection. */
  fileLedger(): FileLedgerStore;
  close(): Promise<void>;

  /** Drop a resource's table and its history table, forget its columns; logged as `drop_table`. */
  dropTable(table: string): Promise<void>;
  /** The audit chain (refused: dropTable, updateColumn and dropping columns while it is on). */
  readonly audit: AuditStore;
  /** Rows of `table` with these ids, decoded as readRows does (any order; missing ids left out). */
  readRowsById(
    table: string,
    columns: readonly ColumnSpec[],
    ids: readonly string[],
  ): Promise<StoredRow[]>;
  /** Record `ocs-sync reset` of these resources as a run of kind `reset`; returns its id. */
  recordReset(resources: readonly string[], note: string): Promise<number>;
}

/** A value a column gives back differently from the server's text, kept to serve it exactly. */
export interface OriginalValue {
  /** Row id, decimal text. */
  id: string;
  column: string;
  /** sha256 hex of the JSON text of what the column gives back. */
  servedHash: string;
  /** The server's value as JSON text. */
  original: string;
}

export type ExportDocumentKind = 'manifest' | 'openapi';

export interface ArchiveRowQuery {
  table: string;
  /** Data columns to read (not `id`), in output order. */
  columns: readonly ColumnSpec[];
  order: CursorKind;
  /** Rows after this position: `updatedAt` (any ISO 8601) for `updated_at_id`. */
  after: { id: bigint; updatedAt?: string } | null;
  limit: number;
  /** Read the versions valid at this instant (ISO 8601) from `<table>__history`. */
  asOf?: string;
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

// ---------------------------------------------------------------- audit

/**
 * What a chain entry records. Versions: `create`, `change` (open a version), `delete`, `remove`
 * (close it by a full refresh), `scope_exit`, `scope_return` (the team's chatbot choice stopped or
 * started serving the row again); records: `insert`, `update`. An open set: a new kind is added
 * here and in AUDIT_OPERATIONS (warehouse/audit-chain.ts), whose rules `audit verify` replays.
 */
export type AuditOperation =
  'create' | 'change' | 'delete' | 'remove' | 'scope_exit' | 'scope_return' | 'insert' | 'update';

/** An entry before it is linked into the chain. */
export interface PendingEntry {
  /** The run it belongs to; null for a record written outside a run (`files verify --refetch`). */
  runId: number | null;
  table: string;
  /** Row id (resource rows, runs) or key (file ledger), decimal. */
  rowId: string;
  operation: AuditOperation;
  /** Versions: `_valid_from` (opening) or `_valid_to` (closing); records: when written. Fixed form. */
  at: string;
  /** Versions: the version's `_content_hash`; records: the record's digest. sha256 hex. */
  digest: string;
}

/** One `_ocs_audit` row. */
export interface AuditEntry extends PendingEntry {
  seq: number;
  prevHash: string;
  hash: string;
}

export interface ChainHead {
  seq: number;
  hash: string;
}

/** What a checkpoint says; signed as its canonical JSON text (checkpointText). */
export interface CheckpointBody {
  format: 'ocs-sync audit checkpoint v1';
  /** The newest run recorded when it was made. */
  run: number | null;
  /** Last sequence number, and that entry's hash (the head). */
  seq: number;
  head: string;
  /** The previous checkpoint's sequence number (0 for the first). */
  previous_seq: number;
  /** Entries per operation in (previous_seq, seq]. */
  counts: Record<string, number>;
  /** When it was made, fixed form. */
  time: string;
  /** The Ed25519 public key that signs it, base64. */
  key: string;
}

export interface SignedCheckpoint extends CheckpointBody {
  /** Ed25519 signature of checkpointText(body), base64. */
  signature: string;
}

export interface CheckpointSigner {
  /** The public key, base64. */
  publicKey: string;
  /** Signs the text (UTF-8); the signature in base64. The private key stays inside. */
  sign(text: string): string;
}

/** What the end of a run did for the audit chain (src/audit/checkpoints.ts). */
export interface AuditOutcome {
  /** The checkpoint signed and stored, when a signing key is configured. */
  checkpoint?: { run: number | null; seq: number; head: string };
  /** Lines appended to the checkpoint file. */
  appended?: number;
  checkpointFile?: string;
  /** Why the checkpoint could not be written or appended (the run's data is kept). */
  error?: string;
}

/** The outcome of the last `audit verify`, kept for `status`. */
export interface VerificationRecord {
  at: string;
  intact: boolean;
  entries: number;
  problems: number;
  /** The first broken link, in words. */
  first?: string;
  /** Whether checkpoint signatures were checked against a public key. */
  signatures: boolean;
  checkpoints: number;
}

/** The audit chain as a warehouse keeps it. */
export interface AuditStore {
  /** Whether this warehouse keeps an audit chain. Once on, it stays on. */
  readonly enabled: boolean;
  /**
   * Turns the chain on; nothing when it is on already. Refused (AuditError) for a warehouse that
   * already holds runs or tables without a chain: the chain must witness everything from the first.
   */
  enable(): Promise<void>;
  /** Signs and stores a checkpoint of the head; undefined when the chain is empty. */
  checkpoint(signer: CheckpointSigner): Promise<SignedCheckpoint | undefined>;
  /** The stored checkpoints past a sequence number (default: all), oldest first. */
  checkpoints(afterSeq?: number): Promise<SignedCheckpoint[]>;
  /** One consistent read of everything `audit verify` needs. */
  snapshot(): Promise<AuditSnapshot>;
  recordVerification(record: VerificationRecord): Promise<void>;
}

/** A resource table as verify walks it. */
export interface AuditedTable {
  table: string;
  columns: ColumnSpec[];
  /** Whether the resource table and its history table exist. */
  live: boolean;
  history: boolean;
}

/** A history version read back: values decoded as readRows decodes them. */
export interface StoredVersion {
  id: string;
  versionId: string;
  values: Row;
  /** `_ocs_served_under`: the chatbot choice's key it was served under (part of its content). */
  servedUnder: string | null;
  validFrom: string;
  validTo: string | null;
  contentHash: string;
  /** `_ocs_version_kind`. */
  kind: string;
}

/** A live row read back: its values decoded, and our own columns (times in the fixed form). */
export interface LiveRow {
  id: string;
  values: Row;
  servedUnder: string | null;
  deletedAt: string | null;
  outOfScopeSince: string | null;
}

/** A bookkeeping record read back: its key and the digest of what it holds. */
export interface StoredRecord {
  key: string;
  digest: string;
}

/**
 * Everything `audit verify` reads, from one consistent view of the warehouse. Every list is read
 * in batches after a position, so memory stays flat whatever the archive's size.
 */
export interface AuditSnapshot {
  head(): Promise<ChainHead>;
  /** Entries in sequence order after `afterSeq`. */
  entries(afterSeq: number, limit: number): Promise<AuditEntry[]>;
  /** One table's entries in (row id, seq) order after a position. */
  entriesOf(
    table: string,
    after: { rowId: string; seq: number } | null,
    limit: number,
  ): Promise<AuditEntry[]>;
  /** Every resource table the warehouse records columns for. */
  tables(): Promise<AuditedTable[]>;
  /** A table known only from the chain (no columns recorded for it). */
  table(name: string): Promise<AuditedTable>;
  /** Versions in (id, _version_id) order after a position. */
  versions(
    table: AuditedTable,
    after: { id: string; versionId: string } | null,
    limit: number,
  ): Promise<StoredVersion[]>;
  /** Live rows in id order after an id. */
  liveRows(table: AuditedTable, afterId: string | null, limit: number): Promise<LiveRow[]>;
  /** A bookkeeping table's records in key order after a key. */
  records(table: string, afterKey: string | null, limit: number): Promise<StoredRecord[]>;
  checkpoints(): Promise<SignedCheckpoint[]>;
  /** The chatbot choices recorded (`_ocs_chatbot_choices`: a few rows). */
  chatbotChoices(): Promise<ChatbotChoiceRecord[]>;
  close(): Promise<void>;
}
