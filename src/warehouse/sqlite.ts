/**
 * The SQLite warehouse: one file (or `:memory:`), WAL, one writer.
 *
 * kysely runs migrations, bookkeeping and reads; the page-upsert hot path uses better-sqlite3
 * statements prepared once per (table, column list), because building and preparing the query
 * for every page costs about 40% of the write speed. Every page is one transaction holding its
 * rows, its history versions and its cursor, so a crash at any instant loses or doubles nothing.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kysely, SqliteDialect, type Compilable } from 'kysely';
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
import { Bookkeeping, nowIso, type BookkeepingTables } from './bookkeeping.js';
import { planHistoryVersions } from './history.js';
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
import { SqliteArchiveStore } from './sqlite-archive.js';
import {
  assertValueFits,
  checkedRowId,
  fromJsonText,
  narrowInteger,
  parseIdText,
  rowContentHasher,
  toJsonText,
} from './values.js';

export interface WarehouseLogger {
  warn(obj: object, msg?: string): void;
}

export interface SqliteWarehouseOptions {
  /** File path, or `:memory:`. The parent directory must exist. */
  path: string;
  /** A lock whose heartbeat is older than this is taken over. Default 600. */
  lockStaleAfterSeconds?: number;
  /** How long a statement waits for another connection's write lock. Default 10 000. */
  busyTimeoutMs?: number;
  logger?: WarehouseLogger;
}

type SqliteValue = number | bigint | string | null;

/** Declared SQLite types. NUMERIC (not REAL) keeps 64-bit integers exact in a widened column. */
const SQLITE_TYPE: Record<ColumnType, string> = {
  integer: 'INTEGER',
  number: 'NUMERIC',
  decimal: 'NUMERIC',
  boolean: 'INTEGER',
  text: 'TEXT',
  datetime: 'TEXT',
  date: 'TEXT',
  // Never a type name containing neither TEXT nor CHAR: "JSON" would get NUMERIC affinity and
  // turn the JSON text `5` into the integer 5.
  json: 'TEXT',
};

/** Our own columns on every resource table; data columns may not use these names. */
const LOCK_NAME = 'writer';
const LOCK_POLL_MS = 250;
/** Rows read per batch when a widened column's values are converted. */
const WIDEN_BATCH = 5000;

function encodeValue(type: ColumnType, value: unknown): SqliteValue {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'integer':
    case 'number':
    case 'decimal':
      return value as number | bigint;
    case 'boolean':
      return value ? 1 : 0;
    case 'text':
    case 'datetime':
    case 'date':
      return value as string;
    case 'json':
      return toJsonText(value);
  }
}

/** Decodes a value read with safeIntegers (integers arrive as bigint). */
export function decodeValue(type: ColumnType, stored: unknown): unknown {
  if (stored === null || stored === undefined) return null;
  switch (type) {
    case 'integer':
    case 'number':
    case 'decimal':
      return typeof stored === 'bigint' ? narrowInteger(stored) : stored;
    case 'boolean':
      return typeof stored === 'bigint' ? stored !== 0n : Boolean(stored);
    case 'text':
    case 'datetime':
    case 'date':
      return stored;
    case 'json':
      return fromJsonText(String(stored));
  }
}

/**
 * Rows per upsert statement. Several rows per call cut better-sqlite3's per-call cost: a page
 * writes about 25% faster at 16 than at 1, and no faster beyond (measured with 1000-row pages).
 */
const ROWS_PER_UPSERT = 16;
/** SQLite's default limit on `?` parameters in one statement. */
const MAX_PARAMETERS = 32_766;

interface PageStatements {
  columns: ColumnSpec[];
  /** Upserts one row; the rows a batch leaves over. */
  upsert: Database.Statement;
  /** Upserts `rowsPerBatch` rows at once (in order: a later duplicate id wins, as row by row). */
  upsertBatch: Database.Statement;
  rowsPerBatch: number;
  history?: {
    hash: (row: Row) => string;
    openHashes: Database.Statement;
    close: Database.Statement;
    insert: Database.Statement;
  };
}

