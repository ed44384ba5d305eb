/** The PostgreSQL side of WarehouseReader: one connection, search_path set to the schema. */
import pg from 'pg';
import { WarehouseError } from '../../errors.js';
import type { WarehouseProbe } from '../probe.js';
import {
  advisoryLockKey,
  connectionHint,
  describePostgresUrl,
  postgresClientConfig,
  safeCause,
  safeMessage,
  type Queryable,
} from './connection.js';
import { readSql } from './values.js';
import { WarehouseReader, type SqlRows, type TableFacts } from '../reader.js';

/** `?` placeholders become `$1, $2, …` (our SQL never has a `?` inside a string). */
export function postgresRows(client: Queryable): SqlRows {
  return {
    all: async (sql, parameters = []) => {
      let index = 0;
      const text = sql.replace(/\?/g, () => `$${++index}`);
      return (await client.query(text, parameters as unknown[])).rows as Array<
        Record<string, unknown>
      >;
    },
  };
}

export function postgresTableFacts(client: Queryable, schema: string): TableFacts {
  const rows = postgresRows(client);
  return {
    existingTables: async () =>
      new Set(
        (
          await rows.all(
            `SELECT c.relname AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = ? AND c.relkind IN ('r', 'p')`,
            [schema],
          )
        ).map((row) => String(row.name)),
      ),
    // The newest by the stored value (a time for timestamptz), shown as ISO text.
    newestUpdatedAtSql: (_table, columnType) =>
      columnType === 'datetime' || columnType === 'date' || columnType === 'text'
        ? readSql('max("updated_at")', columnType)
        : undefined,
    updatedAtText: (value) => (typeof value === 'string' ? value : null),
  };
}

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
    () => writerLockHeld(postgresRows(client), options.schema),
  );
}

/**
 * Whether a session holds the writer's advisory lock, read from pg_locks (readable by every
 * user): trying the lock would, for an instant, refuse a writer that is starting.
 */
async function writerLockHeld(rows: SqlRows, schema: string): Promise<boolean> {
  const key = BigInt.asUintN(64, BigInt(advisoryLockKey('writer', schema)));
  const [row] = await rows.all(
    `SELECT count(*) AS held FROM pg_catalog.pg_locks
     WHERE locktype = 'advisory' AND granted AND objsubid = 1
       AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
       AND classid = ?::oid AND objid = ?::oid`,
    [(key >> 32n).toString(), (key & 0xffffffffn).toString()],
  );
  return Number(row?.held) > 0;
}

/** `check`'s look at a PostgreSQL warehouse (see ../probe.ts): privileges and the lock, no writes. */
export async function probePostgres(
  url: string,
  schema: string,
  readLock: (reader: WarehouseReader) => Promise<Pick<WarehouseProbe, 'lock' | 'schemaChecksum'>>,
): Promise<WarehouseProbe> {
  const description = describePostgresUrl(url, schema);
  const client = new pg.Client(postgresClientConfig(url, { schema, connectTimeoutSeconds: 10 }));
  client.on('error', () => undefined);
  try {
    await client.connect();
    const rows = postgresRows(client);
    const [facts] = await rows.all(
      `SELECT
         (SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = ?) AS schema_exists,
         (SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = ? AND c.relname = '_ocs_runs') AS tables_exist,
         has_database_privilege(current_database(), 'CREATE') AS may_create_schema`,
      [schema, schema],
    );
    const schemaExists = Number(facts?.schema_exists) > 0;
    const exists = Number(facts?.tables_exist) > 0;
    let notWritable: string | undefined;
    if (!schemaExists) {
      if (facts?.may_create_schema !== true) {
        notWritable = `the schema ${schema} does not exist and this user may not create it (GRANT CREATE ON DATABASE, or create the schema for it)`;
      }
    } else {
      const [privileges] = await rows.all(
        `SELECT has_schema_privilege(?, 'CREATE') AS may_create,
           ${exists ? "has_table_privilege('_ocs_runs', 'INSERT') AND has_table_privilege('_ocs_resources', 'UPDATE')" : 'true'} AS may_write`,
        [schema],
      );
      if (privileges?.may_create !== true || privileges?.may_write !== true) {
        notWritable = `this user lacks CREATE on the schema ${schema} or write access to its tables (GRANT them, or use the schema's owner)`;
      }
    }
    if (!exists) return { description, exists, notWritable, lock: { state: 'free' } };
    const reader = new WarehouseReader(
      description,
      rows,
      postgresTableFacts(client, schema),
      async () => undefined,
      () => writerLockHeld(rows, schema),
    );
    return { description, exists, notWritable, ...(await readLock(reader)) };
  } catch (error) {
    throw new WarehouseError(`Cannot reach ${description}: ${safeMessage(error)}`, {
      hint: connectionHint(error),
      cause: safeCause(error),
    });
  } finally {
    await client.end().catch(() => undefined);
  }
}
