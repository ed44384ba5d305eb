/**
 * The PostgreSQL warehouse: every table in one schema (`ocs` by default), reached through a pg
 * pool whose connections start with search_path, TimeZone and statement_timeout set.
 *
 * kysely runs the shared bookkeeping; the page-upsert hot path is ONE named statement per page,
 * `INSERT ... SELECT * FROM unnest($1::bigint[], $2::text[], ...) ON CONFLICT ("id") DO UPDATE`:
 * measured as fast as a 1000-row VALUES statement (bench/postgres-upsert.ts), with a fixed
 * parameter count (no 65 535-parameter ceiling for wide tables) and one prepared statement for
 * every page size. Each page is one transaction holding its rows, its history versions and its
 * cursor. PostgreSQL refuses `\u0000` in text and jsonb: it is removed and counted as altered.
 */
import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kysely, PostgresDialect, type Compilable } from 'kysely';
import pg from 'pg';
import type {
  ColumnSpec,
  ColumnType,
  DeleteMode,
  Lock,
  LockHolder,
  PageWrite,
  PageWriteResult,
  ResourceOutcome,
  ResourceState,
  ResourceStatus,
  Row,
  RunKind,
  RunSummary,
  SchemaChange,
  Warehouse,
} from '../interfaces.js';
import { LockHeldError, OcsSyncError, WarehouseError } from '../errors.js';
import { Bookkeeping, nowIso, toIsoText, type BookkeepingTables } from './bookkeeping.js';
import { planHistoryVersions } from './history.js';
import { isInt64 } from '../sync/column-types.js';
import {
  assertHistoryTable,
  assertSafeColumnName,
  assertSafeTableName,
  historyIndexName,
  historyTableName,
  quoteIdentifier as q,
} from './identifiers.js';
import {
  assertSafeSchemaChanges,
  checkDataColumns,
  requireColumn,
  requireType,
  wideningNeeded,
} from './schema-changes.js';
import { applyMigrations, type Migration } from './migrations.js';
import { PostgresArchiveStore } from './postgres-archive.js';
import type { WarehouseLogger } from './sqlite.js';
import {
  assertValueFits,
  checkedRowId,
  fromJsonText,
  narrowInteger,
  parseIdText,
  rowContentHasher,
  toJsonText,
} from './values.js';

export interface PostgresWarehouseOptions {
  /** postgres://user:password@host:port/database?sslmode=... (pg reads sslmode from it). */
  url: string;
  /** Schema holding every table; created when missing. Default `ocs`. */
  schema?: string;
  /** Connections in the pool. Default 4. */
  poolSize?: number;
  /** statement_timeout for every statement; 0 or absent: none. */
  statementTimeoutSeconds?: number;
  /** How long to wait for a new connection. Default 30. */
  connectTimeoutSeconds?: number;
  /**
   * Sets the lock heartbeat's pace (a quarter of it, 1-5 s). The advisory lock itself never goes
   * stale: PostgreSQL frees it when the holder's session ends. Default 600.
   */
  lockStaleAfterSeconds?: number;
  logger?: WarehouseLogger;
}

/** SQL type of each logical column type. */
export const POSTGRES_TYPE: Record<ColumnType, string> = {
  integer: 'bigint',
  number: 'double precision',
  // Exact: an integer column widened by a fraction keeps its ids past 2^53.
  decimal: 'numeric',
  boolean: 'boolean',
  text: 'text',
  datetime: 'timestamptz',
  date: 'date',
  json: 'jsonb',
};

const SAFE_SCHEMA = /^[a-z][a-z0-9_]{0,62}$/;
const LOCK_NAME = 'writer';
const LOCK_POLL_MS = 250;
const INT8_OID = 20;
/** Decimal text of an integer short enough that it may fit 64 bits. */
const INTEGER_TEXT = /^-?\d{1,19}$/;

/**
 * A timestamptz as ISO 8601 UTC text the way the server writes times (Python isoformat with Z):
 * six fraction digits when there is a fraction, none when there is not. Used for reads and for
 * widening datetime to text, so a widened value looks like one the server sends later.
 */
export function isoTextSql(expression: string): string {
  return (
    `(to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || ` +
    `CASE WHEN date_trunc('second', ${expression}) = ${expression} THEN '' ` +
    `ELSE to_char(${expression} AT TIME ZONE 'UTC', '.US') END || 'Z')`
  );
}

/** How a stored column of `type` is selected so that decodeValue reads it exactly. */
function readExpression(column: string, type: ColumnType): string {
  const ref = q(column);
  switch (type) {
    case 'integer':
    case 'number':
    case 'decimal':
    case 'json':
      // double precision as text is its shortest exact form (extra_float_digits, see below).
      return `${ref}::text`;
    case 'datetime':
      return isoTextSql(ref);
    case 'date':
      return `to_char(${ref}, 'YYYY-MM-DD')`;
    case 'boolean':
    case 'text':
      return ref;
  }
}