export class SqliteWarehouse implements Warehouse {
  readonly dialect = 'sqlite' as const;
  readonly description: string;

  private readonly db: Database.Database;
  private readonly kysely: Kysely<BookkeepingTables>;
  private readonly bookkeeping: Bookkeeping;
  private readonly logger?: WarehouseLogger;
  private readonly lockStaleAfterMs: number;
  private readonly pageStatements = new Map<string, PageStatements>();
  private saveCursorStatement?: Database.Statement;
  /** Serialises every operation: kysely's awaits must never interleave with a synchronous write. */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private heldLock?: { token: string; heartbeat: NodeJS.Timeout; lost: boolean };
  private archiveStore?: SqliteArchiveStore;

  constructor(options: SqliteWarehouseOptions) {
    this.description = options.path === ':memory:' ? 'sqlite::memory:' : `sqlite:${options.path}`;
    this.logger = options.logger;
    this.lockStaleAfterMs = (options.lockStaleAfterSeconds ?? 600) * 1000;
    try {
      this.db = new Database(options.path);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma(`busy_timeout = ${Math.max(0, Math.round(options.busyTimeoutMs ?? 10_000))}`);
      // A file that is not SQLite fails here rather than half-way through a sync.
      this.db.prepare('SELECT count(*) FROM sqlite_master').get();
    } catch (error) {
      throw new WarehouseError(
        `Cannot open the SQLite warehouse ${options.path}: ${messageOf(error)}`,
        {
          hint: 'Check the path and that the file is an SQLite database this user may write.',
          cause: error,
        },
      );
    }
    this.kysely = new Kysely<BookkeepingTables>({
      dialect: new SqliteDialect({ database: this.db }),
    });
    this.bookkeeping = new Bookkeeping(this.kysely);
  }

  // ---------------------------------------------------------------- plumbing

