/**
 * An open SQLite warehouse file without kysely: the pragmas every connection to it sets, and the
 * catalogue look-ups the page writer needs. The warehouse's connection (connection.ts)
 * wraps one; the writer thread (writer-thread.ts) opens its own, and stays without kysely
 * because loading it would add about 0.3 s to the thread's start.
 */
import Database from 'better-sqlite3';
import type { ColumnSpec, ColumnType } from '../../interfaces.js';
import { WarehouseError } from '../../errors.js';
import { quoteIdentifier as q } from '../identifiers.js';
import type { SqliteValue } from './values.js';
import { messageOf } from '../writer-lock.js';
import { sqliteHint } from './hints.js';

/** A compiled query for a table's stored columns, with `table` where the table name binds. */
export interface StoredColumnsQuery {
  sql: string;
  parameters: ReadonlyArray<SqliteValue | { table: true }>;
}

const SPACED_CHECKPOINT_BYTES = 40 * 1024 * 1024;
/**
 * Page cache a connection, in KiB (negative: SQLite's unit). better-sqlite3's default is 16 MB,
 * which a sync's writer fills as the file grows; 4 MB wrote 200,000 rows as fast and kept the
 * sync's peak RSS about 15 MB lower (docs/performance.md).
 */
const CACHE_KIB = 4000;
/** Statements kept prepared: a run's bookkeeping repeats far fewer shapes than this. */
const PREPARED_KEPT = 256;

export class SqliteHandle {
  readonly db: Database.Database;
  private checkpointsSpaced = false;
  /** SQLite's schema version when schemaChanged() last looked (undefined: never). */
  private schemaVersionSeen: number | undefined;
  /** Statements by their SQL, oldest first (prepare). */
  private readonly prepared = new Map<string, Database.Statement>();

  constructor(
    path: string,
    busyTimeoutMs: number,
    private readonly storedColumnsQuery: StoredColumnsQuery,
  ) {
    try {
      this.db = new Database(path);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma(`cache_size = -${CACHE_KIB}`);
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
  }

  /**
   * Checkpoints (copying the WAL into the file, two fsyncs) every ~40 MB of WAL instead of
   * SQLite's 1000 pages (4 MB at the default page size). Only audited warehouses ask for it: an
   * audited first load spent a quarter of its commit time in checkpoints, while a daemon soak
   * with the larger WAL for every warehouse settled about 20 MB higher in RSS.
   */
  spaceCheckpoints(): void {
    if (this.checkpointsSpaced) return;
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    this.db.pragma(`wal_autocheckpoint = ${Math.round(SPACED_CHECKPOINT_BYTES / pageSize)}`);
    this.checkpointsSpaced = true;
  }

  /**
   * `sql` prepared once and reused (kysely would prepare each query anew: a run asks the same
   * few bookkeeping queries for every resource); a new one while the kept one is still iterating.
   */
  prepare(sql: string): Database.Statement {
    const kept = this.prepared.get(sql);
    if (kept && !kept.busy) return kept;
    const statement = this.db.prepare(sql);
    if (!kept) {
      if (this.prepared.size >= PREPARED_KEPT) {
        this.prepared.delete(this.prepared.keys().next().value!);
      }
      this.prepared.set(sql, statement);
    }
    return statement;
  }

  /** Lets the prepared statements go (the tables' shapes may have changed). */
  forgetPrepared(): void {
    this.prepared.clear();
  }

  /**
   * Whether any connection, this one or another process's, changed the schema since the last
   * call (always on the first): SQLite counts every change in the file's header.
   */
  schemaChanged(): boolean {
    const version = this.db.pragma('schema_version', { simple: true }) as number;
    const changed = version !== this.schemaVersionSeen;
    this.schemaVersionSeen = version;
    return changed;
  }

  /** Runs `work` in BEGIN IMMEDIATE ... COMMIT (rolled back when it throws). */
  writeTransaction<T>(work: () => T): T {
    return this.db.transaction(work).immediate();
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

  /** The columns the warehouse records for `table` (`_ocs_columns`), in order. */
  storedColumns(table: string): ColumnSpec[] {
    const { sql, parameters } = this.storedColumnsQuery;
    const bound = parameters.map((parameter) =>
      typeof parameter === 'object' && parameter !== null ? table : parameter,
    );
    const rows = this.prepare(sql).all(...bound) as Array<{
      column_name: string;
      column_type: ColumnType;
    }>;
    return rows.map((row) => ({ name: row.column_name, type: row.column_type }));
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