function decodeValue(type: ColumnType, stored: unknown): unknown {
  if (stored === null || stored === undefined) return null;
  switch (type) {
    case 'integer':
      return narrowInteger(BigInt(String(stored)));
    case 'number':
    case 'decimal': {
      // As SQLite's NUMERIC reads: 64-bit integers exact (bigint past 2^53), anything else a
      // double (1e300 is all digits in numeric's text, and only ever came from a double).
      const text = String(stored);
      if (!INTEGER_TEXT.test(text)) return Number(text);
      const integer = BigInt(text);
      return isInt64(integer) ? narrowInteger(integer) : Number(text);
    }
    case 'json':
      return fromJsonText(String(stored));
    case 'boolean':
    case 'text':
    case 'datetime':
    case 'date':
      return stored;
  }
}

/** The `USING` expression that converts a column's values when it widens from -> to. */
export function wideningExpression(column: string, from: ColumnType, to: ColumnType): string {
  const ref = q(column);
  const asText =
    from === 'datetime' ? isoTextSql(ref) : from === 'date' ? `to_char(${ref}, 'YYYY-MM-DD')` : ref;
  if (to === 'json') return `to_jsonb(${asText})`;
  if (to === 'text') return asText;
  // Through text: a direct double -> numeric cast keeps only 15 significant digits.
  if (to === 'decimal') return `${ref}::text::numeric`;
  throw new WarehouseError(`No conversion of ${column} from ${from} to ${to} is defined.`);
}

// ---------------------------------------------------------------- value cleaning

/** Counts values changed so PostgreSQL accepts them. */
interface AlteredCounter {
  count: number;
}

type WellFormedString = string & { isWellFormed?: () => boolean; toWellFormed?: () => string };
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

function isWellFormed(text: string): boolean {
  const candidate = text as WellFormedString;
  return candidate.isWellFormed ? candidate.isWellFormed() : !LONE_SURROGATE.test(text);
}

/** Text PostgreSQL accepts: no NUL; lone surrogates (which UTF-8 cannot carry) become U+FFFD. */
function cleanString(text: string): string {
  let cleaned = text.includes('\u0000') ? text.replaceAll('\u0000', '') : text;
  if (!isWellFormed(cleaned)) cleaned = cleaned.replace(LONE_SURROGATES, '\uFFFD');
  return cleaned;
}

export function cleanText(text: string, altered: AlteredCounter): string {
  const cleaned = cleanString(text);
  if (cleaned !== text) altered.count += 1;
  return cleaned;
}

/** Strings and object keys cleaned at every depth; the same object when nothing changed. */
function cleanJsonValue(value: unknown): unknown {
  if (typeof value === 'string') return cleanString(value);
  if (Array.isArray(value)) {
    let changed = false;
    const cleaned = value.map((item) => {
      const next = cleanJsonValue(item);
      if (next !== item) changed = true;
      return next;
    });
    return changed ? cleaned : value;
  }
  if (value !== null && typeof value === 'object') {
    let changed = false;
    const cleaned: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      const cleanKey = cleanString(key);
      const next = cleanJsonValue(item);
      if (cleanKey !== key || next !== item) changed = true;
      cleaned[cleanKey] = next;
    }
    return changed ? cleaned : value;
  }
  return value;
}

/** `\u0000` or a lone surrogate, as JSON.stringify escapes them. */
const SUSPECT_JSON_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/** JSON text jsonb accepts; the value is only walked when its text shows a suspect escape. */
export function cleanJsonText(value: unknown, altered: AlteredCounter): string {
  const text = toJsonText(value);
  // JSON.stringify writes NUL and lone surrogates only as \u escapes: most texts have none.
  if (!text.includes('\\u') || !SUSPECT_JSON_ESCAPE.test(text)) return text;
  const cleaned = cleanJsonValue(value);
  if (cleaned === value) return text;
  altered.count += 1;
  return toJsonText(cleaned);
}

/** A value as a pg parameter (element of a typed array) for a column of `type`. */
function encodeValue(type: ColumnType, value: unknown, altered: AlteredCounter): unknown {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'integer':
    case 'number':
    case 'decimal':
    case 'boolean':
    case 'datetime':
    case 'date':
      return value;
    case 'text':
      return cleanText(value as string, altered);
    case 'json':
      return cleanJsonText(value, altered);
  }
}

