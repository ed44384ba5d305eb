/**
 * The PostgreSQL warehouse: every table in one schema (`ocs` by default). This class wires the
 * roles together: the connection and its settings (connection.ts), schema changes (schema.ts),
 * the page-write hot path and history (page-writes.ts), the writer lock (lock.ts), the
 * operator's tools (tools.ts) and the reads (reads.ts); the bookkeeping (../bookkeeping.ts) and
 * the marking of missing rows (../missing-rows.ts, with missing-rows.ts's SQL and transaction)
 * are shared. Each page is one transaction holding its rows, its history versions and its
 * cursor.
 */
import type { Kysely } from 'kysely';
import type pg from 'pg';
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
import { KyselyAuditStore } from '../audit-store.js';
import { bookkeepingStore, nowIso } from '../bookkeeping.js';
import { KyselyFileLedger } from '../file-ledger.js';
import { assertSafeTableName, historyTableName, quoteIdentifier as q } from '../identifiers.js';
import { applyMigrations, type Migration } from '../migrations.js';
import {
  markMissingAsDeleted,
  markMissingUnderChoice,
  type MissingRowsDialect,
} from '../missing-rows.js';
import { readResourceStatuses } from '../reader.js';
import { assertSafeSchemaChanges } from '../schema-changes.js';
import { closeRunsOfDeadHolders, type WarehouseLogger } from '../writer-lock.js';
import { PostgresArchiveStore } from './archive.js';
import { openPostgresSnapshot } from './audit.js';
import { advisoryLockKey, PostgresConnection } from './connection.js';
import { PostgresWriterLock } from './lock.js';
import { POSTGRES_MIGRATION_CODE } from './migrations.js';
import { postgresMissingRows } from './missing-rows.js';
import { PostgresPageSink, type PostgresPageSinkSetup } from './page-sink.js';
import { PostgresReads } from './reads.js';
import { postgresRows, postgresTableFacts } from './reader.js';
import { POSTGRES_RULES } from './rules.js';
import {
  applyPostgresSchemaChange,
  createPostgresLiveView,
  dropPostgresLiveView,
} from './schema.js';
import { PostgresTools } from './tools.js';
import { decodeValue, readExpression } from './values.js';

