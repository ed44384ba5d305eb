/**
 * The PostgreSQL warehouse: every table in one schema (`ocs` by default). This class wires the
 * roles together: the connection and its settings (connection.ts), value encoding
 * (values.ts), schema changes (schema.ts), the page-write hot path and history
 * (page-writes.ts) and the writer lock (lock.ts); kysely runs the shared
 * bookkeeping (../bookkeeping.ts). Each page is one transaction holding its rows, its history
 * versions and its cursor.
 */
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
import type pg from 'pg';
import { WarehouseError } from '../../errors.js';
import { KyselyAuditStore } from '../audit-store.js';
import { nowIso } from '../bookkeeping.js';
import { readResourceStatuses } from '../reader.js';
import { postgresRows, postgresTableFacts } from './reader.js';
import {
  assertSafeColumnName,
  assertSafeTableName,
  columnIndexName,
  historyTableName,
  liveViewName,
  quoteIdentifier as q,
} from '../identifiers.js';
import { applyMigrations, type Migration } from '../migrations.js';
import { advisoryLockKey, PostgresConnection } from './connection.js';
import { PostgresArchiveStore } from './archive.js';
import { PostgresWriterLock } from './lock.js';
import { PostgresPageSink, type PostgresPageSinkSetup } from './page-sink.js';
import { openPostgresSnapshot } from './audit.js';
import { closeVersions, exitScope } from './history.js';
import { POSTGRES_MIGRATION_CODE } from './migrations.js';
import {
  applyPostgresSchemaChange,
  createPostgresLiveView,
  dropPostgresLiveView,
} from './schema.js';
import {
  POSTGRES_TYPE,
  decodeValue,
  encodeValue,
  readExpression,
  type AlteredCounter,
} from './values.js';
import { assertSafeSchemaChanges } from '../schema-changes.js';
import { OWN_COLUMNS, createIndexSql, referenceCheckSql } from '../table-definitions.js';
import { assertValueFits, narrowInteger, parseIdText } from '../values.js';
import {
  missingUnderChoiceSql,
  proofTables,
  type ChoiceSqlDialect,
} from '../missing-under-choice.js';
import { closeRunsOfDeadHolders, type WarehouseLogger } from '../writer-lock.js';

export { advisoryLockKey, describePostgresUrl, postgresClientConfig } from './connection.js';
export {
  POSTGRES_TYPE,
  cleanJsonText,
  cleanText,
  isoTextSql,
  wideningExpression,
} from './values.js';

