/**
 * The SQLite warehouse's connection: one better-sqlite3 handle (WAL) shared by kysely and the
 * prepared hot-path statements, with every operation serialised so kysely's awaits never
 * interleave with a synchronous write.
 */
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect, type Compilable } from 'kysely';
import type { ColumnSpec, ColumnType } from '../interfaces.js';
import { OcsSyncError, WarehouseError } from '../errors.js';
import { Bookkeeping, type BookkeepingTables } from './bookkeeping.js';
import { quoteIdentifier as q } from './identifiers.js';
import { messageOf } from './writer-lock.js';
import type { SqliteValue } from './sqlite-values.js';

export class SqliteConnection {
  readonly db: Database.Database;
  readonly kysely: Kysely<BookkeepingTables>;
  readonly bookkeeping: Bookkeeping;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    path: string,
    readonly description: string,
    busyTimeoutMs: number,
  ) {
    try {
      this.db = new Database(path);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma(`busy_timeout = ${Math.max(0, Math.round(busyTimeoutMs))}`);
      // A file that is not SQLite fails here rather than half-way through a sync.
      this.db.prepare('SELECT count(*) FROM sqlite_master').get();
    } catch (error) {
      throw new WarehouseError(`Cannot open the SQLite warehouse ${path}: ${messageOf(error)}`, {
        hint:
          sqliteHint(error) ??
          'Check the path and that the file is an SQLite database this user may write.',
        cause: error,
      });
    }
    this.kysely = new Kysely<BookkeepingTables>({
      dialect: new SqliteDialect({ database: this.db }),
    });
    this.bookkeeping = new Bookkeeping(this.kysely);
  }

  get isClosed(): boolean {
    return this.closed;
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
    return this.db.transaction(work).immediate();
  }

  run(query: Compilable): Database.RunResult {
    const compiled = query.compile();
    return this.db.prepare(compiled.sql).run(...(compiled.parameters as SqliteValue[]));
  }

  tableExists(table: string): boolean {
    return (
      this.db
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
        .get(table) !== undefined
    );
  }

  physicalColumns(table: string): string[] {
    return (this.db.prepare(`PRAGMA table_info(${q(table)})`).all() as Array<{ name: string }>).map(
      (column) => column.name,
    );
  }

  storedColumns(table: string): ColumnSpec[] {
    const compiled = this.bookkeeping.columnsQuery(table).compile();
    const rows = this.db
      .prepare(compiled.sql)
      .all(...(compiled.parameters as SqliteValue[])) as Array<{
      column_name: string;
      column_type: ColumnType;
    }>;
    return rows.map((row) => ({ name: row.column_name, type: row.column_type }));
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
    if (this.db.open) this.db.close();
  }
}

/** The fix for a file that is locked or read-only (the message already names the file). */
function sqliteHint(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
    return 'Another program holds a lock on the file (an open transaction in sqlite3 or a BI tool?); let it finish or close it, then run again.';
  }
  if (code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_PERM') {
    return 'Give this user write access to the file and its folder (SQLite writes -wal and -shm files beside it).';
  }
  return undefined;
}
