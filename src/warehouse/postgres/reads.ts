/**
 * Stored rows read back from a PostgreSQL warehouse (WarehouseReads): batches in id order for
 * exports, rows by id for stable sealed values, and what analysts' queries lean on (indexes,
 * reference checks).
 */
import type {
  ColumnSpec,
  IndexSpec,
  ReferenceCheck,
  RowBatchQuery,
  StoredRow,
  WarehouseReads,
} from '../../interfaces.js';
import { assertSafeColumnName, assertSafeTableName, columnIndexName } from '../identifiers.js';
import { OWN_COLUMNS, createIndexSql, referenceCheckSql } from '../table-definitions.js';
import { narrowInteger, parseIdText } from '../values.js';
import type { PostgresConnection } from './connection.js';
import { decodeValue, readExpression } from './values.js';

export class PostgresReads implements WarehouseReads {
  constructor(private readonly connection: PostgresConnection) {}

  ensureIndexes(indexes: readonly IndexSpec[]): Promise<number> {
    return this.connection.guard('Creating indexes', async () => {
      let created = 0;
      // One at a time outside a long transaction: building an index on a big table takes a while.
      await this.connection.withoutTimeout(async (client) => {
        for (const { table, column } of indexes) {
          assertSafeTableName(table);
          assertSafeColumnName(column, table);
          if (!(await this.connection.physicalColumns(client, table)).has(column)) continue;
          const exists = await client.query(
            `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2`,
            [this.connection.schema, columnIndexName(table, column)],
          );
          if ((exists.rowCount ?? 0) > 0) continue;
          await client.query(createIndexSql((name) => this.connection.table(name), table, column));
          created += 1;
        }
      });
      return created;
    });
  }

  checkReference(table: string, column: string, target: string): Promise<ReferenceCheck> {
    return this.connection.guard(`Checking ${table}.${column} against ${target}`, async () => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      assertSafeTableName(target);
      const result = await this.connection.withoutTimeout((client) =>
        client.query<{ values: string; unmatched: string }>(
          referenceCheckSql((name) => this.connection.table(name), table, column, target),
        ),
      );
      const row = result.rows[0];
      return { values: Number(row?.values ?? 0), unmatched: Number(row?.unmatched ?? 0) };
    });
  }

  readRows(query: RowBatchQuery): Promise<StoredRow[]> {
    const { table, afterId, limit, live } = query;
    return this.connection.guard(`Reading rows of ${table}`, async () => {
      const conditions: string[] = [];
      const parameters: unknown[] = [];
      if (afterId !== null) {
        parameters.push(parseIdText(afterId, table).toString());
        conditions.push(`"id" > $${parameters.length}::bigint`);
      }
      if (live) conditions.push('"_deleted_at" IS NULL');
      parameters.push(limit);
      const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
      return this.selectRows(
        query,
        `${where} ORDER BY "id" LIMIT $${parameters.length}`,
        parameters,
      );
    });
  }

  readRowsById(
    table: string,
    columns: readonly ColumnSpec[],
    ids: readonly string[],
  ): Promise<StoredRow[]> {
    return this.connection.guard(`Reading rows of ${table}`, () =>
      this.selectRows({ table, columns }, 'WHERE "id" = ANY($1::bigint[])', [
        ids.map((id) => parseIdText(id, table).toString()),
      ]),
    );
  }

  /** Rows of a table, `id`, the columns and our own, decoded. */
  private async selectRows(
    query: Pick<RowBatchQuery, 'table' | 'columns' | 'jsonAsText'>,
    rest: string,
    parameters: unknown[],
  ): Promise<StoredRow[]> {
    const { table, columns, jsonAsText } = query;
    assertSafeTableName(table);
    for (const column of columns) assertSafeColumnName(column.name, table);
    // Aliased by position: a column may be named like one of ours.
    const read = [...columns, ...OWN_COLUMNS];
    const selected = [
      '"id"::text AS id_text',
      ...read.map((column, index) => `${readExpression(column.name, column.type)} AS c${index}`),
    ];
    const result = await this.connection.pool.query<Record<string, unknown>>(
      `SELECT ${selected.join(', ')} FROM ${this.connection.table(table)} ${rest}`,
      parameters,
    );
    return result.rows.map((stored) => {
      const row: StoredRow = { id: narrowInteger(BigInt(stored.id_text as string)) };
      read.forEach((column, index) => {
        const value = stored[`c${index}`];
        row[column.name] =
          jsonAsText && column.type === 'json' ? value : decodeValue(column.type, value);
      });
      return row;
    });
  }
}
