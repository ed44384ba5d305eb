/**
 * The SQLite warehouse: one file (or `:memory:`), WAL, one writer. This class wires the roles
 * together: the connection (connection.ts), value encoding (values.ts), schema
 * changes (schema.ts), the page-write hot path and history (page-writes.ts) and the
 * writer lock (lock.ts); kysely runs the shared bookkeeping (../bookkeeping.ts). Every page
 * is one transaction holding its rows, its history versions and its cursor, so a crash at any
 * instant loses or doubles nothing.
 */
import type Database from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { KyselyFileLedger } from '../file-ledger.js';
import type { FileLedgerStore, PageSinkSetup } from '../../interfaces.js';
import type { TransferListItem } from 'node:worker_threads';
import type {
  ChatbotChoiceRecord,
  ColumnSpec,
  DeleteMode,
  MissingUnderChoice,
  IndexSpec,
  Lock,
  PageWrite,
  PageWriteResult,
  SavedCursor,
  ReferenceCheck,
  ResourceOutcome,
  ResourceState,
  ResourceStatus,
  RowBatchQuery,
  RunKind,
  RunSummary,
  SchemaChange,
  StoredRow,
  Warehouse,
} from '../../interfaces.js';
import { WarehouseError } from '../../errors.js';
import { KyselyAuditStore } from '../audit-store.js';
import { nowIso } from '../bookkeeping.js';
import { readResourceStatuses } from '../reader.js';
import { sqliteRows, sqliteTableFacts } from './reader.js';
import {
  assertSafeColumnName,
  assertSafeTableName,
  historyTableName,
  liveViewName,
  quoteIdentifier as q,
} from '../identifiers.js';
import { applyMigrations, type Migration } from '../migrations.js';
import { assertSafeSchemaChanges } from '../schema-changes.js';
import { SqliteConnection } from './connection.js';
import { SqliteWriterLock } from './lock.js';
import { SqliteArchiveStore } from './archive.js';
import { InThreadCommitter, WriterThreadCommitter, type PageCommitter } from './page-committer.js';
import { SqlitePageWriter } from './page-writes.js';
import { SqlitePageSink, type SqlitePageSinkSetup } from './page-sink.js';
import { openSqliteSnapshot } from './audit.js';
import { SqliteHistoryWriter } from './history.js';
import { applySqliteSchemaChange, createSqliteLiveView, dropSqliteLiveView } from './schema.js';
import { SQLITE_MIGRATION_CODE } from './migrations.js';
import { decodeValue, encodeValue } from './values.js';
import { OWN_COLUMNS, createIndexSql, referenceCheckSql } from '../table-definitions.js';
import { missingUnderChoiceSql, type ChoiceSqlDialect } from '../missing-under-choice.js';
import { assertValueFits, narrowInteger, parseIdText, toJsonText } from '../values.js';
import { closeRunsOfDeadHolders, type WarehouseLogger } from '../writer-lock.js';
import type { PrivateModes } from '../../private-files.js';
import { sqliteLockFile } from './file.js';

export type { WarehouseLogger } from '../writer-lock.js';