  /** Runs `work` after every earlier operation; database errors become WarehouseErrors. */
  private exclusive<T>(work: () => T | Promise<T>, what?: string): Promise<T> {
    const next = this.queue.then(async () => {
      if (this.closed) throw new WarehouseError(`The warehouse ${this.description} is closed.`);
      try {
        return await work();
      } catch (error) {
        if (error instanceof OcsSyncError || what === undefined) throw error;
        throw new WarehouseError(`${what} failed in ${this.description}: ${messageOf(error)}`, {
          cause: error,
        });
      }
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Runs `work` in BEGIN IMMEDIATE ... COMMIT (rolled back when it throws). */
  private writeTransaction<T>(work: () => T): T {
    return this.db.transaction(work).immediate();
  }

  private run(query: Compilable): Database.RunResult {
    const compiled = query.compile();
    return this.db.prepare(compiled.sql).run(...(compiled.parameters as SqliteValue[]));
  }

  private tableExistsNow(table: string): boolean {
    return (
      this.db
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
        .get(table) !== undefined
    );
  }

  private physicalColumns(table: string): string[] {
    return (this.db.prepare(`PRAGMA table_info(${q(table)})`).all() as Array<{ name: string }>).map(
      (column) => column.name,
    );
  }

  private storedColumnsNow(table: string): ColumnSpec[] {
    const compiled = this.bookkeeping.columnsQuery(table).compile();
    const rows = this.db
      .prepare(compiled.sql)
      .all(...(compiled.parameters as SqliteValue[])) as Array<{
      column_name: string;
      column_type: ColumnType;
    }>;
    return rows.map((row) => ({ name: row.column_name, type: row.column_type }));
  }

  private columnTypeNow(table: string, column: string): ColumnType {
    const spec = this.storedColumnsNow(table).find((candidate) => candidate.name === column);
    if (!spec) {
      throw new WarehouseError(`Table ${table} has no column ${column} in the warehouse.`);
    }
    return spec.type;
  }

  // ---------------------------------------------------------------- migrations

  async migrate(): Promise<void> {
    await this.exclusive(async () => {
      const db = this.db;
      await applyMigrations('sqlite', {
        appliedVersions: async () => {
          db.exec(
            'CREATE TABLE IF NOT EXISTS _ocs_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
          );
          const rows = db.prepare('SELECT version FROM _ocs_migrations').all() as Array<{
            version: number;
          }>;
          return new Set(rows.map((row) => row.version));
        },
        apply: async (migration: Migration) => {
          this.writeTransaction(() => {
            // Another process may have applied it between our check and our write lock.
            if (
              db.prepare('SELECT 1 FROM _ocs_migrations WHERE version = ?').get(migration.version)
            )
              return;
            db.exec(migration.sql);
            db.prepare(
              'INSERT INTO _ocs_migrations (version, name, applied_at) VALUES (?, ?, ?)',
            ).run(migration.version, migration.name, nowIso());
          });
        },
      });
    }, 'Migrating the warehouse');
  }

  /** Prepared on first use: _ocs_resources exists only after migrate(). */
  private get saveCursor(): Database.Statement {
    this.saveCursorStatement ??= this.db.prepare(
      `INSERT INTO _ocs_resources (resource, cursor, cursor_kind, last_run_id) VALUES (?, ?, ?, ?)
       ON CONFLICT (resource) DO UPDATE SET
         cursor = excluded.cursor, cursor_kind = excluded.cursor_kind, last_run_id = excluded.last_run_id`,
    );
    return this.saveCursorStatement;
  }

  // ---------------------------------------------------------------- bookkeeping

  startRun(kind: RunKind, schemaChecksum: string | null): Promise<number> {
    return this.exclusive(
      () => this.bookkeeping.startRun(kind, schemaChecksum),
      'Recording the start of a run',
    );
  }

  finishRun(runId: number, summary: RunSummary): Promise<void> {
    return this.exclusive(
      () => this.bookkeeping.finishRun(runId, summary),
      'Recording the end of a run',
    );
  }

  getState(key: string): Promise<string | undefined> {
    return this.exclusive(() => this.bookkeeping.getState(key), 'Reading bookkeeping state');
  }

  setState(key: string, value: string): Promise<void> {
    return this.exclusive(() => this.bookkeeping.setState(key, value), 'Saving bookkeeping state');
  }

  getResourceState(resource: string): Promise<ResourceState | undefined> {
    return this.exclusive(
      () => this.bookkeeping.getResourceState(resource),
      'Reading a resource state',
    );
  }

  recordResourceOutcome(outcome: ResourceOutcome): Promise<void> {
    return this.exclusive(
      () => this.bookkeeping.recordResourceOutcome(outcome),
      'Recording a resource outcome',
    );
  }

  resetCursor(resource: string): Promise<void> {
    return this.exclusive(() => this.bookkeeping.resetCursor(resource), 'Resetting a cursor');
  }

  describeTable(table: string): Promise<ColumnSpec[] | undefined> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      const columns = this.storedColumnsNow(table);
      if (columns.length > 0) return columns;
      return this.tableExistsNow(table) ? [] : undefined;
    }, 'Reading a table description');
  }

  status(): Promise<ResourceStatus[]> {
    return this.exclusive(
      () =>
        this.bookkeeping.status({
          tableExists: async (table) => this.tableExistsNow(table),
          newestUpdatedAt: async (table) => {
            // ISO text does not sort as time when fractions differ (`...00Z` vs `...00.5Z`);
            // strftime normalises it (to milliseconds, and offsets to UTC).
            const row = this.db
              .prepare(
                `SELECT "updated_at" AS value FROM ${q(table)} WHERE "updated_at" IS NOT NULL
               ORDER BY strftime('%Y-%m-%dT%H:%M:%f', "updated_at") DESC, "updated_at" DESC LIMIT 1`,
              )
              .get() as { value: unknown } | undefined;
            return typeof row?.value === 'string' ? row.value : null;
          },
        }),
      'Reading the status',
    );
  }

