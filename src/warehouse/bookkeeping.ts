/**
 * The warehouse's own bookkeeping (runs, cursors, outcomes, state, logical columns, schema-change
 * log, status), written once with kysely so SQLite and PostgreSQL share it. Dialects pass their
 * Kysely instance; the few per-dialect facts come in through TableInspector.
 */
import {
  sql,
  type ColumnType as KyselyColumnType,
  type Compilable,
  type Generated,
  type Kysely,
} from 'kysely';
import type {
  ColumnSpec,
  ColumnType,
  CursorKind,
  ResourceOutcome,
  ResourceState,
  ResourceStatus,
  RunKind,
  RunStatus,
  RunSummary,
  SchemaChange,
} from '../interfaces.js';
import { WarehouseError } from '../errors.js';
import { nowSortableUtc } from './timestamps.js';

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
  };
  _ocs_resources: {
    resource: string;
    cursor: string | null;
    cursor_kind: CursorKind | null;
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
    change: SchemaChange['kind'];
    from_type: ColumnType | null;
    to_type: ColumnType | null;
    reason: SchemaChange['reason'];
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

/** What status() needs to know about a table that only the dialect can answer. */
export interface TableInspector {
  tableExists(table: string): Promise<boolean>;
  /** Newest `updated_at` of the table as ISO text, or null when it has none. */
  newestUpdatedAt(table: string): Promise<string | null>;
}

/** Now as ISO text in the fixed-width form SQLite date-time columns hold (timestamps.ts). */
export function nowIso(): string {
  return nowSortableUtc();
}

/** Normalises a stored time (SQLite text, PostgreSQL Date) to ISO text. */
export function toIsoText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  return String(value);
}

function toCount(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

function toOptionalNumber(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}

export class Bookkeeping {
  constructor(private readonly db: Kysely<BookkeepingTables>) {}

  async startRun(kind: RunKind, schemaChecksum: string | null): Promise<number> {
    const row = await this.db
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
    return Number(row.id);
  }

  async finishRun(runId: number, summary: RunSummary): Promise<void> {
    const result = await this.db
      .updateTable('_ocs_runs')
      .set({
        status: summary.status,
        finished_at: nowIso(),
        rows: summary.rows,
        pages: summary.pages,
        requests: summary.requests,
        error: summary.error ?? null,
      })
      .where('id', '=', runId)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) {
      throw new WarehouseError(`Run ${runId} is not recorded in _ocs_runs; cannot finish it.`);
    }
  }

  async runKind(runId: number): Promise<RunKind | undefined> {
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
    const error = ok ? null : (outcome.error ?? outcome.status);
    const changes = ok
      ? {
          last_success_at: now,
          last_error: null,
          ...(kind === 'full_refresh' ? { last_full_refresh_at: now } : {}),
        }
      : { last_error: error, last_error_at: now };
    await this.db.transaction().execute(async (trx) => {
      await trx
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
        .execute();
      await trx
        .insertInto('_ocs_resources')
        .values({ resource: outcome.resource, ...changes })
        .onConflict((conflict) => conflict.column('resource').doUpdateSet(changes))
        .execute();
    });
  }

  async resetCursor(resource: string): Promise<void> {
    await this.db
      .updateTable('_ocs_resources')
      .set({ cursor: null, cursor_kind: null })
      .where('resource', '=', resource)
      .execute();
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

  /** Every resource with a state row or a table, with its row counts. */
  async status(inspector: TableInspector): Promise<ResourceStatus[]> {
    const states = new Map(
      (await this.db.selectFrom('_ocs_resources').selectAll().execute()).map((row) => [
        row.resource,
        toResourceState(row),
      ]),
    );
    const tables = await this.db
      .selectFrom('_ocs_columns')
      .select('table_name')
      .distinct()
      .execute();
    // History tables are in neither list: they are not resources.
    const names = [...new Set([...states.keys(), ...tables.map((row) => row.table_name)])].sort();
    const result: ResourceStatus[] = [];
    for (const name of names) {
      const state = states.get(name) ?? emptyResourceState(name);
      let rows = 0;
      let rowsDeleted = 0;
      let newestUpdatedAt: string | null = null;
      if (await inspector.tableExists(name)) {
        const deleted = sql.ref('_deleted_at');
        const counts = await sql<{ live: unknown; deleted: unknown }>`
          select count(*) - count(${deleted}) as live, count(${deleted}) as deleted from ${sql.table(name)}`.execute(
          this.db,
        );
        rows = toCount(counts.rows[0]?.live);
        rowsDeleted = toCount(counts.rows[0]?.deleted);
        const columns = await this.columns(name);
        if (columns.some((column) => column.name === 'updated_at')) {
          newestUpdatedAt = await inspector.newestUpdatedAt(name);
        }
      }
      result.push({ ...state, rows, rowsDeleted, newestUpdatedAt });
    }
    return result;
  }
}

function emptyResourceState(resource: string): ResourceState {
  return {
    resource,
    cursor: null,
    cursorKind: null,
    lastRunId: null,
    lastSuccessAt: null,
    lastError: null,
    lastErrorAt: null,
    lastFullRefreshAt: null,
  };
}

function toResourceState(row: {
  resource: string;
  cursor: string | null;
  cursor_kind: CursorKind | null;
  last_run_id: unknown;
  last_success_at: unknown;
  last_error: string | null;
  last_error_at: unknown;
  last_full_refresh_at: unknown;
}): ResourceState {
  return {
    resource: row.resource,
    cursor: row.cursor,
    cursorKind: row.cursor_kind,
    lastRunId: toOptionalNumber(row.last_run_id),
    lastSuccessAt: toIsoText(row.last_success_at),
    lastError: row.last_error,
    lastErrorAt: toIsoText(row.last_error_at),
    lastFullRefreshAt: toIsoText(row.last_full_refresh_at),
  };
}
