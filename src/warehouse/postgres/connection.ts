/**
 * The PostgreSQL warehouse's connection: the connection settings (search_path, TimeZone,
 * statement_timeout on every connection), a pg pool shared with kysely, transactions, catalog
 * look-ups, and error text that never quotes a stored value.
 */
import { createHash } from 'node:crypto';
import { Kysely, PostgresDialect, type Compilable } from 'kysely';
import pg from 'pg';
import type { ColumnSpec, ColumnType } from '../../interfaces.js';
import { OcsSyncError, WarehouseError } from '../../errors.js';
import { Bookkeeping, type BookkeepingTables } from '../bookkeeping.js';
import { quoteIdentifier as q } from '../identifiers.js';
import type { WarehouseLogger } from '../writer-lock.js';

const SAFE_SCHEMA = /^[a-z][a-z0-9_]{0,62}$/;
const INT8_OID = 20;

/** The URL without the password and any query parameter other than sslmode and host. */
export function describePostgresUrl(url: string, schema: string): string {
  try {
    const parsed = new URL(url);
    const kept = new URLSearchParams();
    for (const name of ['host', 'sslmode']) {
      const value = parsed.searchParams.get(name);
      if (value !== null) kept.set(name, value);
    }
    const user = parsed.username ? `${parsed.username}@` : '';
    const query = kept.size > 0 ? `?${kept.toString()}` : '';
    return `postgres://${user}${parsed.host}${parsed.pathname}${query} (schema ${schema})`;
  } catch {
    return `postgres (schema ${schema})`;
  }
}

/** The URL as pg takes it, with its `options` parameter (if any) taken out. */
function splitUrlOptions(url: string): { connectionString: string; userOptions: string } {
  try {
    const parsed = new URL(url);
    const userOptions = parsed.searchParams.get('options') ?? '';
    parsed.searchParams.delete('options');
    return { connectionString: parsed.toString(), userOptions };
  } catch {
    // No cause: Node's URL error carries the whole input, password included.
    throw new WarehouseError('The PostgreSQL warehouse URL cannot be parsed.', {
      hint: 'Use postgres://user:password@host:5432/database (percent-encode special characters).',
    });
  }
}

/**
 * The pg client config. pg lets settings in the URL win over explicit ones, so the URL's own
 * `options` are taken out of it and put in front of ours, where ours win.
 */
export function postgresClientConfig(
  url: string,
  settings: { schema: string; statementTimeoutSeconds?: number; connectTimeoutSeconds?: number },
): pg.ClientConfig {
  const { connectionString, userOptions } = splitUrlOptions(url);
  const timeoutMs = Math.max(0, Math.round((settings.statementTimeoutSeconds ?? 0) * 1000));
  // Ours come last so they win over the same settings in the URL's options.
  const options = [
    userOptions,
    `-c search_path=${settings.schema}`,
    '-c TimeZone=UTC',
    '-c DateStyle=ISO',
    // A double's text is exact (shortest round-trip form from PostgreSQL 12, 17 digits before).
    '-c extra_float_digits=3',
    `-c statement_timeout=${timeoutMs}`,
  ]
    .filter(Boolean)
    .join(' ');
  return {
    connectionString,
    options,
    application_name: 'ocs-sync',
    keepAlive: true,
    connectionTimeoutMillis: Math.round((settings.connectTimeoutSeconds ?? 30) * 1000),
    // int8 always as exact decimal text: ids are 64-bit (pg's default, pinned here so a global
    // setTypeParser elsewhere cannot turn them into rounded numbers).
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === INT8_OID
          ? (value: string) => value
          : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  };
}

/** A stable signed 64-bit advisory-lock key for a purpose and schema. */
export function advisoryLockKey(purpose: string, schema: string): string {
  const digest = createHash('sha256').update(`ocs-sync:${purpose}:${schema}`).digest();
  return digest.readBigInt64BE(0).toString();
}

/** A PostgreSQL error's message without quoted values (a value may be a secret) and its code. */
export function safeMessage(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const message = error.message.replace(/: ".*$/s, ': (value not shown)');
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)
    ? `${message} (SQLSTATE ${code})`
    : message;
}

/**
 * The error to keep as `cause`: never a database error, whose `detail` may quote a whole row
 * (an unsealed value among it) and would reach logs that print causes.
 */
export function safeCause(error: unknown): unknown {
  return error !== null && typeof error === 'object' && 'severity' in error
    ? new Error(safeMessage(error))
    : error;
}

export function connectionHint(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  switch (code) {
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
      return 'Check the host and port in warehouse.url and that PostgreSQL accepts connections.';
    case '28P01':
    case '28000':
      return 'Check the user and password in warehouse.url (or PGPASSWORD / ~/.pgpass).';
    case '3D000':
      return 'Create the database first (createdb), or fix its name in warehouse.url.';
    case '42501':
      return 'The user lacks a privilege: it needs CREATE on the database (or an existing schema it owns).';
    default:
      return undefined;
  }
}

/** Something to run one query on: the pool (any free connection) or a held connection. */
export type Queryable = Pick<pg.ClientBase, 'query'>;

