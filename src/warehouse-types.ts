/**
 * What goes into a warehouse and comes out of it: columns and schema changes, pages and cursors,
 * runs and resource states, missing rows and their proofs, batches of stored rows, original
 * values. The warehouse's parts that take and give them are in warehouse-parts.ts. Re-exported by
 * interfaces.ts (the glossary).
 */
import type { CursorKind, Row } from './export-types.js';

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
