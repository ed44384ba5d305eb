/**
 * The audit chain's format and how entries are appended, written once for both dialects.
 *
 * `_ocs_audit` holds one entry per history version written (created, changed, closed by a full
 * refresh), per run record, reset and file-ledger record. Each entry's hash covers the previous
 * entry's hash, so changing, removing, inserting or reordering any entry breaks every hash after
 * it. `_ocs_audit_head` (one row) holds the last sequence number and hash: a writer locks it
 * (PostgreSQL: FOR UPDATE; SQLite: its write transaction), links its entries after it and moves
 * it, in the same transaction as the rows the entries describe, so sequence numbers stay
 * gap-free whatever commits at once and a kill at any instant leaves a whole chain.
 *
 * Operations form an open set (AUDIT_OPERATIONS): each says what it does to a row's versions and
 * to the live row, and `audit verify` replays them by those rules alone.
 */
import type {
  AuditEntry,
  AuditOperation,
  ChainHead,
  CheckpointBody,
  ColumnSpec,
  PendingEntry,
  SignedCheckpoint,
  VersionKind,
} from '../interfaces.js';
import { WarehouseError } from '../errors.js';
import type { DialectRules, SqlRun } from './dialect-rules.js';
import { canonicalJson, rowCanonicalizer } from './canonical.js';
import { toSortableUtc } from '../timestamps.js';
import { narrowInteger, sha256Hex } from './values.js';

export type { SqlRun };

/** What an operation does; `audit verify` replays a row's entries by these rules. */
export interface OperationRule {
  /** A history version of a resource row, or a bookkeeping record (run, reset, file ledger). */
  subject: 'version' | 'record';
  /** Opens a new version of the row, valid from the entry's time. */
  opens: boolean;
  /** Closes the row's open version at the entry's time. */
  closes: boolean;
  /** Versions it opens: their `_ocs_version_kind`. */
  versionKind?: VersionKind;
  /** The kinds of open version it may close (none said: any). */
  closesKinds?: readonly VersionKind[];
  /** Its digest is the digest of the version it closes: the content stays as last served. */
  keepsContent?: boolean;
  /** Versions only: the live row after it (kept, kept with `_deleted_at` = the time, or gone). */
  live?: 'present' | 'marked_deleted' | 'absent';
  /**
   * Versions only: the live row's `_ocs_out_of_scope_since` after it: the entry's time (`set`),
   * null (`clear`: the row was served), or as it was (`keep`).
   */
  outOfScope?: 'set' | 'clear' | 'keep';
  /** For people. */
  meaning: string;
}

/** Versions a row's content or its return may replace: every kind but a scope exit. */
const SERVED_KINDS = ['served', 'scope_return'] as const;

export const AUDIT_OPERATIONS = {
  create: {
    subject: 'version',
    opens: true,
    closes: false,
    versionKind: 'served',
    live: 'present',
    outOfScope: 'clear',
    meaning: 'a version opened for a row with none open (new, or back after a deletion)',
  },
  change: {
    subject: 'version',
    opens: true,
    closes: true,
    versionKind: 'served',
    closesKinds: SERVED_KINDS,
    live: 'present',
    outOfScope: 'clear',
    meaning: "a new version replacing the row's open one",
  },
  delete: {
    subject: 'version',
    opens: false,
    closes: true,
    live: 'marked_deleted',
    outOfScope: 'keep',
    meaning: 'closed by a full refresh: the server no longer has the row (deletes: mark)',
  },
  remove: {
    subject: 'version',
    opens: false,
    closes: true,
    live: 'absent',
    meaning: 'closed by a full refresh and the row removed (deletes: remove)',
  },
  scope_exit: {
    subject: 'version',
    opens: true,
    closes: true,
    versionKind: 'scope_exit',
    closesKinds: SERVED_KINDS,
    keepsContent: true,
    live: 'present',
    outOfScope: 'set',
    meaning:
      "the team's chatbot choice no longer serves the row: a version of the content as last served, the row kept and marked out of scope",
  },
  scope_return: {
    subject: 'version',
    opens: true,
    closes: true,
    versionKind: 'scope_return',
    closesKinds: ['scope_exit'],
    live: 'present',
    outOfScope: 'clear',
    meaning: 'the row served again after a scope exit, its content changed or not',
  },
  insert: { subject: 'record', opens: false, closes: false, meaning: 'a record written' },
  update: { subject: 'record', opens: false, closes: false, meaning: 'a record rewritten' },
} as const satisfies Record<AuditOperation, OperationRule>;

export function operationRule(operation: string): OperationRule | undefined {
  return Object.prototype.hasOwnProperty.call(AUDIT_OPERATIONS, operation)
    ? AUDIT_OPERATIONS[operation as AuditOperation]
    : undefined;
}

/** The hash before the first entry. */
export const GENESIS_HASH = '0'.repeat(64);

const ENTRY_FORMAT = 'ocs-sync audit entry v1';

