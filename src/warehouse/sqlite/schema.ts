/**
 * Schema changes on SQLite: create tables, add columns, widen columns, inside the caller's write
 * transaction. SQLite cannot change a column's type, so widening copies through a new column.
 */
import type { ColumnType, SchemaChange } from '../../interfaces.js';
import { WarehouseError } from '../../errors.js';
import { historyTableName, liveViewName, quoteIdentifier as q } from '../identifiers.js';
import { checkDataColumns, requireColumn, requireType, wideningNeeded } from '../schema-changes.js';
import type { SqliteConnection } from './connection.js';
import { SQLITE_TYPE, SQLITE_TYPES, decodeValue, encodeValue } from './values.js';
import {
  addColumnSql,
  createLiveViewSql,
  createResourceTableSql,
  dropIndexSql,
  dropLiveViewSql,
} from '../table-definitions.js';

/** Rows read per batch when a widened column's values are converted. */
const WIDEN_BATCH = 5000;

/** Applies one change inside the caller's transaction; false when it was already in place. */
export function applySqliteSchemaChange(
  connection: SqliteConnection,
  change: SchemaChange,
  now: string,
): boolean {
  const { db, bookkeeping } = connection;
  const { table } = change;
  switch (change.kind) {
    case 'create_table': {
      if (connection.tableExists(table)) {
        throw new WarehouseError(
          `Cannot create table ${table}: it already exists in the warehouse.`,
        );
      }
      const columns = change.columns ?? [];
      checkDataColumns(table, columns);
      db.exec(createResourceTableSql(SQLITE_TYPES, q(table), columns));
      if (columns.length > 0)
        connection.run(bookkeeping.insertColumnsQuery(table, columns, 0, now));
      return true;
    }
    case 'add_column': {
      const column = requireColumn(change);
      const type = requireType(change, change.toType);
      if (!connection.tableExists(table)) {
        throw new WarehouseError(`Cannot add column ${column}: table ${table} does not exist.`);
      }
      checkDataColumns(table, [{ name: column, type }]);
      const existing = connection.storedColumns(table);
      if (existing.some((spec) => spec.name === column)) {
        throw new WarehouseError(`Cannot add column ${table}.${column}: it already exists.`);
      }
      db.exec(addColumnSql(SQLITE_TYPES, q(table), column, type));
      const history = historyTableName(table);
      if (
        connection.tableExists(history) &&
        !connection.physicalColumns(history).includes(column)
      ) {
        db.exec(addColumnSql(SQLITE_TYPES, q(history), column, type));
      }
      connection.run(
        bookkeeping.insertColumnsQuery(table, [{ name: column, type }], existing.length, now),
      );
      return true;
    }
    case 'widen_column': {
      const column = requireColumn(change);
      const to = requireType(change, change.toType);
      const current = connection.columnType(table, column);
      if (!wideningNeeded(change, column, current, to)) return false;
      // SQLite refuses to drop an indexed column, which widening does; ensureIndexes restores it.
      db.exec(dropIndexSql(q, table, column));
      widenColumn(connection, table, 'id', column, current, to);
      const history = historyTableName(table);
      if (connection.tableExists(history) && connection.physicalColumns(history).includes(column)) {
        widenColumn(connection, history, '_version_id', column, current, to);
      }
      connection.run(bookkeeping.setColumnTypeQuery(table, column, to));
      return true;
    }
    case 'drop_column': {
      const column = requireColumn(change);
      if (!connection.storedColumns(table).some((spec) => spec.name === column)) return false;
      // SQLite refuses to drop an indexed column.
      db.exec(dropIndexSql(q, table, column));
      const history = historyTableName(table);
      const targets = [table];
      if (connection.tableExists(history) && connection.physicalColumns(history).includes(column)) {
        targets.push(history);
      }
      for (const target of targets) {
        // Emptied first, then dropped; the caller rebuilds the file so no copy stays behind.
        db.exec(`UPDATE ${q(target)} SET ${q(column)} = NULL`);
        db.exec(`ALTER TABLE ${q(target)} DROP COLUMN ${q(column)}`);
      }
      connection.run(bookkeeping.dropColumnQuery(table, column));
      return true;
    }
  }
}

/**
 * Adds a new column of the wider type, copies the values converted in JS with the same encoders
 * as page writes (so a widened value reads exactly like one written after the widening), drops
 * the old column and renames the new one.
 */
function widenColumn(
  connection: SqliteConnection,
  table: string,
  key: string,
  column: string,
  from: ColumnType,
  to: ColumnType,
): void {
  const { db } = connection;
  const sameStorage = SQLITE_TYPE[from] === SQLITE_TYPE[to];
  // A date-time widened to text takes the server's form, as it does on PostgreSQL.
  const sameEncoding = from !== 'boolean' && from !== 'datetime' && to !== 'json';
  if (sameStorage && sameEncoding) return; // date -> text: the same text, the same TEXT column.
  const temporary = `${column}__ocs_widening`;
  db.exec(`ALTER TABLE ${q(table)} ADD COLUMN ${q(temporary)} ${SQLITE_TYPE[to]}`);
  const select = `SELECT ${q(key)} AS key, ${q(column)} AS value FROM ${q(table)} WHERE ${q(column)} IS NOT NULL`;
  const readFirst = db
    .prepare(`${select} ORDER BY ${q(key)} LIMIT ${WIDEN_BATCH}`)
    .safeIntegers(true);
  const readAfter = db
    .prepare(`${select} AND ${q(key)} > ? ORDER BY ${q(key)} LIMIT ${WIDEN_BATCH}`)
    .safeIntegers(true);
  const write = db.prepare(`UPDATE ${q(table)} SET ${q(temporary)} = ? WHERE ${q(key)} = ?`);
  // Batches by key: better-sqlite3 cannot write while a read is still iterating.
  let after: bigint | undefined;
  for (;;) {
    const batch = (after === undefined ? readFirst.all() : readAfter.all(after)) as Array<{
      key: bigint;
      value: unknown;
    }>;
    for (const row of batch) write.run(encodeValue(to, decodeValue(from, row.value)), row.key);
    if (batch.length < WIDEN_BATCH) break;
    after = batch[batch.length - 1]!.key;
  }
  db.exec(`ALTER TABLE ${q(table)} DROP COLUMN ${q(column)}`);
  db.exec(`ALTER TABLE ${q(table)} RENAME COLUMN ${q(temporary)} TO ${q(column)}`);
}

/** Drops `<table>__live` before its table changes shape (a view pins the columns it names). */
export function dropSqliteLiveView(connection: SqliteConnection, table: string): void {
  // A resource that took the view's name keeps its table.
  if (connection.tableExists(liveViewName(table))) return;
  connection.db.exec(dropLiveViewSql(q, table));
}

/** Creates `<table>__live` over the table's current columns. */
export function createSqliteLiveView(connection: SqliteConnection, table: string): void {
  if (!connection.tableExists(table) || connection.tableExists(liveViewName(table))) return;
  connection.db.exec(createLiveViewSql(q, table, connection.storedColumns(table)));
}
