/**
 * The SQLite warehouse: one file (or `:memory:`), WAL, one writer. This class wires the roles
 * together: the connection (connection.ts), schema changes (schema.ts), the page-write hot path
 * and history (page-writes.ts), the writer lock (lock.ts), the operator's tools (tools.ts) and
 * the reads (reads.ts); the bookkeeping (../bookkeeping.ts) and the marking of missing rows
 * (../missing-rows.ts, with missing-rows.ts's SQL and transaction) are shared. Every page
 * is one transaction holding its rows, its history versions and its cursor, so a crash at any
 * instant loses or doubles nothing.
 */
import type Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import type { Kysely } from 'kysely';
import type { TransferListItem } from 'node:worker_threads';
import type {
  BookkeepingStore,
  ColumnSpec,
  DeleteMode,
  FileLedgerStore,
  Lock,
  MissingUnderChoice,
  PageSinkSetup,
  PageWrite,
  PageWriteResult,
  ResourceStatus,
  SavedCursor,
  SchemaChange,
  Warehouse,
} from '../../interfaces.js';
import { WarehouseError } from '../../errors.js';
import type { PrivateModes } from '../../private-files.js';
import { KyselyAuditStore } from '../audit-store.js';
import { bookkeepingStore, nowIso } from '../bookkeeping.js';
import { KyselyFileLedger } from '../file-ledger.js';
import { assertSafeTableName } from '../identifiers.js';
import { applyMigrations, type Migration } from '../migrations.js';
import {
  markMissingAsDeleted,
  markMissingUnderChoice,
  type MissingRowsDialect,
} from '../missing-rows.js';
import { readResourceStatuses } from '../reader.js';
import { assertSafeSchemaChanges } from '../schema-changes.js';
import { closeRunsOfDeadHolders, type WarehouseLogger } from '../writer-lock.js';
import { SqliteArchiveStore } from './archive.js';
import { openSqliteSnapshot } from './audit.js';
import { SqliteConnection } from './connection.js';
import { sqliteLockFile } from './file.js';
import { SqliteHistoryWriter } from './history.js';
import { SqliteWriterLock } from './lock.js';
import { SQLITE_MIGRATION_CODE } from './migrations.js';
import { sqliteMissingRows } from './missing-rows.js';
import { InThreadCommitter, WriterThreadCommitter, type PageCommitter } from './page-committer.js';
import { SqlitePageSink, type SqlitePageSinkSetup } from './page-sink.js';
import { SqlitePageWriter } from './page-writes.js';
import { SqliteReads } from './reads.js';
import { sqliteRows, sqliteTableFacts } from './reader.js';
import { SQLITE_RULES } from './rules.js';
import { applySqliteSchemaChange, createSqliteLiveView, dropSqliteLiveView } from './schema.js';
import { SqliteTools } from './tools.js';
import { decodeValue } from './values.js';

export type { WarehouseLogger } from '../writer-lock.js';

export interface SqliteWarehouseOptions {
  /** File path, or `:memory:`. The parent directory must exist. */
  path: string;
  /** A lock whose heartbeat is older than this is taken over. Default 600. */
  lockStaleAfterSeconds?: number;
  /** How long a statement waits for another connection's write lock. Default 10 000. */
  busyTimeoutMs?: number;
  /** Modes the writer lock's side file is created with (default 0600). */
  fileModes?: PrivateModes;
  /**
   * Commit pages on a writer thread of their own connection (planPageThreads's answer,
   * src/page-threads.ts); false commits them on this connection. `:memory:` cannot have one.
   */
  writerThread: boolean;
  logger?: WarehouseLogger;
}

export class SqliteWarehouse implements Warehouse {
  readonly dialect = 'sqlite' as const;
  readonly description: string;

  private readonly connection: SqliteConnection;
  private readonly committer: PageCommitter;
  /** This thread's pages: encoded here, committed by the committer. */
  private readonly sink: SqlitePageSink;
  private readonly lock: SqliteWriterLock;
  private readonly logger?: WarehouseLogger;
  private archiveStore?: SqliteArchiveStore;
  private readonly auditStore: KyselyAuditStore;
  /** Rows missing from a walk, marked on this connection. */
  private readonly missingRows: MissingRowsDialect;
  readonly bookkeeping: BookkeepingStore;
  readonly tools: SqliteTools;
  readonly reads: SqliteReads;
  /** The file it opened, as it was then (refresh). */
  private readonly file?: { path: string; identity: string | undefined };