// ---------------------------------------------------------------- connection settings

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
function safeMessage(error: unknown): string {
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
function safeCause(error: unknown): unknown {
  return error !== null && typeof error === 'object' && 'severity' in error
    ? new Error(safeMessage(error))
    : error;
}

function connectionHint(error: unknown): string | undefined {
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

// ---------------------------------------------------------------- the warehouse

interface PageStatements {
  columns: ColumnSpec[];
  /** History content hash of a row, built once per column list. */
  hash: (row: Row) => string;
  upsert: { name: string; text: string };
  history?: {
    openHashes: { name: string; text: string };
    close: { name: string; text: string };
    insert: { name: string; text: string };
  };
}

/** Something to run one query on: the pool (any free connection) or a held connection. */
type Queryable = Pick<pg.ClientBase, 'query'>;

interface HeldLock {
  token: string;
  client: pg.Client;
  lost: boolean;
  heartbeat?: NodeJS.Timeout;
}

/** A named statement: pg prepares it once per connection; the name is derived from the text. */
function named(text: string): { name: string; text: string } {
  return { name: `ocs_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text };
}

export class PostgresWarehouse implements Warehouse {
  readonly dialect = 'postgres' as const;
  readonly description: string;
  readonly schema: string;

  private readonly clientConfig: pg.ClientConfig;
  private readonly pool: pg.Pool;
  private readonly kysely: Kysely<BookkeepingTables>;
  private readonly bookkeeping: Bookkeeping;
  private readonly logger?: WarehouseLogger;
  private readonly lockStaleAfterMs: number;
  private readonly pageStatements = new Map<string, PageStatements>();
  private heldLock?: HeldLock;
  private closed = false;
  private readonly saveCursor: { name: string; text: string };
  private archiveStore?: PostgresArchiveStore;

  constructor(options: PostgresWarehouseOptions) {
    this.schema = options.schema ?? 'ocs';
    if (!SAFE_SCHEMA.test(this.schema)) {
      throw new WarehouseError(
        `PostgreSQL schema name ${JSON.stringify(this.schema.slice(0, 80))} is not allowed.`,
        { hint: 'Use a lower-case name matching ^[a-z][a-z0-9_]{0,62}$, such as ocs.' },
      );
    }
    this.description = describePostgresUrl(options.url, this.schema);
    this.logger = options.logger;
    this.lockStaleAfterMs = (options.lockStaleAfterSeconds ?? 600) * 1000;
    this.clientConfig = postgresClientConfig(options.url, {
      schema: this.schema,
      statementTimeoutSeconds: options.statementTimeoutSeconds,
      connectTimeoutSeconds: options.connectTimeoutSeconds,
    });
    const poolSize = options.poolSize ?? 4;
    if (!Number.isSafeInteger(poolSize) || poolSize < 1) {
      throw new WarehouseError(`PostgreSQL pool size must be a positive integer, not ${poolSize}.`);
    }
    this.pool = new pg.Pool({ ...this.clientConfig, max: poolSize, idleTimeoutMillis: 30_000 });
    // An idle connection that dies (server restart) must not crash the process; the next
    // checkout simply opens a new one.
    this.pool.on('error', (error) => {
      this.logger?.warn({ err: safeMessage(error) }, 'An idle PostgreSQL connection failed');
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
    this.saveCursor = named(
      `INSERT INTO ${this.table('_ocs_resources')} (resource, cursor, cursor_kind, last_run_id)
       VALUES ($1, $2, $3, $4) ON CONFLICT (resource) DO UPDATE SET cursor = excluded.cursor,
       cursor_kind = excluded.cursor_kind, last_run_id = excluded.last_run_id`,
    );
  }

  // ---------------------------------------------------------------- plumbing

  private table(name: string): string {
    return `${q(this.schema)}.${q(name)}`;
  }

  private assertOpen(): void {
    if (this.closed) throw new WarehouseError(`The warehouse ${this.description} is closed.`);
  }

  /** Runs work, turning driver errors into a WarehouseError that names what failed. */
  private async guard<T>(action: string, work: () => Promise<T>): Promise<T> {
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

  private async withClient<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
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
  private transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
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

  private async run(client: Queryable, query: Compilable): Promise<pg.QueryResult> {
    const compiled = query.compile();
    return client.query(compiled.sql, compiled.parameters as unknown[]);
  }

  private async tableExistsOn(client: Queryable, table: string): Promise<boolean> {
    const result = await client.query(
      `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
      [this.schema, table],
    );
    return (result.rowCount ?? 0) > 0;
  }

  private async physicalColumns(client: Queryable, table: string): Promise<Set<string>> {
    const result = await client.query<{ name: string }>(
      `SELECT a.attname AS name FROM pg_catalog.pg_attribute a
       JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped`,
      [this.schema, table],
    );
    return new Set(result.rows.map((row) => row.name));
  }

  private async storedColumns(client: Queryable, table: string): Promise<ColumnSpec[]> {
    const result = await this.run(client, this.bookkeeping.columnsQuery(table));
    return (result.rows as Array<{ column_name: string; column_type: ColumnType }>).map((row) => ({
      name: row.column_name,
      type: row.column_type,
    }));
  }

  private async columnType(client: Queryable, table: string, column: string): Promise<ColumnType> {
    const spec = (await this.storedColumns(client, table)).find((c) => c.name === column);
    if (!spec) throw new WarehouseError(`Table ${table} has no column ${column} in the warehouse.`);
    return spec.type;
  }

  get archive(): PostgresArchiveStore {
    this.archiveStore ??= new PostgresArchiveStore({
      query: async <R>(what: string, sql: string, parameters: unknown[]) =>
        this.guard(what, async () => (await this.pool.query(sql, parameters)).rows as R[]),
      table: (name) => this.table(name),
      schema: this.schema,
      readExpression,
      decode: decodeValue,
    });
    return this.archiveStore;
  }

  // ---------------------------------------------------------------- migrations

  async migrate(): Promise<void> {
    await this.guard('Preparing the warehouse', async () => {
      const key = advisoryLockKey('migrate', this.schema);
      // Concurrent first runs would race on CREATE SCHEMA / CREATE TABLE: serialise them.
      const locked = async <T>(work: (client: pg.PoolClient) => Promise<T>) =>
        this.transaction(async (client) => {
          await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [key]);
          // The connection may predate the schema; name it explicitly for this transaction.
          await client.query(`SET LOCAL search_path TO ${q(this.schema)}`);
          return work(client);
        });
      await locked(async (client) => {
        // Checked before CREATE: CREATE SCHEMA IF NOT EXISTS still needs CREATE on the database.
        const exists = await client.query(
          'SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1',
          [this.schema],
        );
        if ((exists.rowCount ?? 0) === 0) await client.query(`CREATE SCHEMA ${q(this.schema)}`);
      });
      await applyMigrations('postgres', {
        appliedVersions: () =>
          locked(async (client) => {
            await client.query(
              `CREATE TABLE IF NOT EXISTS ${this.table('_ocs_migrations')} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`,
            );
            const result = await client.query<{ version: number }>(
              `SELECT version FROM ${this.table('_ocs_migrations')}`,
            );
            return new Set(result.rows.map((row) => Number(row.version)));
          }),
        apply: (migration: Migration) =>
          locked(async (client) => {
            const done = await client.query(
              `SELECT 1 FROM ${this.table('_ocs_migrations')} WHERE version = $1`,
              [migration.version],
            );
            if ((done.rowCount ?? 0) > 0) return;
            await client.query(migration.sql);
            await client.query(
              `INSERT INTO ${this.table('_ocs_migrations')} (version, name, applied_at) VALUES ($1, $2, $3)`,
              [migration.version, migration.name, nowIso()],
            );
          }),
      });
    });
  }

  // ---------------------------------------------------------------- bookkeeping

  startRun(kind: RunKind, schemaChecksum: string | null): Promise<number> {
    return this.guard('Starting a run', () => this.bookkeeping.startRun(kind, schemaChecksum));
  }

  finishRun(runId: number, summary: RunSummary): Promise<void> {
    return this.guard(`Finishing run ${runId}`, () => this.bookkeeping.finishRun(runId, summary));
  }

  getState(key: string): Promise<string | undefined> {
    return this.guard('Reading state', () => this.bookkeeping.getState(key));
  }

  setState(key: string, value: string): Promise<void> {
    return this.guard('Saving state', () => this.bookkeeping.setState(key, value));
  }

  getResourceState(resource: string): Promise<ResourceState | undefined> {
    return this.guard(`Reading the state of ${resource}`, () =>
      this.bookkeeping.getResourceState(resource),
    );
  }

  recordResourceOutcome(outcome: ResourceOutcome): Promise<void> {
    return this.guard(`Recording the outcome of ${outcome.resource}`, () =>
      this.bookkeeping.recordResourceOutcome(outcome),
    );
  }

  resetCursor(resource: string): Promise<void> {
    return this.guard(`Resetting the cursor of ${resource}`, () =>
      this.bookkeeping.resetCursor(resource),
    );
  }

  describeTable(table: string): Promise<ColumnSpec[] | undefined> {
    return this.guard(`Describing ${table}`, async () => {
      assertSafeTableName(table);
      return this.withClient(async (client) => {
        const columns = await this.storedColumns(client, table);
        if (columns.length > 0) return columns;
        return (await this.tableExistsOn(client, table)) ? [] : undefined;
      });
    });
  }

  status(): Promise<ResourceStatus[]> {
    // The inspector queries through the pool, never a held connection: the bookkeeping takes
    // connections of its own meanwhile, and a pool of one would wait for itself.
    return this.guard('Reading the status', () =>
      this.bookkeeping.status({
        tableExists: (table) => this.tableExistsOn(this.pool, table),
        newestUpdatedAt: async (table) => {
          const type = await this.columnType(this.pool, table, 'updated_at');
          const expression =
            type === 'datetime' || type === 'date'
              ? readExpression('updated_at', type)
              : type === 'text'
                ? q('updated_at')
                : undefined;
          if (!expression) return null;
          // Ordered by the stored value (a time for timestamptz), shown as ISO text.
          const result = await this.pool.query<{ value: string | null }>(
            `SELECT ${expression} AS value FROM ${this.table(table)}
             WHERE "updated_at" IS NOT NULL ORDER BY "updated_at" DESC LIMIT 1`,
          );
          return result.rows[0]?.value ?? null;
        },
      }),
    );
  }

  // ---------------------------------------------------------------- schema changes

  applySchemaChanges(
    changes: SchemaChange[],
    checksums: { from: string | null; to: string | null },
  ): Promise<void> {
    return this.guard('Changing the warehouse schema', async () => {
      assertSafeSchemaChanges(changes);
      try {
        // DDL is transactional in PostgreSQL: all the changes land, or none.
        await this.transaction(async (client) => {
          const now = nowIso();
          for (const change of changes) {
            if (await this.applyOneChange(client, change, now)) {
              await this.run(
                client,
                this.bookkeeping.recordSchemaChangeQuery(change, checksums, now),
              );
            }
          }
        });
      } finally {
        this.pageStatements.clear();
      }
    });
  }

  private async applyOneChange(
    client: pg.ClientBase,
    change: SchemaChange,
    now: string,
  ): Promise<boolean> {
    const { table } = change;
    switch (change.kind) {
      case 'create_table': {
        if (await this.tableExistsOn(client, table)) {
          throw new WarehouseError(
            `Cannot create table ${table}: it already exists in the warehouse.`,
          );
        }
        const columns = change.columns ?? [];
        checkDataColumns(table, columns);
        const definitions = [
          '"id" bigint PRIMARY KEY',
          ...columns.map((column) => `${q(column.name)} ${POSTGRES_TYPE[column.type]}`),
          '"_synced_at" timestamptz NOT NULL',
          '"_run_id" bigint',
          '"_deleted_at" timestamptz',
        ];
        await client.query(`CREATE TABLE ${this.table(table)} (${definitions.join(', ')})`);
        if (columns.length > 0) {
          await this.run(client, this.bookkeeping.insertColumnsQuery(table, columns, 0, now));
        }
        return true;
      }
      case 'add_column': {
        const column = requireColumn(change);
        const type = requireType(change, change.toType);
        if (!(await this.tableExistsOn(client, table))) {
          throw new WarehouseError(`Cannot add column ${column}: table ${table} does not exist.`);
        }
        checkDataColumns(table, [{ name: column, type }]);
        const existing = await this.storedColumns(client, table);
        if (existing.some((spec) => spec.name === column)) {
          throw new WarehouseError(`Cannot add column ${table}.${column}: it already exists.`);
        }
        await client.query(
          `ALTER TABLE ${this.table(table)} ADD COLUMN ${q(column)} ${POSTGRES_TYPE[type]}`,
        );
        const history = historyTableName(table);
        if (
          (await this.tableExistsOn(client, history)) &&
          !(await this.physicalColumns(client, history)).has(column)
        ) {
          await client.query(
            `ALTER TABLE ${this.table(history)} ADD COLUMN ${q(column)} ${POSTGRES_TYPE[type]}`,
          );
        }
        await this.run(
          client,
          this.bookkeeping.insertColumnsQuery(
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
        const current = await this.columnType(client, table, column);
        if (!wideningNeeded(change, column, current, to)) return false;
        const alter = (target: string) =>
          client.query(
            `ALTER TABLE ${this.table(target)} ALTER COLUMN ${q(column)} TYPE ${POSTGRES_TYPE[to]} ` +
              `USING ${wideningExpression(column, current, to)}`,
          );
        await alter(table);
        const history = historyTableName(table);
        if (
          (await this.tableExistsOn(client, history)) &&
          (await this.physicalColumns(client, history)).has(column)
        ) {
          await alter(history);
        }
        await this.run(client, this.bookkeeping.setColumnTypeQuery(table, column, to));
        return true;
      }
    }
  }

  // ---------------------------------------------------------------- page writes

  writePage(page: PageWrite): Promise<PageWriteResult> {
    const table = page.resource;
    return this.guard(`Writing a page of ${table}`, async () => {
      if (this.heldLock?.lost) {
        throw new WarehouseError(
          'This ocs-sync lost the warehouse lock (its lock connection ended or its lock record was ' +
            'removed); stopping writes.',
          {
            hint: 'Run again; check the network to the database and its idle-session settings.',
          },
        );
      }
      assertSafeTableName(table);
      const statements =
        page.rows.length > 0
          ? await this.statementsFor(table, page.columns, page.history)
          : undefined;
      const syncedAt = nowIso();
      const altered: AlteredCounter = { count: 0 };
      const encoded = statements
        ? encodePage(table, statements.columns, page.rows, altered)
        : undefined;
      let versionsWritten = 0;
      await this.transaction(async (client) => {
        if (statements && encoded) {
          const upsertColumns = encoded.lastIndexOfEachId
            ? encoded.columns.map((values) =>
                encoded.lastIndexOfEachId!.map((index) => values[index]),
              )
            : encoded.columns;
          const upsertIds = encoded.lastIndexOfEachId
            ? encoded.lastIndexOfEachId.map((index) => encoded.ids[index]!)
            : encoded.ids;
          await client.query({
            ...statements.upsert,
            values: [upsertIds, ...upsertColumns, syncedAt, page.runId],
          });
          if (statements.history) {
            versionsWritten = await this.writeVersions(client, statements, page, encoded, syncedAt);
          }
        }
        if (page.cursor !== null) {
          await client.query({
            ...this.saveCursor,
            values: [table, page.cursor, page.cursorKind, page.runId],
          });
        }
      });
      return { rowsWritten: page.rows.length, valuesAltered: altered.count, versionsWritten };
    });
  }

  private async writeVersions(
    client: pg.ClientBase,
    statements: PageStatements,
    page: PageWrite,
    encoded: EncodedPage,
    now: string,
  ): Promise<number> {
    const history = statements.history!;
    const keys = encoded.ids;
    const hashes = page.rows.map(statements.hash);
    const open = await client.query<{ id: string; hash: string }>({
      ...history.openHashes,
      values: [[...new Set(keys)]],
    });
    const openHashes = new Map(open.rows.map((row) => [row.id, row.hash]));
    const plan = planHistoryVersions(keys, hashes, openHashes);
    if (plan.length === 0) return 0;
    // A row repeated within the page gets a version per distinct content; all but its last
    // version close at once (the same instant they opened), as one-at-a-time writes would.
    const lastPlanned = new Map<string, number>();
    plan.forEach((version, position) => lastPlanned.set(keys[version.index]!, position));
    const closeIds = [
      ...new Set(
        plan.filter((version) => version.closeOpen).map((version) => keys[version.index]!),
      ),
    ];
    if (closeIds.length > 0) {
      await client.query({ ...history.close, values: [now, closeIds] });
    }
    const indexes = plan.map((version) => version.index);
    await client.query({
      ...history.insert,
      values: [
        indexes.map((index) => keys[index]!),
        ...encoded.columns.map((values) => indexes.map((index) => values[index])),
        plan.map((version, position) =>
          lastPlanned.get(keys[version.index]!) === position ? null : now,
        ),
        indexes.map((index) => hashes[index]!),
        now,
        page.runId,
      ],
    });
    return plan.length;
  }

  /** The page statements for a table and column list, built and checked once. */
  private async statementsFor(
    table: string,
    columns: ColumnSpec[],
    withHistory: boolean,
  ): Promise<PageStatements> {
    const cacheKey = `${table}\u0000${withHistory}\u0000${columns.map((c) => `${c.name}:${c.type}`).join(',')}`;
    const cached = this.pageStatements.get(cacheKey);
    if (cached) return cached;

    await this.withClient(async (client) => {
      if (!(await this.tableExistsOn(client, table))) {
        throw new WarehouseError(
          `Cannot write to ${table}: the table does not exist in the warehouse yet.`,
        );
      }
      const storedTypes = new Map(
        (await this.storedColumns(client, table)).map((column) => [column.name, column.type]),
      );
      for (const column of columns) {
        assertSafeColumnName(column.name, table);
        if (storedTypes.get(column.name) !== column.type) {
          throw new WarehouseError(
            `Cannot write ${table}.${column.name} as ${column.type}: the warehouse has it as ` +
              `${storedTypes.get(column.name) ?? 'no such column'}; apply the schema changes first.`,
          );
        }
      }
    });

    const names = columns.map((column) => q(column.name));
    const arrays = [
      '$1::bigint[]',
      ...columns.map((column, index) => `$${index + 2}::${POSTGRES_TYPE[column.type]}[]`),
    ];
    const next = columns.length + 2;
    const upsert = named(
      `INSERT INTO ${this.table(table)} (${['"id"', ...names, '"_synced_at"', '"_run_id"', '"_deleted_at"'].join(', ')}) ` +
        `SELECT u.*, $${next}::timestamptz, $${next + 1}::bigint, NULL::timestamptz FROM unnest(${arrays.join(', ')}) AS u ` +
        `ON CONFLICT ("id") DO UPDATE SET ${[
          ...names.map((name) => `${name} = excluded.${name}`),
          '"_synced_at" = excluded."_synced_at"',
          '"_run_id" = excluded."_run_id"',
          '"_deleted_at" = NULL',
        ].join(', ')}`,
    );
    const statements: PageStatements = {
      columns: [...columns],
      hash: rowContentHasher(columns),
      upsert,
    };
    if (withHistory) {
      const history = await this.ensureHistoryTable(table, columns);
      const historyTable = this.table(history);
      statements.history = {
        openHashes: named(
          `SELECT "id"::text AS id, "_content_hash" AS hash FROM ${historyTable} ` +
            `WHERE "_valid_to" IS NULL AND "id" = ANY($1::bigint[])`,
        ),
        close: named(
          `UPDATE ${historyTable} SET "_valid_to" = $1::timestamptz ` +
            `WHERE "_valid_to" IS NULL AND "id" = ANY($2::bigint[])`,
        ),
        insert: named(
          `INSERT INTO ${historyTable} (${['"id"', ...names, '"_valid_to"', '"_content_hash"', '"_valid_from"', '"_run_id"'].join(', ')}) ` +
            `SELECT u.*, $${next + 2}::timestamptz, $${next + 3}::bigint FROM unnest(${[
              ...arrays,
              `$${next}::timestamptz[]`,
              `$${next + 1}::text[]`,
            ].join(', ')}) AS u`,
        ),
      };
    }
    this.pageStatements.set(cacheKey, statements);
    return statements;
  }

  /** Creates `<table>__history` on first use and adds any data column it lacks. */
  private async ensureHistoryTable(table: string, columns: ColumnSpec[]): Promise<string> {
    const history = historyTableName(table);
    await this.transaction(async (client) => {
      // Serialises two writers creating the same history table (the writer lock normally does).
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [
        advisoryLockKey(`history:${table}`, this.schema),
      ]);
      if (!(await this.tableExistsOn(client, history))) {
        const definitions = [
          '"_version_id" bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY',
          '"id" bigint NOT NULL',
          ...columns.map((column) => `${q(column.name)} ${POSTGRES_TYPE[column.type]}`),
          '"_valid_from" timestamptz NOT NULL',
          '"_valid_to" timestamptz',
          '"_content_hash" text NOT NULL',
          '"_run_id" bigint',
        ];
        await client.query(`CREATE TABLE ${this.table(history)} (${definitions.join(', ')})`);
        await client.query(
          `CREATE INDEX ${q(historyIndexName(history))} ON ${this.table(history)} ("id", "_valid_to")`,
        );
        return;
      }
      const present = await this.physicalColumns(client, history);
      assertHistoryTable(table, history, present);
      for (const column of columns) {
        if (!present.has(column.name)) {
          await client.query(
            `ALTER TABLE ${this.table(history)} ADD COLUMN ${q(column.name)} ${POSTGRES_TYPE[column.type]}`,
          );
        }
      }
    });
    return history;
  }

  markMissingAsDeleted(
    table: string,
    runId: number,
    mode: DeleteMode,
    history: boolean,
  ): Promise<number> {
    return this.guard(`Marking rows missing from ${table}`, async () => {
      assertSafeTableName(table);
      return this.transaction(async (client) => {
        if (!(await this.tableExistsOn(client, table))) return 0;
        // IS DISTINCT FROM: null-safe, so rows no run has claimed count as missing too.
        const missing = (runParameter: string) =>
          `WHERE "_run_id" IS DISTINCT FROM ${runParameter}::bigint AND "_deleted_at" IS NULL`;
        const now = nowIso();
        const historyTable = historyTableName(table);
        if (history && (await this.tableExistsOn(client, historyTable))) {
          await client.query(
            `UPDATE ${this.table(historyTable)} SET "_valid_to" = $1::timestamptz
             WHERE "_valid_to" IS NULL AND "id" IN (SELECT "id" FROM ${this.table(table)} ${missing('$2')})`,
            [now, runId],
          );
        }
        const result =
          mode === 'remove'
            ? await client.query(`DELETE FROM ${this.table(table)} ${missing('$1')}`, [runId])
            : await client.query(
                `UPDATE ${this.table(table)} SET "_deleted_at" = $1::timestamptz ${missing('$2')}`,
                [now, runId],
              );
        return result.rowCount ?? 0;
      });
    });
  }

  // ---------------------------------------------------------------- column tools

  readColumn(
    table: string,
    column: string,
    afterId: string | null,
    limit: number,
  ): Promise<Array<{ id: string; value: unknown }>> {
    return this.guard(`Reading ${table}.${column}`, async () => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      if (!Number.isSafeInteger(limit) || limit < 1) {
        throw new WarehouseError(`readColumn limit must be a positive integer, not ${limit}.`);
      }
      return this.withClient(async (client) => {
        const type = await this.columnType(client, table, column);
        const select = `SELECT "id"::text AS id_text, ${readExpression(column, type)} AS value FROM ${this.table(table)}`;
        const result =
          afterId === null
            ? await client.query<{ id_text: string; value: unknown }>(
                `${select} ORDER BY "id" LIMIT $1`,
                [limit],
              )
            : await client.query<{ id_text: string; value: unknown }>(
                `${select} WHERE "id" > $1::bigint ORDER BY "id" LIMIT $2`,
                [parseIdText(afterId, table).toString(), limit],
              );
        // Aliased apart from "id" so ORDER BY sorts by the bigint column, not its text.
        return result.rows.map((row) => ({ id: row.id_text, value: decodeValue(type, row.value) }));
      });
    });
  }

  updateColumn(
    table: string,
    column: string,
    values: Array<{ id: string; value: unknown }>,
  ): Promise<void> {
    return this.guard(`Updating ${table}.${column}`, async () => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      if (values.length === 0) return;
      await this.transaction(async (client) => {
        const type = await this.columnType(client, table, column);
        const altered: AlteredCounter = { count: 0 };
        // The last value given for an id wins, as one-at-a-time updates would.
        const byId = new Map<string, unknown>();
        for (const { id, value } of values) {
          assertValueFits(value, type, table, column, id);
          byId.set(parseIdText(id, table).toString(), encodeValue(type, value, altered));
        }
        await client.query(
          `UPDATE ${this.table(table)} AS t SET ${q(column)} = u.value
           FROM unnest($1::bigint[], $2::${POSTGRES_TYPE[type]}[]) AS u(id, value) WHERE t."id" = u.id`,
          [[...byId.keys()], [...byId.values()]],
        );
      });
    });
  }

  // ---------------------------------------------------------------- lock

  /**
   * A session advisory lock on a dedicated connection held until release: when the process dies
   * its session ends and PostgreSQL frees the lock, so no lock ever has to be judged stale.
   * `_ocs_lock` tells waiting processes (and people) who holds it; a heartbeat keeps it fresh and
   * doubles as a probe of the lock connection. If the record disappears (someone removed it by
   * hand) or the connection fails, this process stops writing.
   */
  async acquireLock(waitMs: number): Promise<Lock> {
    this.assertOpen();
    if (this.heldLock) {
      throw new WarehouseError('This warehouse connection already holds the writer lock.');
    }
    const key = advisoryLockKey('writer', this.schema);
    const client = new pg.Client(this.clientConfig);
    const held: HeldLock = { token: randomUUID(), client, lost: false };
    client.on('error', (error) => this.markLockLost(held, 'its connection failed', error));
    client.on('end', () => this.markLockLost(held, 'its connection ended'));
    const started = performance.now();
    try {
      await client.connect();
      for (;;) {
        const result = await client.query<{ locked: boolean }>(
          'SELECT pg_try_advisory_lock($1::bigint) AS locked',
          [key],
        );
        if (result.rows[0]?.locked) break;
        const waited = performance.now() - started;
        if (waited >= waitMs) throw new LockHeldError(await this.lockHolder(client), waited);
        await sleep(Math.min(LOCK_POLL_MS, waitMs - waited));
      }
      // A record left behind belongs to a holder whose session ended without releasing.
      const previous = await this.lockHolder(client);
      if (previous) {
        this.logger?.warn(
          { holder: previous, reason: 'its session ended without releasing the lock' },
          'Taking over a stale warehouse lock record',
        );
      }
      const now = nowIso();
      await client.query(
        `INSERT INTO ${this.table('_ocs_lock')} (name, pid, host, since, heartbeat_at, owner_token)
         VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT (name) DO UPDATE SET pid = excluded.pid,
         host = excluded.host, since = excluded.since, heartbeat_at = excluded.heartbeat_at,
         owner_token = excluded.owner_token`,
        [LOCK_NAME, process.pid, hostname(), now, held.token],
      );
    } catch (error) {
      await client.end().catch(() => undefined);
      if (error instanceof OcsSyncError) throw error;
      throw new WarehouseError(
        `Taking the writer lock of ${this.description} failed: ${safeMessage(error)}`,
        { hint: connectionHint(error), cause: safeCause(error) },
      );
    }
    this.heldLock = held;
    this.startHeartbeat(held);
    return { release: () => this.releaseLock(held) };
  }

  private markLockLost(held: HeldLock, reason: string, error?: unknown): void {
    if (this.heldLock !== held || held.lost) return;
    held.lost = true;
    clearInterval(held.heartbeat);
    this.logger?.warn(
      { warehouse: this.description, reason, err: error ? safeMessage(error) : undefined },
      'Lost the warehouse lock; stopping writes',
    );
  }

  private startHeartbeat(held: HeldLock): void {
    const interval = Math.max(1000, Math.min(5000, this.lockStaleAfterMs / 4));
    let beatStarted: number | undefined;
    held.heartbeat = setInterval(() => {
      if (beatStarted !== undefined) {
        // A beat that has not come back for this long means a dead connection.
        if (performance.now() - beatStarted > Math.max(this.lockStaleAfterMs, 2 * interval)) {
          this.markLockLost(held, 'its connection stopped answering');
        }
        return;
      }
      beatStarted = performance.now();
      held.client
        .query(
          `UPDATE ${this.table('_ocs_lock')} SET heartbeat_at = $1 WHERE name = $2 AND owner_token = $3`,
          [nowIso(), LOCK_NAME, held.token],
        )
        .then((result) => {
          if ((result.rowCount ?? 0) === 0 && this.heldLock === held && !held.lost) {
            held.lost = true;
            clearInterval(held.heartbeat);
            this.logger?.warn(
              { warehouse: this.description },
              'Another process took over or removed the warehouse lock record; stopping writes',
            );
          }
        })
        .catch((error: unknown) => {
          if (this.heldLock === held) {
            this.logger?.warn(
              { err: safeMessage(error) },
              'Could not refresh the warehouse lock heartbeat',
            );
          }
        })
        .finally(() => {
          beatStarted = undefined;
        });
    }, interval);
    held.heartbeat.unref();
  }

  private async lockHolder(client: pg.ClientBase): Promise<LockHolder | undefined> {
    const result = await client.query<{ pid: number; host: string; since: Date | string }>(
      `SELECT pid, host, since FROM ${this.table('_ocs_lock')} WHERE name = $1`,
      [LOCK_NAME],
    );
    const row = result.rows[0];
    return row ? { pid: row.pid, host: row.host, since: toIsoText(row.since) ?? '' } : undefined;
  }

  private async releaseLock(held: HeldLock): Promise<void> {
    if (this.heldLock !== held) return;
    this.heldLock = undefined;
    clearInterval(held.heartbeat);
    try {
      if (!held.lost) {
        await held.client.query(
          `DELETE FROM ${this.table('_ocs_lock')} WHERE name = $1 AND owner_token = $2`,
          [LOCK_NAME, held.token],
        );
        await held.client.query('SELECT pg_advisory_unlock($1::bigint)', [
          advisoryLockKey('writer', this.schema),
        ]);
      }
    } catch (error) {
      // Ending the session below frees the lock anyway.
      this.logger?.warn(
        { err: safeMessage(error) },
        'Could not release the warehouse lock cleanly',
      );
    } finally {
      await held.client.end().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.heldLock) await this.releaseLock(this.heldLock);
    this.closed = true;
    this.pageStatements.clear();
    await this.kysely.destroy();
    // kysely ends the pool only when it used it.
    if (!this.pool.ended && !this.pool.ending) await this.pool.end();
  }
}

