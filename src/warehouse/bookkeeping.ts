/**
 * The warehouse's own bookkeeping (runs, cursors, outcomes, state, logical columns, schema-change
 * log, status), written once with kysely so SQLite and PostgreSQL share it. Dialects pass their
 * Kysely instance; reading (status, runs) is in reader.ts.
 */
import {
  CompiledQuery,
  sql,
  type ColumnType as KyselyColumnType,
  type Compilable,
  type Generated,
  type Kysely,
} from 'kysely';
import type {
  BookkeepingStore,
  ChatbotChoiceRecord,
  ColumnSpec,
  ColumnType,
  CursorKind,
  ResourceOutcome,
  ResourceState,
  RunKind,
  RunStatus,
  RunSummary,
  SavedCursor,
  SchemaChange,
} from '../interfaces.js';
import { WarehouseError } from '../errors.js';
import { storedText } from '../printable.js';
import { nowSortableUtc } from '../timestamps.js';
import { SYNC_RUN_KINDS, toChoiceRecord, toIsoText, toResourceState } from './reader.js';
import { appendRecordEntries, type AuditedRecordTable } from './audit-chain.js';
import type { DialectRules, SqlRun } from './dialect-rules.js';

export { toIsoText };

/** Written as ISO text; PostgreSQL (timestamptz) reads back a Date, SQLite the text. */
type Timestamp = KyselyColumnType<string | Date, string, string>;
/** PostgreSQL returns bigint columns as strings. */
type BigCount = KyselyColumnType<number | string, number, number>;

export interface BookkeepingTables {
  _ocs_migrations: { version: number; name: string; applied_at: Timestamp };
  _ocs_runs: {
    id: Generated<number | string>;
    kind: RunKind;
    status: RunStatus;
    started_at: Timestamp;
    finished_at: Timestamp | null;
    schema_checksum: string | null;
    rows: BigCount;
    pages: BigCount;
    requests: BigCount;
    error: string | null;
    selection_key: string | null;
  };
  _ocs_chatbot_choices: {
    selection_key: string;
    chatbots: string;
    first_seen_at: Timestamp;
    last_seen_at: Timestamp;
  };
  _ocs_resources: {
    resource: string;
    cursor: string | null;
    cursor_kind: CursorKind | null;
    cursor_selection: string | null;
    excluded_at: Timestamp | null;
    last_run_id: BigCount | null;
    last_success_at: Timestamp | null;
    last_error: string | null;
    last_error_at: Timestamp | null;
    last_full_refresh_at: Timestamp | null;
  };
  _ocs_resource_runs: {
    id: Generated<number | string>;
    run_id: BigCount;
    resource: string;
    status: string;
    rows: BigCount;
    pages: BigCount;
    duration_ms: BigCount;
    error: string | null;
    recorded_at: Timestamp;
  };
  _ocs_columns: {
    table_name: string;
    column_name: string;
    column_type: ColumnType;
    position: number;
    added_at: Timestamp;
  };
  _ocs_schema_changes: {
    id: Generated<number | string>;
    changed_at: Timestamp;
    from_checksum: string | null;
    to_checksum: string | null;
    table_name: string;
    column_name: string | null;
    change: SchemaChange['kind'] | 'drop_table';
    from_type: ColumnType | null;
    to_type: ColumnType | null;
    reason: SchemaChange['reason'] | 'reset';
  };
  _ocs_state: { key: string; value: string; updated_at: Timestamp };
  _ocs_lock: {
    name: string;
    pid: number;
    host: string;
    since: Timestamp;
    heartbeat_at: Timestamp;
    owner_token: string;
  };
}

/** Now as ISO text in the fixed-width form SQLite date-time columns hold (src/timestamps.ts). */
export function nowIso(): string {
  return nowSortableUtc();
}