  constructor(options: SqliteWarehouseOptions) {
    if (options.writerThread && options.path === ':memory:') {
      throw new WarehouseError(
        'An in-memory SQLite warehouse has one connection: it cannot commit on a writer thread.',
      );
    }
    this.description = options.path === ':memory:' ? 'sqlite::memory:' : `sqlite:${options.path}`;
    this.connection = new SqliteConnection(
      options.path,
      this.description,
      options.busyTimeoutMs ?? 10_000,
    );
    const here = new SqlitePageWriter(this.connection.handle);
    this.committer = !options.writerThread
      ? new InThreadCommitter(here)
      : new WriterThreadCommitter(
          {
            path: options.path,
            description: this.description,
            busyTimeoutMs: options.busyTimeoutMs ?? 10_000,
            storedColumnsQuery: this.connection.storedColumnsQuery(),
          },
          here,
        );
    this.sink = new SqlitePageSink(this.committer, () => this.auditStore.enabled);
    if (options.path !== ':memory:') {
      this.file = { path: options.path, identity: fileIdentity(options.path) };
    }
    this.logger = options.logger;
    this.lock = new SqliteWriterLock(
      this.connection,
      options.path === ':memory:' ? undefined : sqliteLockFile(options.path),
      options.fileModes,
      (options.lockStaleAfterSeconds ?? 600) * 1000,
      options.logger,
    );
    this.missingRows = sqliteMissingRows(
      this.connection,
      new SqliteHistoryWriter(this.connection.db),
    );
    this.auditStore = new KyselyAuditStore({
      rules: SQLITE_RULES,
      kysely: this.connection.kysely as unknown as Kysely<never>,
      exclusive: (work, what) => this.exclusive(work, what),
      openSnapshot: async () => openSqliteSnapshot(options.path, this.connection.db),
      onEnabled: () => {
        this.connection.bookkeeping.chainRecords(SQLITE_RULES);
        // Its own commits would otherwise checkpoint the writer thread's larger WAL at 4 MB.
        this.connection.handle.spaceCheckpoints();
      },
    });
    const exclusive = <T>(work: () => T | Promise<T>, what?: string) => this.exclusive(work, what);
    this.bookkeeping = bookkeepingStore(this.connection.bookkeeping, exclusive);
    const parts = {
      connection: this.connection,
      exclusive,
      audit: this.auditStore,
      forget: () => this.committer.forget(),
    };
    this.tools = new SqliteTools(parts);
    this.reads = new SqliteReads(parts);
  }

  get audit(): KyselyAuditStore {
    return this.auditStore;
  }

  private get db(): Database.Database {
    return this.connection.db;
  }