  // ---------------------------------------------------------------- schema changes

  applySchemaChanges(
    changes: SchemaChange[],
    checksums: { from: string | null; to: string | null },
  ): Promise<void> {
    return this.exclusive(() => {
      assertSafeSchemaChanges(changes);
      try {
        this.writeTransaction(() => {
          const now = nowIso();
          for (const change of changes) {
            if (this.applyOneChange(change, now)) {
              this.run(this.bookkeeping.recordSchemaChangeQuery(change, checksums, now));
            }
          }
        });
      } finally {
        // Statements prepared against the old shape must not be reused.
        this.pageStatements.clear();
      }
    }, 'Applying schema changes');
  }

  /** Applies one change inside the caller's transaction; false when it was already in place. */
  private applyOneChange(change: SchemaChange, now: string): boolean {
    const { table } = change;
    switch (change.kind) {
      case 'create_table': {
        if (this.tableExistsNow(table)) {
          throw new WarehouseError(
            `Cannot create table ${table}: it already exists in the warehouse.`,
          );
        }
        const columns = change.columns ?? [];
        checkDataColumns(table, columns);
        const definitions = [
          `${q('id')} INTEGER PRIMARY KEY`,
          ...columns.map((column) => `${q(column.name)} ${SQLITE_TYPE[column.type]}`),
          `${q('_synced_at')} TEXT NOT NULL`,
          `${q('_run_id')} INTEGER`,
          `${q('_deleted_at')} TEXT`,
        ];
        this.db.exec(`CREATE TABLE ${q(table)} (${definitions.join(', ')})`);
        if (columns.length > 0)
          this.run(this.bookkeeping.insertColumnsQuery(table, columns, 0, now));
        return true;
      }
      case 'add_column': {
        const column = requireColumn(change);
        const type = requireType(change, change.toType);
        if (!this.tableExistsNow(table)) {
          throw new WarehouseError(`Cannot add column ${column}: table ${table} does not exist.`);
        }
        checkDataColumns(table, [{ name: column, type }]);
        const existing = this.storedColumnsNow(table);
        if (existing.some((spec) => spec.name === column)) {
          throw new WarehouseError(`Cannot add column ${table}.${column}: it already exists.`);
        }
        this.db.exec(`ALTER TABLE ${q(table)} ADD COLUMN ${q(column)} ${SQLITE_TYPE[type]}`);
        const history = historyTableName(table);
        if (this.tableExistsNow(history) && !this.physicalColumns(history).includes(column)) {
          this.db.exec(`ALTER TABLE ${q(history)} ADD COLUMN ${q(column)} ${SQLITE_TYPE[type]}`);
        }
        this.run(
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
        const current = this.columnTypeNow(table, column);
        if (!wideningNeeded(change, column, current, to)) return false;
        this.widenColumn(table, 'id', column, current, to);
        const history = historyTableName(table);
        if (this.tableExistsNow(history) && this.physicalColumns(history).includes(column)) {
          this.widenColumn(history, '_version_id', column, current, to);
        }
        this.run(this.bookkeeping.setColumnTypeQuery(table, column, to));
        return true;
      }
    }
  }

  /**
   * SQLite cannot change a column's type: add a new column of the wider type, copy the values
   * converted in JS with the same encoders as page writes (so a widened value reads exactly like
   * one written after the widening), drop the old column, rename the new one.
   */
  private widenColumn(
    table: string,
    key: string,
    column: string,
    from: ColumnType,
    to: ColumnType,
  ): void {
    const sameStorage = SQLITE_TYPE[from] === SQLITE_TYPE[to];
    const sameEncoding = from !== 'boolean' && to !== 'json';
    if (sameStorage && sameEncoding) return; // date/datetime -> text: the same text, the same TEXT column.
    const temporary = `${column}__ocs_widening`;
    this.db.exec(`ALTER TABLE ${q(table)} ADD COLUMN ${q(temporary)} ${SQLITE_TYPE[to]}`);
    const select = `SELECT ${q(key)} AS key, ${q(column)} AS value FROM ${q(table)} WHERE ${q(column)} IS NOT NULL`;
    const readFirst = this.db
      .prepare(`${select} ORDER BY ${q(key)} LIMIT ${WIDEN_BATCH}`)
      .safeIntegers(true);
    const readAfter = this.db
      .prepare(`${select} AND ${q(key)} > ? ORDER BY ${q(key)} LIMIT ${WIDEN_BATCH}`)
      .safeIntegers(true);
    const write = this.db.prepare(`UPDATE ${q(table)} SET ${q(temporary)} = ? WHERE ${q(key)} = ?`);
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
    this.db.exec(`ALTER TABLE ${q(table)} DROP COLUMN ${q(column)}`);
    this.db.exec(`ALTER TABLE ${q(table)} RENAME COLUMN ${q(temporary)} TO ${q(column)}`);
  }

  // ---------------------------------------------------------------- page writes

  writePage(page: PageWrite): Promise<PageWriteResult> {
    return this.exclusive(() => {
      if (this.heldLock?.lost) {
        throw new WarehouseError(
          'This ocs-sync lost the warehouse lock to another process; stopping writes.',
          {
            hint: 'Another ocs-sync took over a lock it judged stale; check lock.stale_after_seconds.',
          },
        );
      }
      const table = page.resource;
      assertSafeTableName(table);
      const statements =
        page.rows.length > 0 ? this.statementsFor(table, page.columns, page.history) : undefined;
      const syncedAt = nowIso();
      let versionsWritten = 0;
      this.writeTransaction(() => {
        if (statements) {
          const encodedRows = page.rows.map((row) => {
            const id = checkedRowId(row.id, table);
            const values: SqliteValue[] = [id];
            for (const column of statements.columns) {
              const value = row[column.name];
              assertValueFits(value, column.type, table, column.name, id);
              values.push(encodeValue(column.type, value));
            }
            return values;
          });
          // Encoded once: the history versions reuse the same values.
          this.upsertRows(statements, encodedRows, syncedAt, page.runId);
          if (statements.history) {
            versionsWritten = this.writeVersions(statements, page, encodedRows, syncedAt);
          }
        }
        if (page.cursor !== null) {
          this.saveCursor.run(table, page.cursor, page.cursorKind, page.runId);
        }
      });
      return { rowsWritten: page.rows.length, valuesAltered: 0, versionsWritten };
    }, `Writing a page of ${page.resource}`);
  }

  private upsertRows(
    statements: PageStatements,
    encodedRows: SqliteValue[][],
    syncedAt: string,
    runId: number,
  ): void {
    const { rowsPerBatch } = statements;
    let next = 0;
    for (; next + rowsPerBatch <= encodedRows.length; next += rowsPerBatch) {
      const parameters: SqliteValue[] = [];
      for (let index = next; index < next + rowsPerBatch; index++) {
        parameters.push(...encodedRows[index]!, syncedAt, runId);
      }
      statements.upsertBatch.run(parameters);
    }
    for (; next < encodedRows.length; next++) {
      statements.upsert.run(...encodedRows[next]!, syncedAt, runId);
    }
  }

  private writeVersions(
    statements: PageStatements,
    page: PageWrite,
    encodedRows: SqliteValue[][],
    now: string,
  ): number {
    const history = statements.history!;
    const keys = encodedRows.map((values) => String(values[0]));
    const hashes = page.rows.map(history.hash);
    // One query for every open version of the page's ids.
    const open = history.openHashes.all(
      toJsonText(encodedRows.map((values) => values[0])),
    ) as Array<{
      id: bigint;
      hash: string;
    }>;
    const openHashes = new Map(open.map((row) => [String(row.id), row.hash]));
    const plan = planHistoryVersions(keys, hashes, openHashes);
    for (const version of plan) {
      const values = encodedRows[version.index]!;
      if (version.closeOpen) history.close.run(now, values[0]);
      history.insert.run(...values, now, hashes[version.index]!, page.runId);
    }
    return plan.length;
  }

  /** The page statements for a table and column list, prepared once and reused. */
  private statementsFor(
    table: string,
    columns: ColumnSpec[],
    withHistory: boolean,
  ): PageStatements {
    const cacheKey = `${table}\u0000${withHistory}\u0000${columns.map((c) => `${c.name}:${c.type}`).join(',')}`;
    const cached = this.pageStatements.get(cacheKey);
    if (cached) return cached;

    // Checked once per shape: the engine's column list must be what the warehouse stores.
    const stored = this.storedColumnsNow(table);
    if (!this.tableExistsNow(table)) {
      throw new WarehouseError(
        `Cannot write to ${table}: the table does not exist in the warehouse yet.`,
      );
    }
    const storedTypes = new Map(stored.map((column) => [column.name, column.type]));
    for (const column of columns) {
      assertSafeColumnName(column.name, table);
      if (storedTypes.get(column.name) !== column.type) {
        throw new WarehouseError(
          `Cannot write ${table}.${column.name} as ${column.type}: the warehouse has it as ` +
            `${storedTypes.get(column.name) ?? 'no such column'}; apply the schema changes first.`,
        );
      }
    }
    const names = columns.map((column) => q(column.name));
    const placeholders = columns.map(() => '?');
    const rowValues = `(${['?', ...placeholders, '?', '?', 'NULL'].join(', ')})`;
    const upsertOf = (rows: number) =>
      this.db.prepare(
        `INSERT INTO ${q(table)} (${['"id"', ...names, '"_synced_at"', '"_run_id"', '"_deleted_at"'].join(', ')})
         VALUES ${Array.from({ length: rows }, () => rowValues).join(', ')}
         ON CONFLICT ("id") DO UPDATE SET ${[
           ...names.map((name) => `${name} = excluded.${name}`),
           '"_synced_at" = excluded."_synced_at"',
           '"_run_id" = excluded."_run_id"',
           '"_deleted_at" = NULL',
         ].join(', ')}`,
      );
    const rowsPerBatch = Math.max(
      1,
      Math.min(ROWS_PER_UPSERT, Math.floor(MAX_PARAMETERS / (columns.length + 3))),
    );
    const statements: PageStatements = {
      columns: [...columns],
      upsert: upsertOf(1),
      upsertBatch: upsertOf(rowsPerBatch),
      rowsPerBatch,
    };
    if (withHistory) {
      const historyTable = this.ensureHistoryTable(table, columns);
      statements.history = {
        hash: rowContentHasher(columns),
        openHashes: this.db
          .prepare(
            `SELECT "id" AS id, "_content_hash" AS hash FROM ${q(historyTable)}
             WHERE "_valid_to" IS NULL AND "id" IN (SELECT value FROM json_each(?))`,
          )
          .safeIntegers(true),
        close: this.db.prepare(
          `UPDATE ${q(historyTable)} SET "_valid_to" = ? WHERE "id" = ? AND "_valid_to" IS NULL`,
        ),
        insert: this.db.prepare(
          `INSERT INTO ${q(historyTable)} (${['"id"', ...names, '"_valid_from"', '"_content_hash"', '"_run_id"'].join(', ')})
           VALUES (${['?', ...placeholders, '?', '?', '?'].join(', ')})`,
        ),
      };
    }
    this.pageStatements.set(cacheKey, statements);
    return statements;
  }

  /** Creates `<table>__history` on first use and adds any data column it lacks. */
  private ensureHistoryTable(table: string, columns: ColumnSpec[]): string {
    const history = historyTableName(table);
    this.writeTransaction(() => {
      if (!this.tableExistsNow(history)) {
        const definitions = [
          '"_version_id" INTEGER PRIMARY KEY AUTOINCREMENT',
          '"id" INTEGER NOT NULL',
          ...columns.map((column) => `${q(column.name)} ${SQLITE_TYPE[column.type]}`),
          '"_valid_from" TEXT NOT NULL',
          '"_valid_to" TEXT',
          '"_content_hash" TEXT NOT NULL',
          '"_run_id" INTEGER',
        ];
        this.db.exec(`CREATE TABLE ${q(history)} (${definitions.join(', ')})`);
        this.db.exec(
          `CREATE INDEX ${q(historyIndexName(history))} ON ${q(history)} ("id", "_valid_to")`,
        );
        return;
      }
      const present = new Set(this.physicalColumns(history));
      assertHistoryTable(table, history, present);
      for (const column of columns) {
        if (!present.has(column.name)) {
          this.db.exec(
            `ALTER TABLE ${q(history)} ADD COLUMN ${q(column.name)} ${SQLITE_TYPE[column.type]}`,
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
    return this.exclusive(() => {
      assertSafeTableName(table);
      if (!this.tableExistsNow(table)) return 0;
      // IS NOT: null-safe, so rows no run has claimed count as missing too.
      const missing = `WHERE "_run_id" IS NOT ? AND "_deleted_at" IS NULL`;
      const now = nowIso();
      return this.writeTransaction(() => {
        const historyTable = historyTableName(table);
        if (history && this.tableExistsNow(historyTable)) {
          this.db
            .prepare(
              `UPDATE ${q(historyTable)} SET "_valid_to" = ?
               WHERE "_valid_to" IS NULL AND "id" IN (SELECT "id" FROM ${q(table)} ${missing})`,
            )
            .run(now, runId);
        }
        const result =
          mode === 'remove'
            ? this.db.prepare(`DELETE FROM ${q(table)} ${missing}`).run(runId)
            : this.db
                .prepare(`UPDATE ${q(table)} SET "_deleted_at" = ? ${missing}`)
                .run(now, runId);
        return result.changes;
      });
    }, `Marking missing rows of ${table} as deleted`);
  }

  // ---------------------------------------------------------------- column tools

  readColumn(
    table: string,
    column: string,
    afterId: string | null,
    limit: number,
  ): Promise<Array<{ id: string; value: unknown }>> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      if (!Number.isSafeInteger(limit) || limit < 1) {
        throw new WarehouseError(`readColumn limit must be a positive integer, not ${limit}.`);
      }
      const type = this.columnTypeNow(table, column);
      const select = `SELECT "id" AS id, ${q(column)} AS value FROM ${q(table)}`;
      const rows = (
        afterId === null
          ? this.db.prepare(`${select} ORDER BY "id" LIMIT ?`).safeIntegers(true).all(limit)
          : this.db
              .prepare(`${select} WHERE "id" > ? ORDER BY "id" LIMIT ?`)
              .safeIntegers(true)
              .all(parseIdText(afterId, table), limit)
      ) as Array<{ id: bigint; value: unknown }>;
      return rows.map((row) => ({ id: row.id.toString(), value: decodeValue(type, row.value) }));
    }, `Reading ${table}.${column}`);
  }

  updateColumn(
    table: string,
    column: string,
    values: Array<{ id: string; value: unknown }>,
  ): Promise<void> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      const type = this.columnTypeNow(table, column);
      const encoded = values.map(({ id, value }) => {
        assertValueFits(value, type, table, column, id);
        return [encodeValue(type, value), parseIdText(id, table)] as const;
      });
      const update = this.db.prepare(`UPDATE ${q(table)} SET ${q(column)} = ? WHERE "id" = ?`);
      this.writeTransaction(() => {
        for (const [value, id] of encoded) update.run(value, id);
      });
    }, `Updating ${table}.${column}`);
  }

