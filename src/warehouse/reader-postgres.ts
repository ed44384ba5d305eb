/** The PostgreSQL side of WarehouseReader: one connection, search_path set to the schema. */
import pg from 'pg';
import { WarehouseError } from '../errors.js';
import {
  connectionHint,
  describePostgresUrl,
  postgresClientConfig,
  postgresRows,
  postgresTableFacts,
  safeCause,
  safeMessage,
} from './postgres.js';
import { WarehouseReader } from './reader.js';

export async function openPostgresReader(
  url: string,
  options: { schema: string; statementTimeoutSeconds?: number },
): Promise<WarehouseReader> {
  const description = describePostgresUrl(url, options.schema);
  const client = new pg.Client(
    postgresClientConfig(url, {
      schema: options.schema,
      statementTimeoutSeconds: options.statementTimeoutSeconds,
      connectTimeoutSeconds: 10,
    }),
  );
  client.on('error', () => undefined);
  try {
    await client.connect();
    const found = await client.query(
      `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = '_ocs_runs'`,
      [options.schema],
    );
    if ((found.rowCount ?? 0) === 0) {
      throw new WarehouseError(`There is no ocs-sync warehouse in ${description} yet.`, {
        hint: 'Check --warehouse / OCS_WAREHOUSE_URL and warehouse.schema, or run `ocs-sync sync` first to create it.',
      });
    }
  } catch (error) {
    await client.end().catch(() => undefined);
    if (error instanceof WarehouseError) throw error;
    throw new WarehouseError(`Cannot read ${description}: ${safeMessage(error)}`, {
      hint: connectionHint(error),
      cause: safeCause(error),
    });
  }
  return new WarehouseReader(
    description,
    postgresRows(client),
    postgresTableFacts(client, options.schema),
    () => client.end(),
  );
}
