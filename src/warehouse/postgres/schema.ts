/**
 * Schema changes on PostgreSQL: create tables, add columns, widen columns (ALTER ... TYPE with a
 * USING conversion), inside the caller's transaction: DDL is transactional here.
 */
import type pg from 'pg';
import type { SchemaChange } from '../../interfaces.js';
import { WarehouseError } from '../../errors.js';
import { historyTableName, liveViewName, quoteIdentifier as q } from '../identifiers.js';
import type { PostgresConnection } from './connection.js';
import { POSTGRES_TYPE, POSTGRES_TYPES, wideningExpression } from './values.js';
import { checkDataColumns, requireColumn, requireType, wideningNeeded } from '../schema-changes.js';
import {
  addColumnSql,
  createLiveViewSql,
  createResourceTableSql,
  dropLiveViewSql,
} from '../table-definitions.js';

/** Applies one change inside the caller's transaction; false when it was already in place. */
export async function applyPostgresSchemaChange(
  connection: PostgresConnection,
  client: pg.ClientBase,
  change: SchemaChange,
  now: string,
): Promise<boolean> {
  const { table } = change;
  switch (change.kind) {
    case 'create_table': {
      if (await connection.tableExistsOn(client, table)) {
        throw new WarehouseError(
          `Cannot create table ${table}: it already exists in the warehouse.`,
        );
      }
      const columns = change.columns ?? [];
      checkDataColumns(table, columns);
      await client.query(createResourceTableSql(POSTGRES_TYPES, connection.table(table), columns));
      if (columns.length > 0) {
        await connection.run(
          client,
          connection.bookkeeping.insertColumnsQuery(table, columns, 0, now),
        );
      }
      return true;
    }
    case 'add_column': {
      const column = requireColumn(change);
      const type = requireType(change, change.toType);
      if (!(await connection.tableExistsOn(client, table))) {
        throw new WarehouseError(`Cannot add column ${column}: table ${table} does not exist.`);
      }
      checkDataColumns(table, [{ name: column, type }]);
      const existing = await connection.storedColumns(client, table);
      if (existing.some((spec) => spec.name === column)) {
        throw new WarehouseError(`Cannot add column ${table}.${column}: it already exists.`);
      }
      await client.query(addColumnSql(POSTGRES_TYPES, connection.table(table), column, type));
      const history = historyTableName(table);
      if (
        (await connection.tableExistsOn(client, history)) &&
        !(await connection.physicalColumns(client, history)).has(column)
      ) {
        await client.query(addColumnSql(POSTGRES_TYPES, connection.table(history), column, type));
      }
      await connection.run(
        client,
        connection.bookkeeping.insertColumnsQuery(
          table,
          [{ name: column, type }],
          existing.length,
          now,
        ),
      );
      return true;
    }
    case 'widen_column': {
      const column = requireColumn(change);
      const to = requireType(change, change.toType);
      const current = await connection.columnType(client, table, column);
      if (!wideningNeeded(change, column, current, to)) return false;
      const alter = (target: string) =>
        client.query(
          `ALTER TABLE ${connection.table(target)} ALTER COLUMN ${q(column)} TYPE ${POSTGRES_TYPE[to]} ` +
            `USING ${wideningExpression(column, current, to)}`,
        );
      await alter(table);
      const history = historyTableName(table);
      if (
        (await connection.tableExistsOn(client, history)) &&
        (await connection.physicalColumns(client, history)).has(column)
      ) {
        await alter(history);
      }
      await connection.run(client, connection.bookkeeping.setColumnTypeQuery(table, column, to));
      return true;
    }
    case 'drop_column': {
      const column = requireColumn(change);
      const stored = await connection.storedColumns(client, table);
      if (!stored.some((spec) => spec.name === column)) return false;
      const history = historyTableName(table);
      const targets = [table];
      if (
        (await connection.tableExistsOn(client, history)) &&
        (await connection.physicalColumns(client, history)).has(column)
      ) {
        targets.push(history);
      }
      for (const target of targets) {
        // Emptied first, so the values do not outlive the column in the live rows (DROP COLUMN
        // alone only hides them); VACUUM then frees the old row versions.
        await client.query(`UPDATE ${connection.table(target)} SET ${q(column)} = NULL`);
        await client.query(`ALTER TABLE ${connection.table(target)} DROP COLUMN ${q(column)}`);
      }
      await connection.run(client, connection.bookkeeping.dropColumnQuery(table, column));
      return true;
    }
  }
}

/** Drops `<table>__live` before its table changes shape (a view pins the columns it names). */
export async function dropPostgresLiveView(
  connection: PostgresConnection,
  client: pg.ClientBase,
  table: string,
): Promise<void> {
  // A resource that took the view's name keeps its table.
  if (await connection.tableExistsOn(client, liveViewName(table))) return;
  await client.query(dropLiveViewSql((name) => connection.table(name), table));
}

/** Creates `<table>__live` over the table's current columns. */
export async function createPostgresLiveView(
  connection: PostgresConnection,
  client: pg.ClientBase,
  table: string,
): Promise<void> {
  if (!(await connection.tableExistsOn(client, table))) return;
  if (await connection.tableExistsOn(client, liveViewName(table))) return;
  const columns = await connection.storedColumns(client, table);
  await client.query(createLiveViewSql((name) => connection.table(name), table, columns));
}