export { advisoryLockKey, describePostgresUrl, postgresClientConfig } from './connection.js';
export {
  POSTGRES_TYPE,
  cleanJsonText,
  cleanText,
  isoTextSql,
  wideningExpression,
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

export class PostgresWarehouse implements Warehouse {
  readonly dialect = 'postgres' as const;
  readonly description: string;
  readonly schema: string;

  private readonly connection: PostgresConnection;
  /** This process's pages, committed on the warehouse's pool. */
  private readonly pages: PostgresPageSink;
  private readonly lock: PostgresWriterLock;
  private readonly logger?: WarehouseLogger;
  private archiveStore?: PostgresArchiveStore;
  private readonly auditStore: KyselyAuditStore;
  /** Rows missing from a walk, marked in a transaction of the pool. */
  private readonly missingRows: MissingRowsDialect;
  readonly bookkeeping: BookkeepingStore;
  readonly tools: PostgresTools;
  readonly reads: PostgresReads;

  constructor(private readonly options: PostgresWarehouseOptions) {
    this.connection = new PostgresConnection({
      url: options.url,
      schema: options.schema ?? 'ocs',
      poolSize: options.poolSize ?? 4,
      statementTimeoutSeconds: options.statementTimeoutSeconds,
      connectTimeoutSeconds: options.connectTimeoutSeconds,
      logger: options.logger,
    });
    this.schema = this.connection.schema;
    this.description = this.connection.description;
    this.logger = options.logger;
    this.lock = new PostgresWriterLock(
      this.connection,
      (options.lockStaleAfterSeconds ?? 600) * 1000,
      options.logger,
    );
    this.pages = new PostgresPageSink(
      this.connection,
      () => this.auditStore.enabled,
      () => this.lock.assertNotLost(),
    );
    this.auditStore = new KyselyAuditStore({
      rules: POSTGRES_RULES,
      kysely: this.connection.kysely as unknown as Kysely<never>,
      exclusive: (work, what) => this.guard(what, work),
      openSnapshot: () =>
        this.guard('Opening a view for audit verify', () => openPostgresSnapshot(this.connection)),
      onEnabled: () => this.connection.bookkeeping.chainRecords(POSTGRES_RULES),
    });
    this.missingRows = postgresMissingRows(this.connection);
    this.bookkeeping = bookkeepingStore(this.connection.bookkeeping, (work, what) =>
      this.guard(what, work),
    );
    this.tools = new PostgresTools(this.connection, {
      audit: this.auditStore,
      forget: () => this.pages.forget(),
    });
    this.reads = new PostgresReads(this.connection);
  }

  get audit(): KyselyAuditStore {
    return this.auditStore;
  }

  // ---------------------------------------------------------------- plumbing

  private table(name: string): string {
    return this.connection.table(name);
  }

  private guard<T>(action: string, work: () => Promise<T>): Promise<T> {
    return this.connection.guard(action, work);
  }

  // ---------------------------------------------------------------- migrations

  async migrate(): Promise<void> {
    await this.guard('Preparing the warehouse', async () => {
      const key = advisoryLockKey('migrate', this.schema);
      // Concurrent first runs would race on CREATE SCHEMA / CREATE TABLE: serialise them.
      const locked = async <T>(work: (client: pg.PoolClient) => Promise<T>) =>
        this.connection.transaction(async (client) => {
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
            await POSTGRES_MIGRATION_CODE.get(migration.version)?.(this.connection, client);
            await client.query(
              `INSERT INTO ${this.table('_ocs_migrations')} (version, name, applied_at) VALUES ($1, $2, $3)`,
              [migration.version, migration.name, nowIso()],
            );
          }),
      });
    });
    await this.auditStore.load();
  }

  async refresh(): Promise<void> {
    await this.migrate();
    this.pages.forget();
  }

  describeTable(table: string): Promise<ColumnSpec[] | undefined> {
    return this.guard(`Describing ${table}`, async () => {
      assertSafeTableName(table);
      return this.connection.withClient(async (client) => {
        const columns = await this.connection.storedColumns(client, table);
        if (columns.length > 0) return columns;
        return (await this.connection.tableExistsOn(client, table)) ? [] : undefined;
      });
    });
  }

  status(): Promise<ResourceStatus[]> {
    // Queries go through the pool, never a held connection: a pool of one would wait for itself.
    return this.guard('Reading the status', () =>
      readResourceStatuses(
        postgresRows(this.connection.pool),
        postgresTableFacts(this.connection.pool, this.schema),
      ),
    );
  }

  // ---------------------------------------------------------------- schema changes

  applySchemaChanges(
    changes: SchemaChange[],
    checksums: { from: string | null; to: string | null },
  ): Promise<void> {
    return this.guard('Changing the warehouse schema', async () => {
      assertSafeSchemaChanges(changes);
      const dropping = changes.find((change) => change.kind === 'drop_column');
      if (dropping) {
        this.auditStore.refuseRewrite(
          `Dropping ${dropping.table}.${dropping.column} (exclude_fields)`,
        );
      }
      try {
        // DDL is transactional in PostgreSQL: all the changes land, or none.
        await this.connection.transaction(async (client) => {
          const now = nowIso();
          const tables = [...new Set(changes.map((change) => change.table))];
          for (const table of tables) await dropPostgresLiveView(this.connection, client, table);
          for (const change of changes) {
            if (await applyPostgresSchemaChange(this.connection, client, change, now)) {
              await this.connection.run(
                client,
                this.connection.bookkeeping.recordSchemaChangeQuery(change, checksums, now),
              );
            }
          }
          for (const table of tables) await createPostgresLiveView(this.connection, client, table);
        });
      } finally {
        this.pages.forget();
      }
      // DROP COLUMN only hides a column; the emptied rows' old versions stay on disk until the
      // table is rewritten: rewrite the tables that lost an (excluded) column, once.
      const dropped = new Set(
        changes.filter((change) => change.kind === 'drop_column').map((change) => change.table),
      );
      if (dropped.size === 0) return;
      await this.connection.withoutTimeout(async (client) => {
        for (const table of dropped) {
          for (const target of [table, historyTableName(table)]) {
            if (await this.connection.tableExistsOn(client, target)) {
              await client.query(`VACUUM FULL ${this.table(target)}`);
            }
          }
        }
      });
    });
  }

  // ---------------------------------------------------------------- page writes

  /**
   * Hands the page over without waiting for the pages ahead of it: it commits after them, and
   * not at all when one of them failed (../commit-order.ts), so the caller can prepare the next
   * page while PostgreSQL commits this one.
   */
  writePage(page: PageWrite): Promise<PageWriteResult> {
    return this.pages.writePage(page);
  }

  saveCursor(saved: SavedCursor): Promise<void> {
    return this.guard(`Saving the cursor of ${saved.resource}`, () => {
      this.lock.assertNotLost();
      return this.connection.bookkeeping.saveCursor(saved);
    });
  }

  /** Another thread's sink opens connections of its own (the same settings, the same schema). */
  pageSinkSetup(): { setup: PageSinkSetup; transfer: TransferListItem[] } {
    this.lock.assertNotLost();
    const setup: PostgresPageSinkSetup = {
      dialect: 'postgres',
      url: this.options.url,
      schema: this.schema,
      poolSize: this.options.poolSize ?? 4,
      statementTimeoutSeconds: this.options.statementTimeoutSeconds,
      connectTimeoutSeconds: this.options.connectTimeoutSeconds,
      audit: this.auditStore.enabled,
    };
    return { setup, transfer: [] };
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
    return this.guard(`Marking rows missing from ${table}`, () =>
      markMissingAsDeleted(this.missingRows, table, {
        runId,
        mode,
        history,
        audit: this.auditStore.enabled,
      }),
    );
  }

  markMissingUnderChoice(
    table: string,
    runId: number,
    options: MissingUnderChoice,
  ): Promise<{ deleted: number; outOfScope: number }> {
    return this.guard(`Marking rows missing from ${table} under the chatbot choice`, () =>
      markMissingUnderChoice(this.missingRows, table, runId, {
        ...options,
        audit: this.auditStore.enabled,
      }),
    );
  }

  // ---------------------------------------------------------------- lock

  async acquireLock(waitMs: number, signal?: AbortSignal): Promise<Lock> {
    return closeRunsOfDeadHolders(
      await this.lock.acquire(waitMs, signal),
      (note, endOf) =>
        this.guard('Closing the runs of a process that ended', () =>
          this.connection.bookkeeping.closeRunsLeftRunning(note, endOf),
        ),
      this.logger,
    );
  }

  get archive(): PostgresArchiveStore {
    this.archiveStore ??= new PostgresArchiveStore({
      query: async <R>(what: string, sql: string, parameters: unknown[]) =>
        this.guard(
          what,
          async () => (await this.connection.pool.query(sql, parameters)).rows as R[],
        ),
      table: (name) => this.table(name),
      schema: this.schema,
      readExpression,
      decode: decodeValue,
    });
    return this.archiveStore;
  }

  fileLedger(): FileLedgerStore {
    return new KyselyFileLedger(
      this.connection.kysely as unknown as Kysely<never>,
      POSTGRES_RULES,
      this.auditStore.enabled,
    );
  }

  async close(): Promise<void> {
    if (this.connection.isClosed) return;
    await this.lock.releaseHeld();
    this.pages.forget();
    await this.connection.close();
  }
}