/** SqlRun (dialect-rules.ts) on a kysely connection or transaction: `?` placeholders. */
export function kyselyRun(db: Kysely<never>, rules: DialectRules): SqlRun {
  return async (text, parameters) => {
    const query = rules.placeholders(text);
    const result = await db.executeQuery(CompiledQuery.raw(query, [...parameters]));
    return result.rows as Array<Record<string, unknown>>;
  };
}

/** A record the chain gets an entry for (audit-chain.ts). */
interface ChainedRecord {
  table: AuditedRecordTable;
  key: string | number;
  operation: 'insert' | 'update';
  runId: number | null;
}

export class Bookkeeping {
  /** Set once the warehouse keeps an audit chain: every record written is chained. */
  private chainRules?: DialectRules;
  /** The last run started here (one at a time), whose kind each resource's outcome asks. */
  private lastStarted?: { runId: number; kind: RunKind };

  constructor(private readonly db: Kysely<BookkeepingTables>) {}

  /** From now on every run record, outcome and reset is chained in its own transaction. */
  chainRecords(rules: DialectRules): void {
    this.chainRules = rules;
  }

  /**
   * Runs `work` in a transaction whose records are chained before it commits; without a chain,
   * as it is (in a transaction still when it writes more than one statement: `atomic`).
   */
  private async chained<T>(
    work: (db: Kysely<BookkeepingTables>) => Promise<{ result: T; records: ChainedRecord[] }>,
    atomic = false,
  ): Promise<T> {
    const rules = this.chainRules;
    if (rules === undefined && !atomic) return (await work(this.db)).result;
    return this.db.transaction().execute(async (trx) => {
      const { result, records } = await work(trx);
      if (rules === undefined) return result;
      await appendRecordEntries(
        kyselyRun(trx as unknown as Kysely<never>, rules),
        rules,
        records,
        nowIso(),
      );
      return result;
    });
  }

