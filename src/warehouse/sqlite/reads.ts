/**
 * Stored rows read back from a SQLite warehouse (WarehouseReads): batches in id order for
 * exports, rows by id for stable sealed values, and what analysts' queries lean on (indexes,
 * reference checks).
 */
import type Database from 'better-sqlite3';
import type {
  ColumnSpec,
  IndexSpec,
  ReferenceCheck,
  RowBatchQuery,
  StoredRow,
  WarehouseReads,
} from '../../interfaces.js';
import { assertSafeColumnName, assertSafeTableName, quoteIdentifier as q } from '../identifiers.js';
import { OWN_COLUMNS, createIndexSql, referenceCheckSql } from '../table-definitions.js';
import { narrowInteger, parseIdText, toJsonText } from '../values.js';
import type { SqliteConnection } from './connection.js';
import type { SqliteParts } from './tools.js';
import { decodeValue } from './values.js';

export class SqliteReads implements WarehouseReads {
  constructor(private readonly parts: Pick<SqliteParts, 'connection' | 'exclusive'>) {}

  private get connection(): SqliteConnection {
    return this.parts.connection;
  }

  private get db(): Database.Database {
    return this.parts.connection.db;
  }

  ensureIndexes(indexes: readonly IndexSpec[]): Promise<number> {
    return this.parts.exclusive(() => {
      let created = 0;
      this.connection.writeTransaction(() => {
        for (const { table, column } of indexes) {
          assertSafeTableName(table);
          assertSafeColumnName(column, table);
          if (!this.connection.physicalColumns(table).includes(column)) continue;
          const before = this.indexCount();
          this.db.exec(createIndexSql(q, table, column));
          if (this.indexCount() > before) created += 1;
        }
      });
      return created;
    }, 'Creating indexes');
  }

  private indexCount(): number {
    return this.db
      .prepare("SELECT count(*) FROM sqlite_master WHERE type = 'index'")
      .pluck()
      .get() as number;
  }

  checkReference(table: string, column: string, target: string): Promise<ReferenceCheck> {
    return this.parts.exclusive(() => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      assertSafeTableName(target);
      const row = this.db.prepare(referenceCheckSql(q, table, column, target)).get() as {
        values: number;
        unmatched: number;
      };
      return { values: Number(row.values), unmatched: Number(row.unmatched) };
    }, `Checking ${table}.${column} against ${target}`);
  }

  readRows(query: RowBatchQuery): Promise<StoredRow[]> {
    const { table, columns, afterId, limit, live, jsonAsText } = query;
    return this.parts.exclusive(() => {
      const conditions = [
        ...(afterId === null ? [] : ['"id" > ?']),
        ...(live ? ['"_deleted_at" IS NULL'] : []),
      ];
      const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
      return this.selectRows(
        table,
        columns,
        `${where} ORDER BY "id" LIMIT ?`,
        [...(afterId === null ? [] : [parseIdText(afterId, table)]), limit],
        jsonAsText,
      );
    }, `Reading rows of ${table}`);
  }

  readRowsById(
    table: string,
    columns: readonly ColumnSpec[],
    ids: readonly string[],
  ): Promise<StoredRow[]> {
    return this.parts.exclusive(
      () =>
        this.selectRows(table, columns, 'WHERE "id" IN (SELECT value FROM json_each(?))', [
          toJsonText(ids.map((id) => parseIdText(id, table))),
        ]),
      `Reading rows of ${table}`,
    );
  }

  /** Rows of a table, `id`, the columns and our own, decoded. */
  private selectRows(
    table: string,
    columns: readonly ColumnSpec[],
    rest: string,
    parameters: unknown[],
    jsonAsText = false,
  ): StoredRow[] {
    assertSafeTableName(table);
    for (const column of columns) assertSafeColumnName(column.name, table);
    const names = ['id', ...[...columns, ...OWN_COLUMNS].map((column) => column.name)];
    const rows = this.db
      .prepare(`SELECT ${names.map(q).join(', ')} FROM ${q(table)} ${rest}`)
      .safeIntegers(true)
      .all(...parameters) as Array<Record<string, unknown>>;
    return rows.map((stored) => {
      const row: StoredRow = { id: narrowInteger(stored.id as bigint) };
      for (const column of [...columns, ...OWN_COLUMNS]) {
        const value = stored[column.name];
        row[column.name] =
          jsonAsText && column.type === 'json' ? value : decodeValue(column.type, value);
      }
      return row;
    });
  }
}