// ---------------------------------------------------------------- page encoding (pure)

interface EncodedPage {
  /** Row ids as decimal text, in page order. */
  ids: string[];
  /** One array per data column, in column order, each in page order. */
  columns: unknown[][];
  /** When an id repeats: the index of each id's last row (the one the upsert keeps). */
  lastIndexOfEachId?: number[];
}

/** Checks and encodes a page into column arrays for the unnest statements. */
function encodePage(
  table: string,
  columns: readonly ColumnSpec[],
  rows: PageWrite['rows'],
  altered: AlteredCounter,
): EncodedPage {
  const ids: string[] = new Array(rows.length);
  const arrays: unknown[][] = columns.map(() => new Array(rows.length));
  rows.forEach((row, rowIndex) => {
    const id = checkedRowId(row.id, table);
    ids[rowIndex] = id.toString();
    columns.forEach((column, columnIndex) => {
      const value = row[column.name];
      assertValueFits(value, column.type, table, column.name, id);
      arrays[columnIndex]![rowIndex] = encodeValue(column.type, value, altered);
    });
  });
  const encoded: EncodedPage = { ids, columns: arrays };
  const last = new Map<string, number>();
  ids.forEach((id, index) => last.set(id, index));
  // ON CONFLICT DO UPDATE may not touch one row twice in a statement: keep each id's last row.
  if (last.size !== ids.length)
    encoded.lastIndexOfEachId = [...last.values()].sort((a, b) => a - b);
  return encoded;
}