  async startRun(kind: RunKind, schemaChecksum: string | null): Promise<number> {
    const runId = await this.chained(async (db) => {
      const row = await db
        .insertInto('_ocs_runs')
        .values({
          kind,
          status: 'running',
          started_at: nowIso(),
          schema_checksum: schemaChecksum,
          rows: 0,
          pages: 0,
          requests: 0,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const runId = Number(row.id);
      return {
        result: runId,
        records: [{ table: '_ocs_runs', key: runId, operation: 'insert', runId }],
      };
    });
    // Asked again at each resource's outcome (runKind): a run's kind never changes. One only: a
    // daemon keeps its warehouse, and so this, for months of runs.
    this.lastStarted = { runId, kind };
    return runId;
  }

  finishRun(runId: number, summary: RunSummary): Promise<void> {
    return this.chained(async (db) => {
      const result = await db
        .updateTable('_ocs_runs')
        .set({
          status: summary.status,
          finished_at: nowIso(),
          rows: summary.rows,
          pages: summary.pages,
          requests: summary.requests,
          error: summary.error === undefined ? null : storedText(summary.error),
        })
        .where('id', '=', runId)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) {
        throw new WarehouseError(`Run ${runId} is not recorded in _ocs_runs; cannot finish it.`);
      }
      return {
        result: undefined,
        records: [{ table: '_ocs_runs', key: runId, operation: 'update', runId }],
      };
    });
  }

  /**
   * Closes as `interrupted` the runs still `running`: called by a process that has just taken the
   * writer lock, so their processes ended without recording their end (kill -9, out of memory,
   * power loss). `endOf` says when each ended, from its start. Returns their ids.
   */
  closeRunsLeftRunning(note: string, endOf: (startedAt: string) => string): Promise<number[]> {
    return this.chained(async (db) => {
      const left = await db
        .selectFrom('_ocs_runs')
        .select(['id', 'started_at'])
        .where('status', '=', 'running')
        .orderBy('id')
        .execute();
      const ids: number[] = [];
      for (const run of left) {
        const id = Number(run.id);
        const endedAt = endOf(toIsoText(run.started_at) ?? '');
        await db
          .updateTable('_ocs_runs')
          .set({
            status: 'interrupted',
            finished_at: endedAt,
            error: storedText(note),
          })
          .where('id', '=', id)
          .where('status', '=', 'running')
          .execute();
        ids.push(id);
      }
      return {
        result: ids,
        records: ids.map((id) => ({
          table: '_ocs_runs' as const,
          key: id,
          operation: 'update' as const,
          runId: id,
        })),
      };
    }, true);
  }

  async hasLoaded(): Promise<boolean> {
    const row = await this.db
      .selectFrom('_ocs_runs')
      .select('id')
      .where('status', 'in', ['ok', 'partial'])
      .where('kind', 'in', SYNC_RUN_KINDS)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  async runKind(runId: number): Promise<RunKind | undefined> {
    if (this.lastStarted?.runId === runId) return this.lastStarted.kind;
    const row = await this.db
      .selectFrom('_ocs_runs')
      .select('kind')
      .where('id', '=', runId)
      .executeTakeFirst();
    return row?.kind;
  }

  async getState(key: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('_ocs_state')
      .select('value')
      .where('key', '=', key)
      .executeTakeFirst();
    return row?.value;
  }

  async setState(key: string, value: string): Promise<void> {
    const updatedAt = nowIso();
    await this.db
      .insertInto('_ocs_state')
      .values({ key, value, updated_at: updatedAt })
      .onConflict((conflict) =>
        conflict.column('key').doUpdateSet({ value, updated_at: updatedAt }),
      )
      .execute();
  }

  async getResourceState(resource: string): Promise<ResourceState | undefined> {
    const row = await this.db
      .selectFrom('_ocs_resources')
      .selectAll()
      .where('resource', '=', resource)
      .executeTakeFirst();
    return row ? toResourceState(row) : undefined;
  }

  async recordResourceOutcome(outcome: ResourceOutcome): Promise<void> {
    const kind = await this.runKind(outcome.runId);
    if (kind === undefined) {
      throw new WarehouseError(
        `Run ${outcome.runId} is not recorded in _ocs_runs; cannot record ${outcome.resource}.`,
      );
    }
    const now = nowIso();
    const ok = outcome.status === 'ok';
    const excluded = outcome.status === 'excluded';
    const error = ok ? null : storedText(outcome.error ?? outcome.status);
    // An excluded resource is neither a success nor an error: the choice leaves it out.
    const changes = ok
      ? {
          last_success_at: now,
          last_error: null,
          excluded_at: null,
          ...(kind === 'full_refresh' ? { last_full_refresh_at: now } : {}),
        }
      : excluded
        ? { last_error: null, excluded_at: now }
        : { last_error: error, last_error_at: now, excluded_at: null };
    const write = async (db: Kysely<BookkeepingTables>) => {
      const row = await db
        .insertInto('_ocs_resource_runs')
        .values({
          run_id: outcome.runId,
          resource: outcome.resource,
          status: outcome.status,
          rows: outcome.rows,
          pages: outcome.pages,
          duration_ms: Math.round(outcome.durationMs),
          error,
          recorded_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await db
        .insertInto('_ocs_resources')
        .values({ resource: outcome.resource, ...changes })
        .onConflict((conflict) => conflict.column('resource').doUpdateSet(changes))
        .execute();
      const record: ChainedRecord = {
        table: '_ocs_resource_runs',
        key: String(row.id),
        operation: 'insert',
        runId: outcome.runId,
      };
      return { result: undefined, records: [record] };
    };
    return this.chained(write, true);
  }

  /**
   * Records the choice (what its key stands for) and that the run walks under it: the run record
   * changes, so with a chain it is chained again.
   */
  async recordRunChoice(runId: number, choice: ChatbotChoiceRecord): Promise<void> {
    const now = nowIso();
    const chatbots = JSON.stringify(
      choice.chatbots.map((chatbot) => ({ public_id: chatbot.publicId, name: chatbot.name })),
    );
    const write = async (trx: Kysely<BookkeepingTables>) => {
      await trx
        .insertInto('_ocs_chatbot_choices')
        .values({
          selection_key: choice.key,
          chatbots,
          first_seen_at: now,
          last_seen_at: now,
        })
        .onConflict((conflict) =>
          conflict.column('selection_key').doUpdateSet({ chatbots, last_seen_at: now }),
        )
        .execute();
      await trx
        .updateTable('_ocs_runs')
        .set({ selection_key: choice.key })
        .where('id', '=', runId)
        .execute();
      const record: ChainedRecord = { table: '_ocs_runs', key: runId, operation: 'update', runId };
      return { result: undefined, records: [record] };
    };
    return this.chained(write, true);
  }

  async chatbotChoices(): Promise<Map<string, ChatbotChoiceRecord>> {
    const rows = await this.db
      .selectFrom('_ocs_chatbot_choices')
      .select(['selection_key', 'chatbots'])
      .execute();
    return new Map(rows.map((row) => [row.selection_key, toChoiceRecord(row)]));
  }

  /** As a page saves its cursor (sqlite/page-writes.ts, postgres/page-sink.ts), without rows. */
  async saveCursor(saved: SavedCursor): Promise<void> {
    const values = {
      cursor: saved.cursor,
      cursor_kind: saved.cursorKind,
      cursor_selection: saved.selection ?? null,
      last_run_id: saved.runId,
    };
    await this.db
      .insertInto('_ocs_resources')
      .values({ resource: saved.resource, ...values })
      .onConflict((conflict) => conflict.column('resource').doUpdateSet(values))
      .execute();
  }

  async resetCursor(resource: string): Promise<void> {
    await this.db
      .updateTable('_ocs_resources')
      .set({ cursor: null, cursor_kind: null, cursor_selection: null })
      .where('resource', '=', resource)
      .execute();
  }

  /**
   * Records `ocs-sync reset` as a finished run of kind `reset`, one row per resource. Resource
   * states are left alone (their cursors were cleared apart): a reset is not a success.
   */
  async recordReset(resources: readonly string[], note: string): Promise<number> {
    const now = nowIso();
    const write = async (trx: Kysely<BookkeepingTables>) => {
      const run = await trx
        .insertInto('_ocs_runs')
        .values({
          kind: 'reset',
          status: 'ok',
          started_at: now,
          finished_at: now,
          schema_checksum: null,
          rows: 0,
          pages: 0,
          requests: 0,
          error: null,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const runId = Number(run.id);
      const records: ChainedRecord[] = [
        { table: '_ocs_runs', key: runId, operation: 'insert', runId },
      ];
      if (resources.length > 0) {
        const outcomes = await trx
          .insertInto('_ocs_resource_runs')
          .values(
            resources.map((resource) => ({
              run_id: runId,
              resource,
              status: 'ok',
              rows: 0,
              pages: 0,
              duration_ms: 0,
              error: note,
              recorded_at: now,
            })),
          )
          .returning('id')
          .execute();
        for (const outcome of outcomes) {
          records.push({
            table: '_ocs_resource_runs',
            key: String(outcome.id),
            operation: 'insert',
            runId,
          });
        }
      }
      return { result: runId, records };
    };
    return this.chained(write, true);
  }

  /** After `DROP TABLE`: forget its columns and log the drop (run inside the dialect's transaction). */
  forgetTableQueries(table: string, now: string): Compilable[] {
    return [
      this.db.deleteFrom('_ocs_columns').where('table_name', '=', table),
      this.db.insertInto('_ocs_schema_changes').values({
        changed_at: now,
        from_checksum: null,
        to_checksum: null,
        table_name: table,
        column_name: null,
        change: 'drop_table',
        from_type: null,
        to_type: null,
        reason: 'reset',
      }),
    ];
  }

  /** The logical columns recorded for a table, in order (empty when none are recorded). */
  async columns(table: string): Promise<ColumnSpec[]> {
    const rows = await this.columnsQuery(table).execute();
    return rows.map((row) => ({ name: row.column_name, type: row.column_type }));
  }

  // The builders below return queries without running them, so a dialect can run them inside its
  // own transaction (SQLite compiles them and runs them synchronously with the DDL).

  columnsQuery(table: string) {
    return this.db
      .selectFrom('_ocs_columns')
      .select(['column_name', 'column_type'])
      .where('table_name', '=', table)
      .orderBy('position');
  }

  nextPositionQuery(table: string) {
    return this.db
      .selectFrom('_ocs_columns')
      .select(sql<number | string | null>`max(position)`.as('position'))
      .where('table_name', '=', table);
  }

  insertColumnsQuery(
    table: string,
    columns: readonly ColumnSpec[],
    firstPosition: number,
    now: string,
  ): Compilable {
    return this.db.insertInto('_ocs_columns').values(
      columns.map((column, index) => ({
        table_name: table,
        column_name: column.name,
        column_type: column.type,
        position: firstPosition + index,
        added_at: now,
      })),
    );
  }

  setColumnTypeQuery(table: string, column: string, type: ColumnType): Compilable {
    return this.db
      .updateTable('_ocs_columns')
      .set({ column_type: type })
      .where('table_name', '=', table)
      .where('column_name', '=', column);
  }

  dropColumnQuery(table: string, column: string): Compilable {
    return this.db
      .deleteFrom('_ocs_columns')
      .where('table_name', '=', table)
      .where('column_name', '=', column);
  }

  recordSchemaChangeQuery(
    change: SchemaChange,
    checksums: { from: string | null; to: string | null },
    now: string,
  ): Compilable {
    return this.db.insertInto('_ocs_schema_changes').values({
      changed_at: now,
      from_checksum: checksums.from,
      to_checksum: checksums.to,
      table_name: change.table,
      column_name: change.column ?? null,
      change: change.kind,
      from_type: change.fromType ?? null,
      to_type: change.toType ?? null,
      reason: change.reason,
    });
  }
}

/**
 * Runs one call alone on the warehouse, naming it in any error: SQLite's waits for the pages
 * handed over to commit, PostgreSQL's names the connection.
 */
export type Exclusive = <T>(work: () => Promise<T>, what: string) => Promise<T>;

/** Warehouse.bookkeeping: the shared bookkeeping, each call run through the dialect's `exclusive`. */
export function bookkeepingStore(bookkeeping: Bookkeeping, exclusive: Exclusive): BookkeepingStore {
  return {
    startRun: (kind, schemaChecksum) =>
      exclusive(() => bookkeeping.startRun(kind, schemaChecksum), 'Recording the start of a run'),
    finishRun: (runId, summary) =>
      exclusive(() => bookkeeping.finishRun(runId, summary), `Recording the end of run ${runId}`),
    hasLoaded: () => exclusive(() => bookkeeping.hasLoaded(), 'Reading the runs'),
    getState: (key) => exclusive(() => bookkeeping.getState(key), 'Reading bookkeeping state'),
    setState: (key, value) =>
      exclusive(() => bookkeeping.setState(key, value), 'Saving bookkeeping state'),
    getResourceState: (resource) =>
      exclusive(() => bookkeeping.getResourceState(resource), `Reading the state of ${resource}`),
    recordResourceOutcome: (outcome) =>
      exclusive(
        () => bookkeeping.recordResourceOutcome(outcome),
        `Recording the outcome of ${outcome.resource}`,
      ),
    resetCursor: (resource) =>
      exclusive(() => bookkeeping.resetCursor(resource), `Resetting the cursor of ${resource}`),
    recordReset: (resources, note) =>
      exclusive(() => bookkeeping.recordReset(resources, note), 'Recording a reset'),
    recordRunChoice: (runId, choice) =>
      exclusive(() => bookkeeping.recordRunChoice(runId, choice), 'Recording the chatbot choice'),
    chatbotChoices: () =>
      exclusive(() => bookkeeping.chatbotChoices(), 'Reading the chatbot choices'),
  };
}