/** The text an entry's hash is the SHA-256 of (UTF-8): its fields, one a line, then prev. */
export function entryHashInput(entry: Omit<AuditEntry, 'hash'>): string {
  return (
    `${ENTRY_FORMAT}\n${entry.seq}\n${entry.runId ?? ''}\n${entry.table}\n${entry.rowId}\n` +
    `${entry.operation}\n${entry.at}\n${entry.digest}\n${entry.prevHash}`
  );
}

export function entryHash(entry: Omit<AuditEntry, 'hash'>): string {
  return sha256Hex(entryHashInput(entry));
}

/**
 * Entries that share their run, table and time: a page's versions, a batch of versions closed.
 * The history writers hand these over; they link without building an object per entry.
 */
export interface EntryBatch {
  runId: number;
  table: string;
  at: string;
  rowIds: string[];
  operations: AuditOperation[];
  digests: string[];
}

/** Links a batch after `head`: each entry's previous hash and hash, in order, and the new head. */
export function linkBatch(
  head: ChainHead,
  batch: EntryBatch,
): { prevHashes: string[]; hashes: string[]; head: ChainHead } {
  const { rowIds, operations, digests } = batch;
  const prevHashes: string[] = new Array(rowIds.length);
  const hashes: string[] = new Array(rowIds.length);
  // The lines every entry of the batch shares, around its seq and row id.
  const run = `\n${batch.runId}\n${batch.table}\n`;
  const at = `\n${batch.at}\n`;
  let { seq, hash } = head;
  for (let index = 0; index < rowIds.length; index += 1) {
    seq += 1;
    prevHashes[index] = hash;
    hash = sha256Hex(
      `${ENTRY_FORMAT}\n${seq}${run}${rowIds[index]}\n${operations[index]}${at}${digests[index]}\n${hash}`,
    );
    hashes[index] = hash;
  }
  return { prevHashes, hashes, head: { seq, hash } };
}

/** Links entries after `head`; pure. */
export function linkEntries(
  head: ChainHead,
  pending: readonly PendingEntry[],
): { entries: AuditEntry[]; head: ChainHead } {
  let { seq, hash } = head;
  const entries = pending.map((entry) => {
    seq += 1;
    const linked = { ...entry, seq, prevHash: hash };
    hash = entryHash(linked);
    return { ...linked, hash };
  });
  return { entries, head: { seq, hash } };
}

// ---------------------------------------------------------------- SQL

export const ENTRY_COLUMNS =
  'seq, run_id, table_name, row_id, operation, at, digest, prev_hash, hash';

/** The head row. */
export const HEAD_SELECT_SQL = 'SELECT seq, hash FROM _ocs_audit_head WHERE one = 1';

export const HEAD_UPDATE_SQL = 'UPDATE _ocs_audit_head SET seq = ?, hash = ? WHERE one = 1';

export function toHead(row: { seq: unknown; hash: unknown } | undefined): ChainHead {
  if (!row) {
    throw new WarehouseError('The audit chain has no head row (_ocs_audit_head is empty).', {
      hint: 'Someone removed it: run `ocs-sync audit verify` and restore the warehouse from a backup.',
    });
  }
  return { seq: Number(row.seq), hash: String(row.hash) };
}

export function entryValues(entry: AuditEntry): Array<string | number | null> {
  return [
    entry.seq,
    entry.runId,
    entry.table,
    entry.rowId,
    entry.operation,
    entry.at,
    entry.digest,
    entry.prevHash,
    entry.hash,
  ];
}

/** A stored entry as read back (ids and numbers as the drivers give them). */
export function toEntry(row: Record<string, unknown>): AuditEntry {
  return {
    seq: Number(row.seq),
    runId: row.run_id === null || row.run_id === undefined ? null : Number(row.run_id),
    table: String(row.table_name),
    rowId: String(row.row_id),
    operation: String(row.operation) as AuditOperation,
    at: String(row.at),
    digest: String(row.digest),
    prevHash: String(row.prev_hash),
    hash: String(row.hash),
  };
}

/** Appends entries in the caller's transaction: locks and reads the head, links, inserts, moves it. */
export async function appendEntries(
  run: SqlRun,
  rules: DialectRules,
  pending: readonly PendingEntry[],
): Promise<ChainHead | undefined> {
  if (pending.length === 0) return undefined;
  const [row] = await run(rules.headSelectSql, []);
  const { entries, head } = linkEntries(toHead(row as { seq: unknown; hash: unknown }), pending);
  await rules.insertEntries(run, entries, head);
  return head;
}

// ---------------------------------------------------------------- bookkeeping records

type RecordColumnType = 'integer' | 'text' | 'time';

interface RecordTable {
  key: string;
  columns: Readonly<Record<string, RecordColumnType>>;
}

