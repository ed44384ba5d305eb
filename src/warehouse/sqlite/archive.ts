/**
 * The SQLite side of `serve`: export documents, original values and rows in the server's paging
 * order, read from the same connection as the warehouse (through its one-at-a-time queue).
 */
import type Database from 'better-sqlite3';
import type {
  ArchiveRowQuery,
  ArchiveStore,
  ColumnType,
  ExportDocumentKind,
  OriginalValue,
  Row,
} from '../../interfaces.js';
import { nowIso } from '../bookkeeping.js';
import {
  assertSafeColumnName,
  assertSafeTableName,
  historyTableName,
  quoteIdentifier as q,
} from '../identifiers.js';
import { toSortableUtc } from '../../timestamps.js';
import { narrowInteger } from '../values.js';

type Exclusive = <T>(work: () => T, what: string) => Promise<T>;
type Decode = (type: ColumnType, stored: unknown) => unknown;

/** Ids per `IN (...)` list, under SQLite's parameter limit. */
const IDS_PER_QUERY = 500;

/** The fixed form of a date-time; other text as it is (it then sorts as text). */
function sortable(text: string): string {
  try {
    return toSortableUtc(text);
  } catch {
    return text;
  }
}

export class SqliteArchiveStore implements ArchiveStore {
  private functionRegistered = false;

  constructor(
    private readonly db: Database.Database,
    private readonly exclusive: Exclusive,
    private readonly decode: Decode,
  ) {}

  saveExportDocument(kind: ExportDocumentKind, checksum: string, body: string): Promise<void> {
    return this.exclusive(() => {
      this.db
        .prepare(
          `INSERT INTO _ocs_export_documents (kind, checksum, body, fetched_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (kind, checksum) DO UPDATE SET body = excluded.body, fetched_at = excluded.fetched_at`,
        )
        .run(kind, checksum, body, nowIso());
    }, `Saving the server's ${kind}`);
  }

  exportDocument(
    kind: ExportDocumentKind,
    checksum?: string,
  ): Promise<{ checksum: string; body: string } | undefined> {
    return this.exclusive(() => {
      const select = 'SELECT checksum, body FROM _ocs_export_documents WHERE kind = ?';
      return (
        checksum === undefined
          ? this.db.prepare(`${select} ORDER BY fetched_at DESC LIMIT 1`).get(kind)
          : this.db.prepare(`${select} AND checksum = ?`).get(kind, checksum)
      ) as { checksum: string; body: string } | undefined;
    }, `Reading the stored ${kind}`);
  }

  private tableExists(name: string): boolean {
    return (
      this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !==
      undefined
    );
  }

  originalValues(resource: string, ids: readonly string[]): Promise<OriginalValue[]> {
    return this.exclusive(() => {
      const found: OriginalValue[] = [];
      for (let start = 0; start < ids.length; start += IDS_PER_QUERY) {
        const batch = ids.slice(start, start + IDS_PER_QUERY).map((id) => BigInt(id));
        const rows = this.db
          .prepare(
            `SELECT id, column_name, served_hash, original FROM _ocs_original_values
             WHERE resource = ? AND id IN (${batch.map(() => '?').join(', ')})`,
          )
          .safeIntegers(true)
          .all(resource, ...batch) as Array<{
          id: bigint;
          column_name: string;
          served_hash: string;
          original: string;
        }>;
        for (const row of rows) {
          found.push({
            id: row.id.toString(),
            column: row.column_name,
            servedHash: row.served_hash,
            original: row.original,
          });
        }
      }
      return found;
    }, `Reading original values of ${resource}`);
  }

  hasHistory(table: string): Promise<boolean> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      return this.tableExists(historyTableName(table));
    }, `Looking for the history of ${table}`);
  }

  readRows(query: ArchiveRowQuery): Promise<Row[]> {
    return this.exclusive(() => {
      const { table, columns, order, after, limit, asOf } = query;
      assertSafeTableName(table);
      for (const column of columns) assertSafeColumnName(column.name, table);
      this.registerFunction();
      // A datetime column holds the fixed sortable form (its index serves the order); a column
      // widened to text may hold any form, compared through the function.
      const updatedAtType = columns.find((column) => column.name === 'updated_at')?.type;
      const updatedAt =
        updatedAtType === 'datetime' ? '"updated_at"' : 'ocs_sortable_utc("updated_at")';
      const where: string[] = [];
      const parameters: unknown[] = [];
      if (asOf === undefined) {
        where.push('"_deleted_at" IS NULL');
      } else {
        where.push(
          'ocs_sortable_utc("_valid_from") <= ?',
          '("_valid_to" IS NULL OR ocs_sortable_utc("_valid_to") > ?)',
        );
        const at = sortable(asOf);
        parameters.push(at, at);
      }
      if (after) {
        if (order === 'pk') {
          where.push('"id" > ?');
          parameters.push(after.id);
        } else {
          const at = sortable(after.updatedAt ?? '');
          where.push(`(${updatedAt} > ? OR (${updatedAt} = ? AND "id" > ?))`);
          parameters.push(at, at, after.id);
        }
      }
      const source = asOf === undefined ? table : historyTableName(table);
      const orderBy = order === 'pk' ? '"id"' : `${updatedAt}, "id"`;
      const sql =
        `SELECT ${['"id"', ...columns.map((column) => q(column.name))].join(', ')} FROM ${q(source)}` +
        ` WHERE ${where.join(' AND ')} ORDER BY ${orderBy} LIMIT ?`;
      const rows = this.db
        .prepare(sql)
        .raw(true)
        .safeIntegers(true)
        .all(...parameters, limit) as unknown[][];
      return rows.map((values) => {
        const row: Row = { id: narrowInteger(values[0] as bigint) };
        columns.forEach((column, index) => {
          row[column.name] = this.decode(column.type, values[index + 1]);
        });
        return row;
      });
    }, `Reading rows of ${query.table}`);
  }

  private registerFunction(): void {
    if (this.functionRegistered) return;
    this.db.function('ocs_sortable_utc', { deterministic: true }, (value: unknown) =>
      typeof value === 'string' ? sortable(value) : value,
    );
    this.functionRegistered = true;
  }
}