/** SQLite's side of the clauses that settle rows missing under a chatbot choice. */
const SQLITE_CHOICE_SQL: ChoiceSqlDialect = {
  table: q,
  placeholder: () => '?',
  // CASE, not AND: SQLite evaluates only the branch taken, and json_type fails on bad JSON.
  listIds: (alias, column) => {
    const value = `${alias}.${q(column)}`;
    return {
      join: `, json_each(CASE WHEN json_valid(${value}) THEN CASE WHEN json_type(${value}) = 'array' THEN ${value} END END) AS e`,
      id: `CASE WHEN e.type = 'integer' THEN e.value END`,
    };
  },
};

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
  /** History versions closed on this connection (full refreshes). */
  private readonly history: SqliteHistoryWriter;

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
    this.logger = options.logger;
    this.lock = new SqliteWriterLock(
      this.connection,
      options.path === ':memory:' ? undefined : sqliteLockFile(options.path),
      options.fileModes,
      (options.lockStaleAfterSeconds ?? 600) * 1000,
      options.logger,
    );
    this.history = new SqliteHistoryWriter(this.connection.db);
    this.auditStore = new KyselyAuditStore({
      dialect: 'sqlite',
      kysely: this.connection.kysely as unknown as Kysely<never>,
      exclusive: (work, what) => this.exclusive(work, what),
      openSnapshot: async () => openSqliteSnapshot(options.path, this.connection.db),
      onEnabled: () => {
        this.bookkeeping.chainRecords('sqlite');
        // Its own commits would otherwise checkpoint the writer thread's larger WAL at 4 MB.
        this.connection.handle.spaceCheckpoints();
      },
    });
  }

  get audit(): KyselyAuditStore {
    return this.auditStore;
  }

  private get db(): Database.Database {
    return this.connection.db;
  }

  private get bookkeeping() {
    return this.connection.bookkeeping;
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

  hasLoaded(): Promise<boolean> {
    return this.exclusive(() => this.bookkeeping.hasLoaded(), 'Reading the runs');
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

  dropTable(table: string): Promise<void> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      this.auditStore.refuseRewrite(`Dropping the table ${table}`);
      this.connection.writeTransaction(() => {
        this.db.exec(`DROP VIEW IF EXISTS ${q(liveViewName(table))}`);
        this.db.exec(`DROP TABLE IF EXISTS ${q(table)}`);
        this.db.exec(`DROP TABLE IF EXISTS ${q(historyTableName(table))}`);
        for (const query of this.bookkeeping.forgetTableQueries(table, nowIso())) {
          this.connection.run(query);
        }
      });
      this.committer.forget();
    }, `Dropping ${table}`);
  }

  recordReset(resources: readonly string[], note: string): Promise<number> {
    return this.exclusive(() => this.bookkeeping.recordReset(resources, note), 'Recording a reset');
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
              this.connection.run(this.bookkeeping.recordSchemaChangeQuery(change, checksums, now));
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
      return this.bookkeeping.saveCursor(saved);
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
    return this.exclusive(() => {
      assertSafeTableName(table);
      if (!this.connection.tableExists(table)) return 0;
      // IS NOT: null-safe, so rows no run has claimed count as missing too.
      const missing = `WHERE "_run_id" IS NOT ? AND "_deleted_at" IS NULL`;
      const now = nowIso();
      const audit = this.auditStore.enabled;
      return this.connection.writeTransaction(() => {
        const historyTable = historyTableName(table);
        if ((history || audit) && this.connection.tableExists(historyTable)) {
          this.history.close(
            table,
            historyTable,
            { sql: missing, parameters: [runId] },
            { at: now, operation: mode === 'remove' ? 'remove' : 'delete', runId, audit },
          );
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

  markMissingUnderChoice(
    table: string,
    runId: number,
    options: MissingUnderChoice,
  ): Promise<{ deleted: number; outOfScope: number }> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      if (!this.connection.tableExists(table)) return { deleted: 0, outOfScope: 0 };
      const { selection, proofs, mode, history } = options;
      const { gone, exits } = missingUnderChoiceSql(
        SQLITE_CHOICE_SQL,
        table,
        { runId, selection, ...(proofs ? { proofs } : {}) },
        (name) =>
          this.connection.tableExists(name) ? this.connection.storedColumns(name) : undefined,
      );
      const now = nowIso();
      const audit = this.auditStore.enabled;
      return this.connection.writeTransaction(() => {
        const historyTable = historyTableName(table);
        const keepHistory = (history || audit) && this.connection.tableExists(historyTable);
        let deleted = 0;
        for (const proven of gone) {
          if (keepHistory) {
            this.history.close(table, historyTable, proven, {
              at: now,
              operation: mode === 'remove' ? 'remove' : 'delete',
              runId,
              audit,
            });
          }
          deleted += (
            mode === 'remove'
              ? this.db.prepare(`DELETE FROM ${q(table)} ${proven.sql}`).run(...proven.parameters)
              : this.db
                  .prepare(`UPDATE ${q(table)} SET "_deleted_at" = ? ${proven.sql}`)
                  .run(now, ...proven.parameters)
          ).changes;
        }
        if (keepHistory) {
          const present = new Set(this.connection.physicalColumns(historyTable));
          const columns = this.connection
            .storedColumns(table)
            .map((column) => column.name)
            .filter((name) => present.has(name));
          this.history.exitScope(table, historyTable, columns, exits, { at: now, runId, audit });
        }
        const outOfScope = this.db
          .prepare(`UPDATE ${q(table)} SET "_ocs_out_of_scope_since" = ? ${exits.sql}`)
          .run(now, ...exits.parameters).changes;
        return { deleted, outOfScope };
      });
    }, `Marking rows missing from ${table} under the chatbot choice`);
  }

  recordRunChoice(runId: number, choice: ChatbotChoiceRecord): Promise<void> {
    return this.exclusive(
      () => this.bookkeeping.recordRunChoice(runId, choice),
      'Recording the chatbot choice',
    );
  }

  chatbotChoices(): Promise<Map<string, ChatbotChoiceRecord>> {
    return this.exclusive(() => this.bookkeeping.chatbotChoices(), 'Reading the chatbot choices');
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
      const type = this.connection.columnType(table, column);
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
      this.auditStore.refuseRewrite(`Rewriting ${table}.${column}`);
      const type = this.connection.columnType(table, column);
      const encoded = values.map(({ id, value }) => {
        assertValueFits(value, type, table, column, id);
        return [encodeValue(type, value), parseIdText(id, table)] as const;
      });
      const update = this.db.prepare(`UPDATE ${q(table)} SET ${q(column)} = ? WHERE "id" = ?`);
      this.connection.writeTransaction(() => {
        for (const [value, id] of encoded) update.run(value, id);
      });
    }, `Updating ${table}.${column}`);
  }

  // ---------------------------------------------------------------- analysts' reads and indexes

  ensureIndexes(indexes: readonly IndexSpec[]): Promise<number> {
    return this.exclusive(() => {
      let created = 0;
      this.connection.writeTransaction(() => {
        for (const { table, column } of indexes) {
          assertSafeTableName(table);
          assertSafeColumnName(column, table);
          if (!this.connection.physicalColumns(table).includes(column)) continue;
          const before = this.indexCount();
          this.db.exec(createIndexSql(q, table, column));
          if (this.indexCount() > before) created += 1;
        }
      });
      return created;
    }, 'Creating indexes');
  }

  private indexCount(): number {
    return this.db
      .prepare("SELECT count(*) FROM sqlite_master WHERE type = 'index'")
      .pluck()
      .get() as number;
  }

  checkReference(table: string, column: string, target: string): Promise<ReferenceCheck> {
    return this.exclusive(() => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      assertSafeTableName(target);
      const row = this.db.prepare(referenceCheckSql(q, table, column, target)).get() as {
        values: number;
        unmatched: number;
      };
      return { values: Number(row.values), unmatched: Number(row.unmatched) };
    }, `Checking ${table}.${column} against ${target}`);
  }

  readRows(query: RowBatchQuery): Promise<StoredRow[]> {
    const { table, columns, afterId, limit, live, jsonAsText } = query;
    return this.exclusive(() => {
      const conditions = [
        ...(afterId === null ? [] : ['"id" > ?']),
        ...(live ? ['"_deleted_at" IS NULL'] : []),
      ];
      const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
      return this.selectRows(
        table,
        columns,
        `${where} ORDER BY "id" LIMIT ?`,
        [...(afterId === null ? [] : [parseIdText(afterId, table)]), limit],
        jsonAsText,
      );
    }, `Reading rows of ${table}`);
  }

  readRowsById(
    table: string,
    columns: readonly ColumnSpec[],
    ids: readonly string[],
  ): Promise<StoredRow[]> {
    return this.exclusive(
      () =>
        this.selectRows(table, columns, 'WHERE "id" IN (SELECT value FROM json_each(?))', [
          toJsonText(ids.map((id) => parseIdText(id, table))),
        ]),
      `Reading rows of ${table}`,
    );
  }

  /** Rows of a table, `id`, the columns and our own, decoded. */
  private selectRows(
    table: string,
    columns: readonly ColumnSpec[],
    rest: string,
    parameters: unknown[],
    jsonAsText = false,
  ): StoredRow[] {
    assertSafeTableName(table);
    for (const column of columns) assertSafeColumnName(column.name, table);
    const names = ['id', ...[...columns, ...OWN_COLUMNS].map((column) => column.name)];
    const rows = this.db
      .prepare(`SELECT ${names.map(q).join(', ')} FROM ${q(table)} ${rest}`)
      .safeIntegers(true)
      .all(...parameters) as Array<Record<string, unknown>>;
    return rows.map((stored) => {
      const row: StoredRow = { id: narrowInteger(stored.id as bigint) };
      for (const column of [...columns, ...OWN_COLUMNS]) {
        const value = stored[column.name];
        row[column.name] =
          jsonAsText && column.type === 'json' ? value : decodeValue(column.type, value);
      }
      return row;
    });
  }

  // ---------------------------------------------------------------- lock

  async acquireLock(waitMs: number, signal?: AbortSignal): Promise<Lock> {
    return closeRunsOfDeadHolders(
      await this.lock.acquire(waitMs, signal),
      (note, endOf) =>
        this.exclusive(
          () => this.bookkeeping.closeRunsLeftRunning(note, endOf),
          'Closing the runs of a process that ended',
        ),
      this.logger,
    );
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
      'sqlite',
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