/** The bookkeeping tables whose records the chain covers, with their columns. */
export const AUDITED_RECORDS = {
  _ocs_runs: {
    key: 'id',
    columns: {
      id: 'integer',
      kind: 'text',
      status: 'text',
      started_at: 'time',
      finished_at: 'time',
      schema_checksum: 'text',
      rows: 'integer',
      pages: 'integer',
      requests: 'integer',
      error: 'text',
      selection_key: 'text',
    },
  },
  _ocs_resource_runs: {
    key: 'id',
    columns: {
      id: 'integer',
      run_id: 'integer',
      resource: 'text',
      status: 'text',
      rows: 'integer',
      pages: 'integer',
      duration_ms: 'integer',
      error: 'text',
      recorded_at: 'time',
    },
  },
  _ocs_files: {
    key: 'file_id',
    columns: {
      file_id: 'integer',
      sha256: 'text',
      size: 'integer',
      content_type: 'text',
      status: 'text',
      error: 'text',
      updated_at: 'text',
      file: 'text',
      fetched_at: 'time',
      attempts: 'integer',
      next_attempt_at: 'time',
    },
  },
} as const satisfies Record<string, RecordTable>;

export type AuditedRecordTable = keyof typeof AUDITED_RECORDS;

export const AUDITED_RECORD_TABLES = Object.keys(AUDITED_RECORDS) as AuditedRecordTable[];

/**
 * SELECT of a records table's columns in a form both dialects give back alike: integers as
 * decimal text (exact past 2^53), times in the fixed form (SQLite holds text, normalised on
 * reading), `key_text` the key. Ordered by key.
 */
export function recordSelectSql(
  rules: DialectRules,
  table: AuditedRecordTable,
  where: string,
): string {
  const { key, columns } = AUDITED_RECORDS[table];
  const select = Object.entries(columns).map(([name, type]) => {
    const column = `"${name}"`;
    if (type === 'integer') return `CAST(${column} AS TEXT) AS ${column}`;
    if (type === 'time') return `${rules.fixedTime(column)} AS ${column}`;
    return column;
  });
  // Ordered by the table's column: the text of the same name would sort 10 before 2.
  return `SELECT CAST("${key}" AS TEXT) AS key_text, ${select.join(', ')} FROM ${table} ${where} ORDER BY ${table}."${key}"`;
}

const RECORD_CANONICAL = new Map(
  Object.entries(AUDITED_RECORDS).map(([table, { columns }]) => [
    table,
    rowCanonicalizer(Object.keys(columns).map((name): ColumnSpec => ({ name, type: 'text' }))),
  ]),
);

/** The digest of a record read by recordSelectSql: its canonical text's SHA-256. */
export function recordDigest(table: AuditedRecordTable, row: Record<string, unknown>): string {
  const values: Record<string, unknown> & { id: number } = { id: 0 };
  for (const [name, type] of Object.entries(AUDITED_RECORDS[table].columns)) {
    const value = row[name];
    if (value === null || value === undefined) values[name] = null;
    else if (type === 'integer') values[name] = narrowInteger(BigInt(String(value)));
    else if (type === 'time') values[name] = fixedTime(String(value));
    else values[name] = String(value);
  }
  return sha256Hex(RECORD_CANONICAL.get(table)!(values));
}

function fixedTime(text: string): string {
  try {
    return toSortableUtc(text);
  } catch {
    return text;
  }
}

/**
 * Appends one entry per written record, reading each back in the caller's transaction so the
 * digest is of exactly what is stored (what `audit verify` reads).
 */
export async function appendRecordEntries(
  run: SqlRun,
  rules: DialectRules,
  records: ReadonlyArray<{
    table: AuditedRecordTable;
    key: string | number;
    operation: 'insert' | 'update';
    runId: number | null;
  }>,
  at: string,
): Promise<void> {
  const pending: PendingEntry[] = [];
  for (const record of records) {
    const { key } = AUDITED_RECORDS[record.table];
    const [row] = await run(
      recordSelectSql(rules, record.table, `WHERE "${key}" = CAST(? AS BIGINT)`),
      [String(record.key)],
    );
    if (!row) {
      throw new WarehouseError(
        `Cannot chain ${record.table} record ${record.key}: it is not in the table.`,
      );
    }
    pending.push({
      runId: record.runId,
      table: record.table,
      rowId: String(row.key_text),
      operation: record.operation,
      at,
      digest: recordDigest(record.table, row),
    });
  }
  await appendEntries(run, rules, pending);
}

// ---------------------------------------------------------------- checkpoints

export const CHECKPOINT_FORMAT = 'ocs-sync audit checkpoint v1';

/** The exact text a checkpoint's signature is over: the canonical JSON of its body. */
export function checkpointText(body: CheckpointBody): string {
  const { format, run, seq, head, previous_seq, counts, time, key } = body;
  return canonicalJson({ format, run, seq, head, previous_seq, counts, time, key });
}

export function toCheckpoint(row: Record<string, unknown>): SignedCheckpoint {
  let counts: Record<string, number> = {};
  try {
    counts = JSON.parse(String(row.counts)) as Record<string, number>;
  } catch {
    // A damaged counts text fails the signature check; it is reported there.
  }
  return {
    format: CHECKPOINT_FORMAT,
    run: row.run_id === null || row.run_id === undefined ? null : Number(row.run_id),
    seq: Number(row.seq),
    head: String(row.head_hash),
    previous_seq: Number(row.previous_seq),
    counts,
    time: String(row.created_at),
    key: String(row.public_key),
    signature: String(row.signature),
  };
}