  get archive(): SqliteArchiveStore {
    this.archiveStore ??= new SqliteArchiveStore(
      this.db,
      (work, what) => this.exclusive(work, what),
      decodeValue,
    );
    return this.archiveStore;
  }

  // ---------------------------------------------------------------- lock

  async acquireLock(waitMs: number): Promise<Lock> {
    if (this.heldLock)
      throw new WarehouseError('This warehouse connection already holds the writer lock.');
    const started = performance.now();
    for (;;) {
      const attempt = await this.exclusive(() => this.tryTakeLock());
      if ('token' in attempt) return this.startHolding(attempt.token);
      const waited = performance.now() - started;
      if (waited >= waitMs) throw new LockHeldError(attempt.holder, waited);
      await sleep(Math.min(LOCK_POLL_MS, waitMs - waited));
    }
  }

  private tryTakeLock(): { token: string } | { holder: LockHolder } {
    return this.writeTransaction(() => {
      const row = this.db
        .prepare('SELECT pid, host, since, heartbeat_at FROM _ocs_lock WHERE name = ?')
        .get(LOCK_NAME) as
        { pid: number; host: string; since: string; heartbeat_at: string } | undefined;
      if (row) {
        const holder: LockHolder = { pid: row.pid, host: row.host, since: row.since };
        const stale = this.staleReason(row);
        if (!stale) return { holder };
        this.logger?.warn({ holder, reason: stale }, 'Taking over a stale warehouse lock');
        this.db.prepare('DELETE FROM _ocs_lock WHERE name = ?').run(LOCK_NAME);
      }
      const token = randomUUID();
      const now = nowIso();
      this.db
        .prepare(
          'INSERT INTO _ocs_lock (name, pid, host, since, heartbeat_at, owner_token) VALUES (?, ?, ?, ?, ?, ?)',
        )
        .run(LOCK_NAME, process.pid, hostname(), now, now, token);
      return { token };
    });
  }

