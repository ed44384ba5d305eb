/**
 * What `audit verify` reads, written once for both dialects over a few primitives each dialect
 * gives (sqlite/audit.ts, postgres/audit.ts): plain SQL with `?` placeholders inside one read
 * transaction, and its own decoding of stored values. Every list is read in key order, a batch
 * after a position, through an index: memory stays flat whatever the archive's size.
 */
import type {
  AuditEntry,
  ChatbotChoiceRecord,
  AuditSnapshot,
  AuditedTable,
  ChainHead,
  ColumnSpec,
  ColumnType,
  LiveRow,
  Row,
  SignedCheckpoint,
  StoredRecord,
  StoredVersion,
} from '../interfaces.js';
import {
  AUDITED_RECORDS,
  ENTRY_COLUMNS,
  recordDigest,
  recordSelectSql,
  toCheckpoint,
  toEntry,
  toHead,
  type AuditedRecordTable,
} from './audit-chain.js';
import type { DialectRules } from './dialect-rules.js';
import { historyTableName, quoteIdentifier as q } from './identifiers.js';
import {
  OUT_OF_SCOPE_COLUMN,
  SERVED_UNDER_COLUMN,
  VERSION_KIND_COLUMN,
} from './table-definitions.js';
import { toChoiceRecord } from './reader.js';
import { toSortableUtc } from '../timestamps.js';
import { narrowInteger } from './values.js';

/** What a dialect gives the snapshot. */
export interface SnapshotDialect {
  readonly rules: DialectRules;
  /** Runs a query (`?` placeholders) inside the snapshot's read transaction. */
  all(sql: string, parameters?: readonly unknown[]): Promise<Array<Record<string, unknown>>>;
  /** How a stored column of `type` is selected so that `decode` reads it exactly. */
  readExpression(column: string, type: ColumnType): string;
  decode(type: ColumnType, stored: unknown): unknown;
  /** The tables that exist, and a table's physical columns. */
  existingTables(): Promise<Set<string>>;
  physicalColumns(table: string): Promise<Set<string>>;
  /** Ends the read transaction and lets go of its connection. */
  close(): Promise<void>;
}

function textOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

function fixedForm(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = String(value);
  try {
    return toSortableUtc(text);
  } catch {
    return text;
  }
}

export class SqlAuditSnapshot implements AuditSnapshot {
  private existing?: Set<string>;
  private readonly readable = new Map<string, ColumnSpec[]>();
  private readonly physical = new Map<string, Set<string>>();

  constructor(private readonly dialect: SnapshotDialect) {}

  async head(): Promise<ChainHead> {
    const [row] = await this.dialect.all('SELECT seq, hash FROM _ocs_audit_head WHERE one = 1');
    return toHead(row as { seq: unknown; hash: unknown } | undefined);
  }

  async entries(afterSeq: number, limit: number): Promise<AuditEntry[]> {
    const rows = await this.dialect.all(
      `SELECT ${ENTRY_COLUMNS} FROM _ocs_audit WHERE seq > ? ORDER BY seq LIMIT ?`,
      [afterSeq, limit],
    );
    return rows.map(toEntry);
  }

  async entriesOf(
    table: string,
    after: { rowId: string; seq: number } | null,
    limit: number,
  ): Promise<AuditEntry[]> {
    const rows = await this.dialect.all(
      `SELECT ${ENTRY_COLUMNS} FROM _ocs_audit WHERE table_name = ? AND (row_id, seq) > (CAST(? AS BIGINT), ?)
       ORDER BY row_id, seq LIMIT ?`,
      [table, after?.rowId ?? String(-(2n ** 63n)), after?.seq ?? 0, limit],
    );
    return rows.map(toEntry);
  }

  async tables(): Promise<AuditedTable[]> {
    const existing = await this.existingTables();
    const rows = await this.dialect.all(
      'SELECT table_name, column_name, column_type FROM _ocs_columns ORDER BY table_name, position',
    );
    const byTable = new Map<string, ColumnSpec[]>();
    for (const row of rows) {
      const table = String(row.table_name);
      const columns = byTable.get(table) ?? [];
      columns.push({ name: String(row.column_name), type: String(row.column_type) as ColumnType });
      byTable.set(table, columns);
    }
    return [...byTable].map(([table, columns]) => this.describe(table, columns, existing));
  }

  /** A table verify knows only from the chain (its columns no longer recorded). */
  async table(name: string): Promise<AuditedTable> {
    return this.describe(name, [], await this.existingTables());
  }

  private describe(table: string, columns: ColumnSpec[], existing: Set<string>): AuditedTable {
    return {
      table,
      columns,
      live: existing.has(table),
      history: existing.has(historyTableName(table)),
    };
  }