  /** Runs `work` alone on this connection, after every page handed over has committed. */
  private exclusive<T>(work: () => T | Promise<T>, what?: string): Promise<T> {
    return this.connection.exclusive(async () => {
      await this.committer.idle();
      return work();
    }, what);
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
          this.connection.writeTransaction(() => {
            // Another process may have applied it between our check and our write lock.
            if (
              db.prepare('SELECT 1 FROM _ocs_migrations WHERE version = ?').get(migration.version)
            )
              return;
            db.exec(migration.sql);
            SQLITE_MIGRATION_CODE.get(migration.version)?.(this.connection);
            db.prepare(
              'INSERT INTO _ocs_migrations (version, name, applied_at) VALUES (?, ?, ?)',
            ).run(migration.version, migration.name, nowIso());
          });
        },
      });
    }, 'Migrating the warehouse');
    await this.auditStore.load();
  }

  async refresh(): Promise<void> {
    // A file put in its place (a snapshot restored, the file removed) is another warehouse.
    if (this.file && fileIdentity(this.file.path) !== this.file.identity) {
      throw new WarehouseError(`The warehouse file ${this.file.path} was replaced or removed.`);
    }
    await this.migrate();
    // Re-preparing every statement cost an unchanged daemon run about 2 ms of its ~57.
    if (this.connection.handle.schemaChanged()) {
      this.committer.forget();
      this.connection.handle.forgetPrepared();
    }
  }

  describeTable(table: string): Promise<ColumnSpec[] | undefined> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      const columns = this.connection.storedColumns(table);
      if (columns.length > 0) return columns;
      return this.connection.tableExists(table) ? [] : undefined;
    }, 'Reading a table description');
  }

  status(): Promise<ResourceStatus[]> {
    return this.exclusive(
      () => readResourceStatuses(sqliteRows(this.db), sqliteTableFacts(this.db)),
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
      const dropping = changes.find((change) => change.kind === 'drop_column');
      if (dropping) {
        this.auditStore.refuseRewrite(
          `Dropping ${dropping.table}.${dropping.column} (exclude_fields)`,
        );
      }
      const tables = [...new Set(changes.map((change) => change.table))];
      try {
        this.connection.writeTransaction(() => {
          const now = nowIso();
          for (const table of tables) dropSqliteLiveView(this.connection, table);
          for (const change of changes) {
            if (applySqliteSchemaChange(this.connection, change, now)) {
              this.connection.run(
                this.connection.bookkeeping.recordSchemaChangeQuery(change, checksums, now),
              );
            }
          }
          for (const table of tables) createSqliteLiveView(this.connection, table);
        });
      } finally {
        this.committer.forget();
      }
      // A dropped (excluded) column's values stay in free space of the file until it is rebuilt:
      // rebuild it (once, when a field is newly excluded) so they are really gone.
      if (changes.some((change) => change.kind === 'drop_column')) this.db.exec('VACUUM');
    }, 'Applying schema changes');
  }

  // ---------------------------------------------------------------- page writes

  /**
   * Encodes the page now and hands it to the committer without waiting for the pages ahead of
   * it, so the caller can prepare the next page while this one commits (../commit-order.ts).
   */
  writePage(page: PageWrite): Promise<PageWriteResult> {
    const handedOver = this.connection.exclusive(() => {
      this.lock.assertNotLost();
      // In an object: exclusive() would otherwise wait for the commit itself.
      return { committed: this.sink.writePage(page) };
    }, `Writing a page of ${page.resource}`);
    return handedOver.then(({ committed }) => committed);
  }

  saveCursor(saved: SavedCursor): Promise<void> {
    return this.exclusive(() => {
      this.lock.assertNotLost();
      return this.connection.bookkeeping.saveCursor(saved);
    }, `Saving the cursor of ${saved.resource}`);
  }

  /**
   * With a writer thread, another thread can commit pages through a port to it; without one
   * (`:memory:`, or opened without), only this one can.
   */
  pageSinkSetup(): { setup: PageSinkSetup; transfer: TransferListItem[] } | undefined {
    if (!(this.committer instanceof WriterThreadCommitter)) return undefined;
    this.lock.assertNotLost();
    const audit = this.auditStore.enabled;
    const port = this.committer.attach(audit);
    const setup: SqlitePageSinkSetup = {
      dialect: 'sqlite',
      description: this.description,
      audit,
      port,
      // V8's default (two 16 MB semi-spaces) sat mostly empty between pages: 16 MB in all kept a
      // sync's peak RSS about 20 MB lower for the same CPU (8 MB cost about 15% more CPU). A
      // PostgreSQL page thread builds its COPY text and keeps the default: 16 MB cost it ~8%.
      youngGenerationMb: 16,
    };
    return { setup, transfer: [port] };
  }

  assertLockHeld(): void {
    this.lock.assertNotLost();
  }

  markMissingAsDeleted(
    table: string,
    runId: number,
    mode: DeleteMode,
    history: boolean,
  ): Promise<number> {
    return this.exclusive(
      () =>
        markMissingAsDeleted(this.missingRows, table, {
          runId,
          mode,
          history,
          audit: this.auditStore.enabled,
        }),
      `Marking missing rows of ${table} as deleted`,
    );
  }

  markMissingUnderChoice(
    table: string,
    runId: number,
    options: MissingUnderChoice,
  ): Promise<{ deleted: number; outOfScope: number }> {
    return this.exclusive(
      () =>
        markMissingUnderChoice(this.missingRows, table, runId, {
          ...options,
          audit: this.auditStore.enabled,
        }),
      `Marking rows missing from ${table} under the chatbot choice`,
    );
  }

  // ---------------------------------------------------------------- lock

  async acquireLock(waitMs: number, signal?: AbortSignal): Promise<Lock> {
    const lock = await closeRunsOfDeadHolders(
      await this.lock.acquire(waitMs, signal),
      (note, endOf) =>
        this.exclusive(
          () => this.connection.bookkeeping.closeRunsLeftRunning(note, endOf),
          'Closing the runs of a process that ended',
        ),
      this.logger,
    );
    return {
      // The writer thread and the page cache live for a run: a warehouse kept open between runs
      // (a fleet's daemon keeps one a team) holds neither.
      release: async () => {
        await lock.release();
        await this.committer.rest();
        if (!this.connection.isClosed) this.db.pragma('shrink_memory');
      },
    };
  }

  get archive(): SqliteArchiveStore {
    this.archiveStore ??= new SqliteArchiveStore(
      this.db,
      (work, what) => this.exclusive(work, what),
      decodeValue,
    );
    return this.archiveStore;
  }

  fileLedger(): FileLedgerStore {
    return new KyselyFileLedger(
      this.connection.kysely as unknown as Kysely<never>,
      SQLITE_RULES,
      this.auditStore.enabled,
    );
  }

  async close(): Promise<void> {
    if (this.connection.isClosed) return;
    // The pages handed over commit before the lock is let go.
    await this.committer.close();
    await this.lock.releaseHeld();
    await this.connection.close();
  }
}

/** Device and inode of a file (undefined: there is none). */
function fileIdentity(path: string): string | undefined {
  try {
    const { dev, ino } = statSync(path);
    return `${dev}:${ino}`;
  } catch {
    return undefined;
  }
}