  /** Why a held lock may be taken over, or undefined while its holder looks alive. */
  private staleReason(row: {
    pid: number;
    host: string;
    heartbeat_at: string;
  }): string | undefined {
    const beat = Date.parse(row.heartbeat_at);
    if (!Number.isFinite(beat) || Date.now() - beat > this.lockStaleAfterMs) {
      return `no heartbeat since ${row.heartbeat_at}`;
    }
    if (row.host === hostname() && !processExists(row.pid)) {
      return `process ${row.pid} no longer exists`;
    }
    return undefined;
  }

  private startHolding(token: string): Lock {
    const interval = Math.max(1000, Math.min(5000, this.lockStaleAfterMs / 4));
    const heartbeat = setInterval(() => {
      void this.exclusive(() => {
        const result = this.db
          .prepare('UPDATE _ocs_lock SET heartbeat_at = ? WHERE name = ? AND owner_token = ?')
          .run(nowIso(), LOCK_NAME, token);
        if (result.changes === 0 && this.heldLock?.token === token) {
          this.heldLock.lost = true;
          clearInterval(heartbeat);
          this.logger?.warn(
            { warehouse: this.description },
            'Another process took over the warehouse lock',
          );
        }
      }).catch((error: unknown) => {
        if (!this.closed)
          this.logger?.warn(
            { err: messageOf(error) },
            'Could not refresh the warehouse lock heartbeat',
          );
      });
    }, interval);
    heartbeat.unref();
    this.heldLock = { token, heartbeat, lost: false };
    return { release: () => this.releaseLock(token) };
  }

  private async releaseLock(token: string): Promise<void> {
    if (this.heldLock?.token !== token) return;
    clearInterval(this.heldLock.heartbeat);
    this.heldLock = undefined;
    if (this.closed) return;
    await this.exclusive(() => {
      this.db
        .prepare('DELETE FROM _ocs_lock WHERE name = ? AND owner_token = ?')
        .run(LOCK_NAME, token);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.heldLock) await this.releaseLock(this.heldLock.token);
    await this.exclusive(() => undefined).catch(() => undefined);
    this.closed = true;
    this.pageStatements.clear();
    await this.kysely.destroy();
    if (this.db.open) this.db.close();
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
