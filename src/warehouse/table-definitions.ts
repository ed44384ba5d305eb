/**
 * The shape of the tables ocs-sync creates for each resource, written once for both dialects: a
 * dialect passes its SQL type names and a function that names a table in its own namespace.
 */
import type { ColumnSpec, ColumnType } from '../interfaces.js';
import { historyIndexName, quoteIdentifier as q } from './identifiers.js';

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
