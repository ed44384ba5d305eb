/**
 * SQL of the overlap designs the benchmark measures (not the sync's: its statements live in
 * src/warehouse/sqlite/page-writes.ts, which these mirror for one resource).
 */
import type { ColumnSpec } from '../src/interfaces.js';
import { quoteIdentifier as q } from '../src/warehouse/identifiers.js';

export const saveCursorSql = `INSERT INTO _ocs_resources (resource, cursor, cursor_kind, last_run_id)
  VALUES (?, ?, ?, ?)
  ON CONFLICT (resource) DO UPDATE SET
    cursor = excluded.cursor, cursor_kind = excluded.cursor_kind, last_run_id = excluded.last_run_id`;

function onConflict(columns: ColumnSpec[]): string {
  return `ON CONFLICT ("id") DO UPDATE SET ${[
    ...columns.map((column) => `${q(column.name)} = excluded.${q(column.name)}`),
    '"_synced_at" = excluded."_synced_at"',
    '"_run_id" = excluded."_run_id"',
    '"_deleted_at" = NULL',
  ].join(', ')}`;
}

function insertInto(table: string, columns: ColumnSpec[]): string {
  return `INSERT INTO ${q(table)} (${['"id"', ...columns.map((column) => q(column.name)), '"_synced_at"', '"_run_id"', '"_deleted_at"'].join(', ')})`;
}

/** The sync's own upsert of `rows` pre-encoded rows. */
export function rowUpsertSql(table: string, columns: ColumnSpec[], rows: number): string {
  const row = `(${['?', ...columns.map(() => '?'), '?', '?', 'NULL'].join(', ')})`;
  return `${insertInto(table, columns)} VALUES ${Array.from({ length: rows }, () => row).join(', ')} ${onConflict(columns)}`;
}

/**
 * SQLite parsing the page: @page is the page's bytes (a blob, cast to text: a blob would be read as
 * JSONB). Date-times become the sortable fixed form in SQL.
 */
export function jsonEachUpsertSql(table: string, columns: ColumnSpec[]): string {
  const value = (column: ColumnSpec): string => {
    const path = `'$.${column.name}'`;
    switch (column.type) {
      case 'json':
        return `CASE json_type(value, ${path}) WHEN 'null' THEN NULL ELSE value -> ${path} END`;
      case 'boolean':
        return `(value ->> ${path})`;
      case 'datetime': {
        const text = `(value ->> ${path})`;
        const fraction = `CASE WHEN substr(${text}, 20, 1) = '.' THEN CAST(round(CAST('0.' || substr(${text}, 21) AS REAL) * 1000000) AS INTEGER) ELSE 0 END`;
        return `strftime('%Y-%m-%dT%H:%M:%S', ${text}) || '.' || printf('%06d', ${fraction}) || 'Z'`;
      }
      default:
        return `(value ->> ${path})`;
    }
  };
  return `${insertInto(table, columns)}
    SELECT value ->> '$.id', ${columns.map(value).join(', ')}, @syncedAt, @runId, NULL
    FROM json_each(CAST(@page AS TEXT), '$.results') WHERE true
    ${onConflict(columns)}`;
}
