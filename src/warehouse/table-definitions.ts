/**
 * The shape of the tables ocs-sync creates for each resource, written once for both dialects: a
 * dialect passes its SQL type names and a function that names a table in its own namespace.
 */
import type { ColumnSpec, ColumnType } from '../interfaces.js';
import {
  columnIndexName,
  historyIndexName,
  liveViewName,
  quoteIdentifier as q,
} from './identifiers.js';

export interface DialectTypes {
  /** SQL type of each logical column type. */
  column: Record<ColumnType, string>;
  /** A 64-bit integer (ids, run ids). */
  integer: string;
  /** An instant (our own `_` time columns). */
  time: string;
  /** The history table's own auto-increment primary key. */
  versionId: string;
}

/** The columns ocs-sync adds after a resource table's data columns, with their logical types. */
export const OWN_COLUMNS: readonly ColumnSpec[] = [
  { name: '_synced_at', type: 'datetime' },
  { name: '_run_id', type: 'integer' },
  { name: '_deleted_at', type: 'datetime' },
  // Set when the team's chatbot choice stopped serving the row; cleared when it is served again.
  { name: '_ocs_out_of_scope_since', type: 'datetime' },
  // The chatbot choice's key the row was last served under (`all`: the whole team).
  { name: '_ocs_served_under', type: 'text' },
];

/** Our columns as a page upsert lists them, after the data columns. */
export const OWN_COLUMN_NAMES: readonly string[] = OWN_COLUMNS.map((column) => q(column.name));

/**
 * What an upsert sets of our columns on a row it finds: a row served again is neither deleted
 * nor out of the choice any more.
 */
export const OWN_COLUMN_UPDATES: readonly string[] = [
  '"_synced_at" = excluded."_synced_at"',
  '"_run_id" = excluded."_run_id"',
  '"_deleted_at" = NULL',
  '"_ocs_out_of_scope_since" = NULL',
  '"_ocs_served_under" = excluded."_ocs_served_under"',
];

/** `<table>__history._ocs_version_kind` (VersionKind): why the version was written. */
export const VERSION_KIND_COLUMN = '_ocs_version_kind';

/**
 * The chatbot choice's key a row was last served under: on the resource table, and on each history
 * version (part of its canonical content, canonical.ts).
 */
export const SERVED_UNDER_COLUMN = '_ocs_served_under';

/** Set on a resource row the chatbot choice no longer serves; null again once it is served. */
export const OUT_OF_SCOPE_COLUMN = '_ocs_out_of_scope_since';

/** `"name" TYPE` for each data column. */
export function dataColumnDefinitions(
  types: DialectTypes,
  columns: readonly ColumnSpec[],
): string[] {
  return columns.map((column) => `${q(column.name)} ${types.column[column.type]}`);
}

/** CREATE TABLE of a resource: id, its data columns, then our own columns. */
export function createResourceTableSql(
  types: DialectTypes,
  qualifiedTable: string,
  columns: readonly ColumnSpec[],
): string {
  const definitions = [
    `"id" ${types.integer} PRIMARY KEY`,
    ...dataColumnDefinitions(types, columns),
    `"_synced_at" ${types.time} NOT NULL`,
    `"_run_id" ${types.integer}`,
    `"_deleted_at" ${types.time}`,
    `"_ocs_out_of_scope_since" ${types.time}`,
    '"_ocs_served_under" text',
  ];
  return `CREATE TABLE ${qualifiedTable} (${definitions.join(', ')})`;
}

/** CREATE TABLE and CREATE INDEX of a `<table>__history` table. */
export function createHistoryTableSql(
  types: DialectTypes,
  history: string,
  qualify: (name: string) => string,
  columns: readonly ColumnSpec[],
): string[] {
  const definitions = [
    `"_version_id" ${types.versionId}`,
    `"id" ${types.integer} NOT NULL`,
    ...dataColumnDefinitions(types, columns),
    `"_valid_from" ${types.time} NOT NULL`,
    `"_valid_to" ${types.time}`,
    '"_content_hash" text NOT NULL',
    `"_run_id" ${types.integer}`,
    `"${VERSION_KIND_COLUMN}" text NOT NULL DEFAULT 'served'`,
    `"${SERVED_UNDER_COLUMN}" text`,
  ];
  return [
    `CREATE TABLE ${qualify(history)} (${definitions.join(', ')})`,
    `CREATE INDEX ${q(historyIndexName(history))} ON ${qualify(history)} ("id", "_valid_to")`,
  ];
}

export function addColumnSql(
  types: DialectTypes,
  qualifiedTable: string,
  column: string,
  type: ColumnType,
): string {
  return `ALTER TABLE ${qualifiedTable} ADD COLUMN ${q(column)} ${types.column[type]}`;
}

/**
 * CREATE VIEW `<table>__live`: the table's rows not marked deleted, without `_deleted_at`; rows
 * out of the chatbot choice are live (the server still has them) and say so.
 */
export function createLiveViewSql(
  qualify: (name: string) => string,
  table: string,
  columns: readonly ColumnSpec[],
): string {
  const names = [
    '"id"',
    ...columns.map((column) => q(column.name)),
    '"_synced_at"',
    '"_run_id"',
    '"_ocs_out_of_scope_since"',
  ];
  return (
    `CREATE VIEW ${qualify(liveViewName(table))} AS SELECT ${names.join(', ')} ` +
    `FROM ${qualify(table)} WHERE "_deleted_at" IS NULL`
  );
}

export function dropLiveViewSql(qualify: (name: string) => string, table: string): string {
  return `DROP VIEW IF EXISTS ${qualify(liveViewName(table))}`;
}

/** The name is qualified by the table's schema implicitly (PostgreSQL) or needs none (SQLite). */
export function createIndexSql(
  qualify: (name: string) => string,
  table: string,
  column: string,
): string {
  return `CREATE INDEX IF NOT EXISTS ${q(columnIndexName(table, column))} ON ${qualify(table)} (${q(column)})`;
}

export function dropIndexSql(
  qualify: (name: string) => string,
  table: string,
  column: string,
): string {
  return `DROP INDEX IF EXISTS ${qualify(columnIndexName(table, column))}`;
}

/** Counts `values` and `unmatched` (values that are no id of the target table). */
export function referenceCheckSql(
  qualify: (name: string) => string,
  table: string,
  column: string,
  target: string,
): string {
  const ref = `t.${q(column)}`;
  return (
    `SELECT count(${ref}) AS "values", ` +
    `count(CASE WHEN ${ref} IS NOT NULL AND NOT EXISTS ` +
    `(SELECT 1 FROM ${qualify(target)} r WHERE r."id" = ${ref}) THEN 1 END) AS "unmatched" ` +
    `FROM ${qualify(table)} t`
  );
}
