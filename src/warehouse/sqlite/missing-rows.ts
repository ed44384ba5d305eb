/**
 * SQLite's side of marking missing rows (../missing-rows.ts): `?` placeholders in the order they
 * appear, `IS NOT` for a null-safe comparison, JSON lists through json_each, and one write
 * transaction on the warehouse's connection.
 */
import { quoteIdentifier as q, historyTableName } from '../identifiers.js';
import type { ChoiceSqlDialect } from '../missing-under-choice.js';
import type { MissingRowsDialect } from '../missing-rows.js';
import type { SqliteConnection } from './connection.js';
import type { SqliteHistoryWriter } from './history.js';
import type { SqliteValue } from './values.js';

/** SQLite's side of the clauses that settle rows missing under a chatbot choice. */
const SQLITE_CHOICE_SQL: ChoiceSqlDialect = {
  table: q,
  placeholder: () => '?',
  // CASE, not AND: SQLite evaluates only the branch taken, and json_type fails on bad JSON.
  listIds: (alias, column) => {
    const value = `${alias}.${q(column)}`;
    return {
      join: `, json_each(CASE WHEN json_valid(${value}) THEN CASE WHEN json_type(${value}) = 'array' THEN ${value} END END) AS e`,
      id: `CASE WHEN e.type = 'integer' THEN e.value END`,
    };
  },
};

/**
 * The marking on this connection. Its transaction is BEGIN IMMEDIATE ... COMMIT around awaits
 * that all resolve at once (every call below is synchronous), so no timer's work (the lock's
 * heartbeat) runs inside it; the caller runs it alone on the connection (exclusive).
 */
export function sqliteMissingRows(
  connection: SqliteConnection,
  history: SqliteHistoryWriter,
): MissingRowsDialect {
  const db = connection.db;
  return {
    choice: SQLITE_CHOICE_SQL,
    // IS NOT: null-safe, so rows no run has claimed count as missing too.
    notWrittenBy: (runId) => ({
      sql: `WHERE "_run_id" IS NOT ? AND "_deleted_at" IS NULL`,
      parameters: [runId],
    }),
    setTime: (table, column, at, where) => ({
      sql: `UPDATE ${q(table)} SET ${q(column)} = ? ${where.sql}`,
      parameters: [at, ...where.parameters],
    }),
    transaction: async (work) => {
      db.exec('BEGIN IMMEDIATE');
      try {
        const result = await work({
          tableExists: async (table) => connection.tableExists(table),
          storedColumns: async (table) => connection.storedColumns(table),
          physicalColumns: async (table) => new Set(connection.physicalColumns(table)),
          run: async ({ sql, parameters }) =>
            db.prepare(sql).run(...(parameters as SqliteValue[])).changes,
          closeVersions: async (table, where, change) =>
            history.close(table, historyTableName(table), where, change),
          exitScope: async (table, columns, where, change) =>
            history.exitScope(table, historyTableName(table), columns, where, change),
        });
        db.exec('COMMIT');
        return result;
      } catch (error) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw error;
      }
    },
  };
}
