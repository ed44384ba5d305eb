/**
 * The SQLite warehouse's connection: one better-sqlite3 handle (WAL) shared by kysely and the
 * prepared hot-path statements, with every operation serialised so kysely's awaits never
 * interleave with a synchronous write.
 */
import type Database from 'better-sqlite3';
import { Kysely, SqliteDialect, type Compilable } from 'kysely';
import type { ColumnSpec, ColumnType } from '../../interfaces.js';
import { OcsSyncError, WarehouseError } from '../../errors.js';
import { Bookkeeping, type BookkeepingTables } from '../bookkeeping.js';
import { SqliteHandle, type StoredColumnsQuery } from './handle.js';
import { sqliteHint } from './hints.js';
import { messageOf } from '../writer-lock.js';
import type { SqliteValue } from './values.js';

export class SqliteConnection {
  readonly handle: SqliteHandle;
  readonly kysely: Kysely<BookkeepingTables>;
  readonly bookkeeping: Bookkeeping;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    path: string,
    readonly description: string,
    busyTimeoutMs: number,
  ) {
    // kysely opens its database on first use, so the handle can be opened after it.
    this.kysely = new Kysely<BookkeepingTables>({
      dialect: new SqliteDialect({
        database: async () => ({
          prepare: (sql: string) => this.handle.prepare(sql),
          close: () => this.handle.close(),
        }),
      }),
    });
    this.bookkeeping = new Bookkeeping(this.kysely);
    this.handle = new SqliteHandle(path, busyTimeoutMs, this.storedColumnsQuery());
  }

  get db(): Database.Database {
    return this.handle.db;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The stored-columns query compiled once, for handles without kysely (the writer thread). */
  storedColumnsQuery(): StoredColumnsQuery {
    const placeholder = '\u0000table';
    const compiled = this.bookkeeping.columnsQuery(placeholder).compile();
    return {
      sql: compiled.sql,
      parameters: (compiled.parameters as SqliteValue[]).map((parameter) =>
        parameter === placeholder ? { table: true as const } : parameter,
      ),
    };
  }

  /** Runs `work` after every earlier operation; database errors become WarehouseErrors. */
  exclusive<T>(work: () => T | Promise<T>, what?: string): Promise<T> {
    const next = this.queue.then(async () => {
      if (this.closed) throw new WarehouseError(`The warehouse ${this.description} is closed.`);
      try {
        return await work();
      } catch (error) {
        const hint = sqliteHint(error);
        if (error instanceof OcsSyncError || (what === undefined && hint === undefined)) {
          throw error;
        }
        throw new WarehouseError(
          `${what ?? 'Using the warehouse'} failed in ${this.description}: ${messageOf(error)}`,
          { hint, cause: error },
        );
      }
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Runs `work` in BEGIN IMMEDIATE ... COMMIT (rolled back when it throws). */
  writeTransaction<T>(work: () => T): T {
    return this.handle.writeTransaction(work);
  }

  run(query: Compilable): Database.RunResult {
    const compiled = query.compile();
    return this.db.prepare(compiled.sql).run(...(compiled.parameters as SqliteValue[]));
  }

  tableExists(table: string): boolean {
    return this.handle.tableExists(table);
  }

  physicalColumns(table: string): string[] {
    return this.handle.physicalColumns(table);
  }

  storedColumns(table: string): ColumnSpec[] {
    return this.handle.storedColumns(table);
  }

  columnType(table: string, column: string): ColumnType {
    const spec = this.storedColumns(table).find((candidate) => candidate.name === column);
    if (!spec) {
      throw new WarehouseError(`Table ${table} has no column ${column} in the warehouse.`);
    }
    return spec.type;
  }

  /** Waits for every queued operation, then closes the handle. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.exclusive(() => undefined).catch(() => undefined);
    this.closed = true;
    await this.kysely.destroy();
    this.handle.close();
  }
}