/** PostgreSQL's side of the clauses that settle rows missing under a chatbot choice. */
function postgresChoiceSql(table: (name: string) => string): ChoiceSqlDialect {
  return {
    table,
    placeholder: (position, type) => `$${position}::${type}`,
    // CASE: PostgreSQL evaluates only the branch taken, so no cast meets a value it cannot take.
    listIds: (alias, column) => {
      const value = `${alias}.${q(column)}`;
      return {
        join: `CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(${value}) = 'array' THEN ${value} END) AS e(value)`,
        id: `CASE WHEN jsonb_typeof(e.value) = 'number' AND (e.value #>> '{}') ~ '^-?[0-9]{1,18}$' THEN (e.value #>> '{}')::bigint END`,
      };
    },
  };
}

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
      dialect: 'postgres',
      kysely: this.connection.kysely as unknown as Kysely<never>,
      exclusive: (work, what) => this.guard(what, work),
      openSnapshot: () =>
        this.guard('Opening a view for audit verify', () => openPostgresSnapshot(this.connection)),
      onEnabled: () => this.bookkeeping.chainRecords('postgres'),
    });
  }

  get audit(): KyselyAuditStore {
    return this.auditStore;
  }

  // ---------------------------------------------------------------- plumbing

  private table(name: string): string {
    return this.connection.table(name);
  }

  private get bookkeeping() {
    return this.connection.bookkeeping;
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

  // ---------------------------------------------------------------- bookkeeping

  startRun(kind: RunKind, schemaChecksum: string | null): Promise<number> {
    return this.guard('Starting a run', () => this.bookkeeping.startRun(kind, schemaChecksum));
  }

  finishRun(runId: number, summary: RunSummary): Promise<void> {
    return this.guard(`Finishing run ${runId}`, () => this.bookkeeping.finishRun(runId, summary));
  }

  hasLoaded(): Promise<boolean> {
    return this.guard('Reading the runs', () => this.bookkeeping.hasLoaded());
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

  dropTable(table: string): Promise<void> {
    return this.guard(`Dropping ${table}`, async () => {
      assertSafeTableName(table);
      this.auditStore.refuseRewrite(`Dropping the table ${table}`);
      try {
        await this.connection.transaction(async (client) => {
          await client.query(`DROP VIEW IF EXISTS ${this.table(liveViewName(table))}`);
          await client.query(`DROP TABLE IF EXISTS ${this.table(table)}`);
          await client.query(`DROP TABLE IF EXISTS ${this.table(historyTableName(table))}`);
          for (const query of this.bookkeeping.forgetTableQueries(table, nowIso())) {
            await this.connection.run(client, query);
          }
        });
      } finally {
        this.pages.forget();
      }
    });
  }

  recordReset(resources: readonly string[], note: string): Promise<number> {
    return this.guard('Recording a reset', () => this.bookkeeping.recordReset(resources, note));
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
                this.bookkeeping.recordSchemaChangeQuery(change, checksums, now),
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
      return this.bookkeeping.saveCursor(saved);
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
    return this.guard(`Marking rows missing from ${table}`, async () => {
      assertSafeTableName(table);
      return this.connection.transaction(async (client) => {
        if (!(await this.connection.tableExistsOn(client, table))) return 0;
        // IS DISTINCT FROM: null-safe, so rows no run has claimed count as missing too.
        const missing = (runParameter: string) =>
          `WHERE "_run_id" IS DISTINCT FROM ${runParameter}::bigint AND "_deleted_at" IS NULL`;
        const now = nowIso();
        const historyTable = historyTableName(table);
        const audit = this.auditStore.enabled;
        if ((history || audit) && (await this.connection.tableExistsOn(client, historyTable))) {
          await closeVersions(
            client,
            { table: this.table(table), history: this.table(historyTable) },
            table,
            { sql: missing('$1'), parameters: [runId] },
            { at: now, operation: mode === 'remove' ? 'remove' : 'delete', runId, audit },
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

  markMissingUnderChoice(
    table: string,
    runId: number,
    options: MissingUnderChoice,
  ): Promise<{ deleted: number; outOfScope: number }> {
    return this.guard(`Marking rows missing from ${table} under the chatbot choice`, async () => {
      assertSafeTableName(table);
      const { selection, proofs, mode, history } = options;
      return this.connection.transaction(async (client) => {
        if (!(await this.connection.tableExistsOn(client, table))) {
          return { deleted: 0, outOfScope: 0 };
        }
        // The stored columns of every table the clauses may read, looked up before building them.
        const columns = new Map<string, ColumnSpec[] | undefined>();
        for (const name of new Set([table, ...(proofs ?? []).flatMap(proofTables)])) {
          assertSafeTableName(name);
          columns.set(
            name,
            (await this.connection.tableExistsOn(client, name))
              ? await this.connection.storedColumns(client, name)
              : undefined,
          );
        }
        const { gone, exits } = missingUnderChoiceSql(
          postgresChoiceSql((name) => this.table(name)),
          table,
          { runId, selection, ...(proofs ? { proofs } : {}) },
          (name) => columns.get(name),
        );
        const now = nowIso();
        const historyTable = historyTableName(table);
        const audit = this.auditStore.enabled;
        const keepHistory =
          (history || audit) && (await this.connection.tableExistsOn(client, historyTable));
        const qualified = { table: this.table(table), history: this.table(historyTable) };
        let deleted = 0;
        for (const proven of gone) {
          if (keepHistory) {
            await closeVersions(client, qualified, table, proven, {
              at: now,
              operation: mode === 'remove' ? 'remove' : 'delete',
              runId,
              audit,
            });
          }
          const at = `$${proven.parameters.length + 1}::timestamptz`;
          const result =
            mode === 'remove'
              ? await client.query(
                  `DELETE FROM ${this.table(table)} ${proven.sql}`,
                  proven.parameters,
                )
              : await client.query(
                  `UPDATE ${this.table(table)} SET "_deleted_at" = ${at} ${proven.sql}`,
                  [...proven.parameters, now],
                );
          deleted += result.rowCount ?? 0;
        }
        if (keepHistory) {
          const present = await this.connection.physicalColumns(client, historyTable);
          const names = (await this.connection.storedColumns(client, table))
            .map((column) => column.name)
            .filter((name) => present.has(name));
          await exitScope(client, qualified, table, names, exits, { at: now, runId, audit });
        }
        const at = `$${exits.parameters.length + 1}::timestamptz`;
        const marked = await client.query(
          `UPDATE ${this.table(table)} SET "_ocs_out_of_scope_since" = ${at} ${exits.sql}`,
          [...exits.parameters, now],
        );
        return { deleted, outOfScope: marked.rowCount ?? 0 };
      });
    });
  }

  recordRunChoice(runId: number, choice: ChatbotChoiceRecord): Promise<void> {
    return this.guard('Recording the chatbot choice', () =>
      this.bookkeeping.recordRunChoice(runId, choice),
    );
  }

  chatbotChoices(): Promise<Map<string, ChatbotChoiceRecord>> {
    return this.guard('Reading the chatbot choices', () => this.bookkeeping.chatbotChoices());
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
      return this.connection.withClient(async (client) => {
        const type = await this.connection.columnType(client, table, column);
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
      this.auditStore.refuseRewrite(`Rewriting ${table}.${column}`);
      if (values.length === 0) return;
      await this.connection.transaction(async (client) => {
        const type = await this.connection.columnType(client, table, column);
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

  // ---------------------------------------------------------------- analysts' reads and indexes

  ensureIndexes(indexes: readonly IndexSpec[]): Promise<number> {
    return this.guard('Creating indexes', async () => {
      let created = 0;
      // One at a time outside a long transaction: building an index on a big table takes a while.
      await this.connection.withoutTimeout(async (client) => {
        for (const { table, column } of indexes) {
          assertSafeTableName(table);
          assertSafeColumnName(column, table);
          if (!(await this.connection.physicalColumns(client, table)).has(column)) continue;
          const exists = await client.query(
            `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2`,
            [this.schema, columnIndexName(table, column)],
          );
          if ((exists.rowCount ?? 0) > 0) continue;
          await client.query(createIndexSql((name) => this.table(name), table, column));
          created += 1;
        }
      });
      return created;
    });
  }

  checkReference(table: string, column: string, target: string): Promise<ReferenceCheck> {
    return this.guard(`Checking ${table}.${column} against ${target}`, async () => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      assertSafeTableName(target);
      const result = await this.connection.withoutTimeout((client) =>
        client.query<{ values: string; unmatched: string }>(
          referenceCheckSql((name) => this.table(name), table, column, target),
        ),
      );
      const row = result.rows[0];
      return { values: Number(row?.values ?? 0), unmatched: Number(row?.unmatched ?? 0) };
    });
  }

  readRows(query: RowBatchQuery): Promise<StoredRow[]> {
    const { table, afterId, limit, live } = query;
    return this.guard(`Reading rows of ${table}`, async () => {
      const conditions: string[] = [];
      const parameters: unknown[] = [];
      if (afterId !== null) {
        parameters.push(parseIdText(afterId, table).toString());
        conditions.push(`"id" > $${parameters.length}::bigint`);
      }
      if (live) conditions.push('"_deleted_at" IS NULL');
      parameters.push(limit);
      const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
      return this.selectRows(
        query,
        `${where} ORDER BY "id" LIMIT $${parameters.length}`,
        parameters,
      );
    });
  }

  readRowsById(
    table: string,
    columns: readonly ColumnSpec[],
    ids: readonly string[],
  ): Promise<StoredRow[]> {
    return this.guard(`Reading rows of ${table}`, () =>
      this.selectRows({ table, columns }, 'WHERE "id" = ANY($1::bigint[])', [
        ids.map((id) => parseIdText(id, table).toString()),
      ]),
    );
  }

  /** Rows of a table, `id`, the columns and our own, decoded. */
  private async selectRows(
    query: Pick<RowBatchQuery, 'table' | 'columns' | 'jsonAsText'>,
    rest: string,
    parameters: unknown[],
  ): Promise<StoredRow[]> {
    const { table, columns, jsonAsText } = query;
    assertSafeTableName(table);
    for (const column of columns) assertSafeColumnName(column.name, table);
    // Aliased by position: a column may be named like one of ours.
    const read = [...columns, ...OWN_COLUMNS];
    const selected = [
      '"id"::text AS id_text',
      ...read.map((column, index) => `${readExpression(column.name, column.type)} AS c${index}`),
    ];
    const result = await this.connection.pool.query<Record<string, unknown>>(
      `SELECT ${selected.join(', ')} FROM ${this.table(table)} ${rest}`,
      parameters,
    );
    return result.rows.map((stored) => {
      const row: StoredRow = { id: narrowInteger(BigInt(stored.id_text as string)) };
      read.forEach((column, index) => {
        const value = stored[`c${index}`];
        row[column.name] =
          jsonAsText && column.type === 'json' ? value : decodeValue(column.type, value);
      });
      return row;
    });
  }

  // ---------------------------------------------------------------- lock

  async acquireLock(waitMs: number, signal?: AbortSignal): Promise<Lock> {
    return closeRunsOfDeadHolders(
      await this.lock.acquire(waitMs, signal),
      (note, endOf) =>
        this.guard('Closing the runs of a process that ended', () =>
          this.bookkeeping.closeRunsLeftRunning(note, endOf),
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
      'postgres',
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
