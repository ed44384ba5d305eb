/**
 * PostgreSQL's side of marking missing rows (../missing-rows.ts): numbered, typed placeholders,
 * `IS DISTINCT FROM` for a null-safe comparison, JSON lists through jsonb_array_elements, names
 * qualified by the schema, and one transaction on a client of the pool.
 */
import { historyTableName, quoteIdentifier as q } from '../identifiers.js';
import type { ChoiceSqlDialect } from '../missing-under-choice.js';
import type { MissingRowsDialect } from '../missing-rows.js';
import type { PostgresConnection } from './connection.js';
import { closeVersions, exitScope } from './history.js';

/** PostgreSQL's side of the clauses that settle rows missing under a chatbot choice. */
function postgresChoiceSql(table: (name: string) => string): ChoiceSqlDialect {
  return {
    table,
    placeholder: (position, type) => `$${position}::${type}`,
    // CASE: PostgreSQL evaluates only the branch taken, so no cast meets a value it cannot take.
    listIds: (alias, column) => {
      const value = `${alias}.${q(column)}`;
      return {
        join: `CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(${value}) = 'array' THEN ${value} END) AS e(value)`,
        id: `CASE WHEN jsonb_typeof(e.value) = 'number' AND (e.value #>> '{}') ~ '^-?[0-9]{1,18}$' THEN (e.value #>> '{}')::bigint END`,
      };
    },
  };
}

export function postgresMissingRows(connection: PostgresConnection): MissingRowsDialect {
  const table = (name: string) => connection.table(name);
  const qualified = (name: string) => ({
    table: table(name),
    history: table(historyTableName(name)),
  });
  return {
    choice: postgresChoiceSql(table),
    // IS DISTINCT FROM: null-safe, so rows no run has claimed count as missing too.
    notWrittenBy: (runId) => ({
      sql: `WHERE "_run_id" IS DISTINCT FROM $1::bigint AND "_deleted_at" IS NULL`,
      parameters: [runId],
    }),
    setTime: (name, column, at, where) => ({
      sql: `UPDATE ${table(name)} SET ${q(column)} = $${where.parameters.length + 1}::timestamptz ${where.sql}`,
      parameters: [...where.parameters, at],
    }),
    transaction: (work) =>
      connection.transaction((client) =>
        work({
          tableExists: (name) => connection.tableExistsOn(client, name),
          storedColumns: (name) => connection.storedColumns(client, name),
          physicalColumns: (name) => connection.physicalColumns(client, name),
          run: async ({ sql, parameters }) => (await client.query(sql, parameters)).rowCount ?? 0,
          closeVersions: (name, where, change) =>
            closeVersions(client, qualified(name), name, where, change),
          exitScope: (name, columns, where, change) =>
            exitScope(client, qualified(name), name, columns, where, change),
        }),
      ),
  };
}
