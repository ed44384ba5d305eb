/**
 * Migration steps SQL alone cannot do on PostgreSQL, keyed by migration version; each runs right
 * after its migration's SQL, inside the same transaction.
 */
import type pg from 'pg';
import type { PostgresConnection } from './connection.js';
import { historyTableName } from '../identifiers.js';
import { createPostgresLiveView, dropPostgresLiveView } from './schema.js';
import { SERVED_UNDER_COLUMN, VERSION_KIND_COLUMN } from '../table-definitions.js';

/** The resource tables: ours have `_deleted_at`; history tables have `_version_id`. */
export async function postgresResourceTables(
  connection: PostgresConnection,
  client: pg.ClientBase,
): Promise<string[]> {
  const result = await client.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_catalog.pg_class c
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE '\\_ocs%'
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
                   AND a.attname = '_deleted_at' AND NOT a.attisdropped)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
                   AND a.attname = '_version_id' AND NOT a.attisdropped)
     ORDER BY c.relname`,
    [connection.schema],
  );
  return result.rows.map((row) => row.name);
}

/** A `__live` view for every resource table (date-times stay timestamptz here). */
async function analystsWarehouse(
  connection: PostgresConnection,
  client: pg.ClientBase,
): Promise<void> {
  for (const table of await postgresResourceTables(connection, client)) {
    await dropPostgresLiveView(connection, client, table);
    await createPostgresLiveView(connection, client, table);
  }
}

/** Migration 008: the chatbot choice's own columns on every resource and history table. */
async function chatbotChoice(connection: PostgresConnection, client: pg.ClientBase): Promise<void> {
  for (const table of await postgresResourceTables(connection, client)) {
    await dropPostgresLiveView(connection, client, table);
    await client.query(
      `ALTER TABLE ${connection.table(table)} ADD COLUMN IF NOT EXISTS "_ocs_out_of_scope_since" timestamptz, ` +
        'ADD COLUMN IF NOT EXISTS "_ocs_served_under" text',
    );
    const history = historyTableName(table);
    if (await connection.tableExistsOn(client, history)) {
      await client.query(
        `ALTER TABLE ${connection.table(history)} ADD COLUMN IF NOT EXISTS "${VERSION_KIND_COLUMN}" text NOT NULL DEFAULT 'served'`,
      );
    }
    await createPostgresLiveView(connection, client, table);
  }
}

/** Migration 009: every history table records the choice each version was served under. */
async function servedUnderHistory(
  connection: PostgresConnection,
  client: pg.ClientBase,
): Promise<void> {
  for (const table of await postgresResourceTables(connection, client)) {
    const history = historyTableName(table);
    if (await connection.tableExistsOn(client, history)) {
      await client.query(
        `ALTER TABLE ${connection.table(history)} ADD COLUMN IF NOT EXISTS "${SERVED_UNDER_COLUMN}" text`,
      );
    }
  }
}

export const POSTGRES_MIGRATION_CODE: ReadonlyMap<
  number,
  (connection: PostgresConnection, client: pg.ClientBase) => Promise<void>
> = new Map([
  [4, analystsWarehouse],
  [8, chatbotChoice],
  [9, servedUnderHistory],
]);
