/**
 * `audit verify`'s view of a PostgreSQL warehouse: one connection in one REPEATABLE READ, READ
 * ONLY transaction, so every batch sees the same warehouse while syncs go on committing.
 */
import type { AuditSnapshot } from '../../interfaces.js';
import { SqlAuditSnapshot } from '../audit-snapshot.js';
import type { PostgresConnection } from './connection.js';
import { clientRun } from './history.js';
import { POSTGRES_RULES } from './rules.js';
import { decodeValue, readExpression } from './values.js';

export async function openPostgresSnapshot(connection: PostgresConnection): Promise<AuditSnapshot> {
  const client = await connection.pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  } catch (error) {
    client.release(error instanceof Error ? error : undefined);
    throw error;
  }
  const run = clientRun(client);
  let closed = false;
  return new SqlAuditSnapshot({
    rules: POSTGRES_RULES,
    all: (sql, parameters = []) => run(sql, parameters),
    readExpression,
    decode: decodeValue,
    existingTables: async () =>
      new Set(
        (
          await run(
            `SELECT c.relname AS name FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = ? AND c.relkind IN ('r', 'p')`,
            [connection.schema],
          )
        ).map((row) => String(row.name)),
      ),
    physicalColumns: (table) => connection.physicalColumns(client, table),
    close: async () => {
      if (closed) return;
      closed = true;
      try {
        await client.query('COMMIT');
        client.release();
      } catch (error) {
        client.release(error instanceof Error ? error : undefined);
      }
    },
  });
}