  async versions(
    table: AuditedTable,
    after: { id: string; versionId: string } | null,
    limit: number,
  ): Promise<StoredVersion[]> {
    const history = historyTableName(table.table);
    const columns = await this.readableColumns(history, table.columns);
    const own = await this.ownColumns(history);
    const rows = await this.dialect.all(
      `SELECT CAST("id" AS TEXT) AS id_text, CAST("_version_id" AS TEXT) AS version_text,
         ${this.selectList(columns)}
         ${this.dialect.rules.fixedTime('"_valid_from"')} AS valid_from,
         ${this.dialect.rules.fixedTime('"_valid_to"')} AS valid_to, "_content_hash" AS content_hash,
         ${own(VERSION_KIND_COLUMN)} AS version_kind, ${own(SERVED_UNDER_COLUMN)} AS served_under
       FROM ${q(history)} WHERE ("id", "_version_id") > (CAST(? AS BIGINT), CAST(? AS BIGINT))
       ORDER BY "id", "_version_id" LIMIT ?`,
      [after?.id ?? String(-(2n ** 63n)), after?.versionId ?? String(-(2n ** 63n)), limit],
    );
    return rows.map((row) => ({
      id: String(row.id_text),
      versionId: String(row.version_text),
      values: this.decodeRow(row, columns),
      servedUnder: textOrNull(row.served_under),
      validFrom: fixedForm(row.valid_from) ?? '',
      validTo: fixedForm(row.valid_to),
      contentHash: String(row.content_hash),
      kind: String(row.version_kind),
    }));
  }

  async liveRows(table: AuditedTable, afterId: string | null, limit: number): Promise<LiveRow[]> {
    const columns = await this.readableColumns(table.table, table.columns);
    const own = await this.ownColumns(table.table);
    const rows = await this.dialect.all(
      `SELECT CAST("id" AS TEXT) AS id_text, ${this.selectList(columns)}
         ${this.dialect.rules.fixedTime('"_deleted_at"')} AS deleted_at,
         ${own(OUT_OF_SCOPE_COLUMN, this.dialect.rules.fixedTime)} AS out_of_scope_since,
         ${own(SERVED_UNDER_COLUMN)} AS served_under
       FROM ${q(table.table)} WHERE "id" > CAST(? AS BIGINT) ORDER BY "id" LIMIT ?`,
      [afterId ?? String(-(2n ** 63n)), limit],
    );
    return rows.map((row) => ({
      id: String(row.id_text),
      values: this.decodeRow(row, columns),
      servedUnder: textOrNull(row.served_under),
      deletedAt: fixedForm(row.deleted_at),
      outOfScopeSince: fixedForm(row.out_of_scope_since),
    }));
  }

  async records(table: string, afterKey: string | null, limit: number): Promise<StoredRecord[]> {
    const name = table as AuditedRecordTable;
    const { key } = AUDITED_RECORDS[name];
    const rows = await this.dialect.all(
      `${recordSelectSql(this.dialect.rules, name, `WHERE "${key}" > CAST(? AS BIGINT)`)} LIMIT ?`,
      [afterKey ?? String(-(2n ** 63n)), limit],
    );
    return rows.map((row) => ({ key: String(row.key_text), digest: recordDigest(name, row) }));
  }

  async checkpoints(): Promise<SignedCheckpoint[]> {
    const rows = await this.dialect.all('SELECT * FROM _ocs_audit_checkpoints ORDER BY id');
    return rows.map(toCheckpoint);
  }

  async chatbotChoices(): Promise<ChatbotChoiceRecord[]> {
    if (!(await this.existingTables()).has('_ocs_chatbot_choices')) return [];
    const rows = await this.dialect.all(
      'SELECT selection_key, chatbots FROM _ocs_chatbot_choices ORDER BY selection_key',
    );
    return rows.map(toChoiceRecord);
  }

  close(): Promise<void> {
    return this.dialect.close();
  }

  private async existingTables(): Promise<Set<string>> {
    this.existing ??= await this.dialect.existingTables();
    return this.existing;
  }

  /**
   * One of our own columns as selected (through `read`), or NULL when the table lacks it (dropped
   * by hand: what verify expects of it then shows what is missing).
   */
  private async ownColumns(
    table: string,
  ): Promise<(column: string, read?: (quoted: string) => string) => string> {
    const physical = await this.physicalColumns(table);
    return (column, read = (quoted) => quoted) => (physical.has(column) ? read(q(column)) : 'NULL');
  }

  private async physicalColumns(table: string): Promise<Set<string>> {
    let physical = this.physical.get(table);
    if (!physical) {
      physical = await this.dialect.physicalColumns(table);
      this.physical.set(table, physical);
    }
    return physical;
  }

  /** The recorded columns the table holds (a column may be missing from a damaged table). */
  private async readableColumns(table: string, columns: ColumnSpec[]): Promise<ColumnSpec[]> {
    let readable = this.readable.get(table);
    if (!readable) {
      const physical = await this.physicalColumns(table);
      readable = columns.filter((column) => physical.has(column.name));
      this.readable.set(table, readable);
    }
    return readable;
  }

  /** The data columns, aliased by position (a column may be named like one of ours), then a comma. */
  private selectList(columns: readonly ColumnSpec[]): string {
    return columns
      .map(
        (column, index) =>
          `${this.dialect.readExpression(column.name, column.type)} AS c${index}, `,
      )
      .join('');
  }

  private decodeRow(row: Record<string, unknown>, columns: readonly ColumnSpec[]): Row {
    const values: Row = { id: narrowInteger(BigInt(String(row.id_text))) };
    columns.forEach((column, index) => {
      values[column.name] = this.dialect.decode(column.type, row[`c${index}`]);
    });
    return values;
  }
}