/** A named statement: pg prepares it once per connection; the name is derived from the text. */
export function named(text: string): { name: string; text: string } {
  return { name: `ocs_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text };
}

export interface PostgresConnectionOptions {
  url: string;
  schema: string;
  poolSize: number;
  statementTimeoutSeconds?: number;
  connectTimeoutSeconds?: number;
  logger?: WarehouseLogger;
}

export class PostgresConnection {
  readonly schema: string;
  readonly description: string;
  /** Settings for a connection of its own (the writer lock's). */
  readonly clientConfig: pg.ClientConfig;
  readonly pool: pg.Pool;
  readonly kysely: Kysely<BookkeepingTables>;
  readonly bookkeeping: Bookkeeping;
  private closed = false;

  constructor(options: PostgresConnectionOptions) {
    this.schema = options.schema;
    if (!SAFE_SCHEMA.test(this.schema)) {
      throw new WarehouseError(
        `PostgreSQL schema name ${JSON.stringify(this.schema.slice(0, 80))} is not allowed.`,
        { hint: 'Use a lower-case name matching ^[a-z][a-z0-9_]{0,62}$, such as ocs.' },
      );
    }
    this.description = describePostgresUrl(options.url, this.schema);
    this.clientConfig = postgresClientConfig(options.url, {
      schema: this.schema,
      statementTimeoutSeconds: options.statementTimeoutSeconds,
      connectTimeoutSeconds: options.connectTimeoutSeconds,
    });
    const { poolSize, logger } = options;
    if (!Number.isSafeInteger(poolSize) || poolSize < 1) {
      throw new WarehouseError(`PostgreSQL pool size must be a positive integer, not ${poolSize}.`);
    }
    this.pool = new pg.Pool({ ...this.clientConfig, max: poolSize, idleTimeoutMillis: 30_000 });
    // An idle connection that dies (server restart) must not crash the process; the next
    // checkout simply opens a new one.
    this.pool.on('error', (error) => {
      logger?.warn({ err: safeMessage(error) }, 'An idle PostgreSQL connection failed');
    });
    // A checked-out connection that dies between two queries emits 'error' with no pool listener
    // attached, which would crash the process. Its next query fails and reports it instead, and
    // the pool drops the connection on release.
    this.pool.on('connect', (client) => {
      client.on('error', () => undefined);
    });
    this.kysely = new Kysely<BookkeepingTables>({
      dialect: new PostgresDialect({ pool: this.pool }),
    });
    this.bookkeeping = new Bookkeeping(this.kysely);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** A table of the warehouse's schema, quoted and qualified. */
  table(name: string): string {
    return `${q(this.schema)}.${q(name)}`;
  }

  assertOpen(): void {
    if (this.closed) throw new WarehouseError(`The warehouse ${this.description} is closed.`);
  }

  /** Runs work, turning driver errors into a WarehouseError that names what failed. */
  async guard<T>(action: string, work: () => Promise<T>): Promise<T> {
    this.assertOpen();
    try {
      return await work();
    } catch (error) {
      if (error instanceof OcsSyncError) throw error;
      throw new WarehouseError(`${action} in ${this.description} failed: ${safeMessage(error)}`, {
        hint: connectionHint(error),
        cause: safeCause(error),
      });
    }
  }

  async withClient<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      return await work(client);
    } catch (error) {
      broken = (error as { brokenConnection?: Error }).brokenConnection;
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** BEGIN ... COMMIT on one pooled connection; a connection whose ROLLBACK fails is discarded. */
  transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.withClient(async (client) => {
      await client.query('BEGIN');
      try {
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          if (error !== null && typeof error === 'object') {
            (error as { brokenConnection?: Error }).brokenConnection =
              rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
          }
        }
        throw error;
      }
    });
  }

  async run(client: Queryable, query: Compilable): Promise<pg.QueryResult> {
    const compiled = query.compile();
    return client.query(compiled.sql, compiled.parameters as unknown[]);
  }

  async tableExistsOn(client: Queryable, table: string): Promise<boolean> {
    const result = await client.query(
      `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
      [this.schema, table],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async physicalColumns(client: Queryable, table: string): Promise<Set<string>> {
    const result = await client.query<{ name: string }>(
      `SELECT a.attname AS name FROM pg_catalog.pg_attribute a
       JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped`,
      [this.schema, table],
    );
    return new Set(result.rows.map((row) => row.name));
  }

  async storedColumns(client: Queryable, table: string): Promise<ColumnSpec[]> {
    const result = await this.run(client, this.bookkeeping.columnsQuery(table));
    return (result.rows as Array<{ column_name: string; column_type: ColumnType }>).map((row) => ({
      name: row.column_name,
      type: row.column_type,
    }));
  }

  async columnType(client: Queryable, table: string, column: string): Promise<ColumnType> {
    const spec = (await this.storedColumns(client, table)).find((c) => c.name === column);
    if (!spec) throw new WarehouseError(`Table ${table} has no column ${column} in the warehouse.`);
    return spec.type;
  }

  /**
   * Runs work on one connection with no statement_timeout: for maintenance that scans or rewrites
   * a whole table once (an index build, a reference check, VACUUM FULL), which a timeout sized for
   * page writes would cut short every time.
   */
  withoutTimeout<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.withClient(async (client) => {
      await client.query('SET statement_timeout = 0');
      try {
        return await work(client);
      } finally {
        await client.query('RESET statement_timeout');
      }
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.kysely.destroy();
    // kysely ends the pool only when it used it.
    if (!this.pool.ended && !this.pool.ending) await this.pool.end();
  }
}
