/**
 * The PostgreSQL side of `serve`: export documents, original values and rows in the server's
 * paging order, through the warehouse's pool.
 */
import type {
  ArchiveRowQuery,
  ArchiveStore,
  ColumnType,
  ExportDocumentKind,
  OriginalValue,
  Row,
} from '../../interfaces.js';
import { assertSafeColumnName, assertSafeTableName, historyTableName } from '../identifiers.js';
import { narrowInteger } from '../values.js';

export interface PostgresArchiveAccess {
  query<R>(what: string, sql: string, parameters: unknown[]): Promise<R[]>;
  /** A schema-qualified, quoted table name. */
  table(name: string): string;
  schema: string;
  readExpression(column: string, type: ColumnType): string;
  decode(type: ColumnType, stored: unknown): unknown;
}

export class PostgresArchiveStore implements ArchiveStore {
  constructor(private readonly access: PostgresArchiveAccess) {}

  async saveExportDocument(
    kind: ExportDocumentKind,
    checksum: string,
    body: string,
  ): Promise<void> {
    await this.access.query(
      `Saving the server's ${kind}`,
      `INSERT INTO ${this.access.table('_ocs_export_documents')} (kind, checksum, body, fetched_at)
       VALUES ($1, $2, $3, clock_timestamp())
       ON CONFLICT (kind, checksum) DO UPDATE SET body = excluded.body, fetched_at = excluded.fetched_at`,
      [kind, checksum, body],
    );
  }

  async exportDocument(
    kind: ExportDocumentKind,
    checksum?: string,
  ): Promise<{ checksum: string; body: string } | undefined> {
    const select = `SELECT checksum, body FROM ${this.access.table('_ocs_export_documents')} WHERE kind = $1`;
    const rows = await this.access.query<{ checksum: string; body: string }>(
      `Reading the stored ${kind}`,
      checksum === undefined
        ? `${select} ORDER BY fetched_at DESC LIMIT 1`
        : `${select} AND checksum = $2`,
      checksum === undefined ? [kind] : [kind, checksum],
    );
    return rows[0];
  }

  async originalValues(resource: string, ids: readonly string[]): Promise<OriginalValue[]> {
    if (ids.length === 0) return [];
    const rows = await this.access.query<{
      id: string;
      column_name: string;
      served_hash: string;
      original: string;
    }>(
      `Reading original values of ${resource}`,
      `SELECT id::text AS id, column_name, served_hash, original
       FROM ${this.access.table('_ocs_original_values')}
       WHERE resource = $1 AND id = ANY($2::bigint[])`,
      [resource, [...ids]],
    );
    return rows.map((row) => ({
      id: row.id,
      column: row.column_name,
      servedHash: row.served_hash,
      original: row.original,
    }));
  }

  async hasHistory(table: string): Promise<boolean> {
    assertSafeTableName(table);
    const rows = await this.access.query(
      `Looking for the history of ${table}`,
      `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
      [this.access.schema, historyTableName(table)],
    );
    return rows.length > 0;
  }

  async readRows(query: ArchiveRowQuery): Promise<Row[]> {
    const { table, columns, order, after, limit, asOf } = query;
    assertSafeTableName(table);
    for (const column of columns) assertSafeColumnName(column.name, table);
    const parameters: unknown[] = [];
    const parameter = (value: unknown, cast: string) => {
      parameters.push(value);
      return `$${parameters.length}::${cast}`;
    };
    const where: string[] = [];
    if (asOf === undefined) {
      where.push('"_deleted_at" IS NULL');
    } else {
      const at = parameter(asOf, 'timestamptz');
      where.push(`"_valid_from" <= ${at}`, `("_valid_to" IS NULL OR "_valid_to" > ${at})`);
    }
    if (after) {
      if (order === 'pk') {
        where.push(`"id" > ${parameter(after.id.toString(), 'bigint')}`);
      } else {
        const at = parameter(after.updatedAt, 'timestamptz');
        where.push(`("updated_at", "id") > (${at}, ${parameter(after.id.toString(), 'bigint')})`);
      }
    }
    const source = asOf === undefined ? table : historyTableName(table);
    const orderBy = order === 'pk' ? '"id"' : '"updated_at", "id"';
    const select = [
      // Aliased apart from "id" so ORDER BY sorts by the bigint column, not its text.
      '"id"::text AS "id_text"',
      ...columns.map(
        (column, index) => `${this.access.readExpression(column.name, column.type)} AS "c${index}"`,
      ),
    ];
    const rows = await this.access.query<Record<string, unknown>>(
      `Reading rows of ${table}`,
      `SELECT ${select.join(', ')} FROM ${this.access.table(source)}
       WHERE ${where.join(' AND ')} ORDER BY ${orderBy} LIMIT ${parameter(limit, 'integer')}`,
      parameters,
    );
    return rows.map((values) => {
      const row: Row = { id: narrowInteger(BigInt(values.id_text as string)) };
      columns.forEach((column, index) => {
        row[column.name] = this.access.decode(column.type, values[`c${index}`]);
      });
      return row;
    });
  }
}
