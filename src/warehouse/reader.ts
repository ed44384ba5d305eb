/**
 * Reading the warehouse's bookkeeping without writing anything: run history, per-resource status,
 * state, the lock's holder. Written once over a narrow query interface (plain SQL with `?`
 * placeholders) so both dialects share it, and so read-only commands (`status`, `runs`, `check`)
 * start without the query builder and the writer's machinery.
 */
import type {
  ChatbotChoiceRecord,
  ColumnType,
  FileTotals,
  SignedCheckpoint,
  VerificationRecord,
  LockHolder,
  ResourceState,
  ResourceStatus,
  RunKind,
  RunStatus,
} from '../interfaces.js';

import { toCheckpoint } from './audit-chain.js';
import { AUDIT_STATE_KEY, AUDIT_VERIFICATION_STATE_KEY } from './state-keys.js';

/** Whether a warehouse keeps an audit chain, and what `status` says of it. */
export interface AuditSummary {
  enabled: boolean;
  /** When the chain was turned on. */
  since: string | null;
  /** Entries in the chain (the head's sequence number). */
  entries: number;
  lastCheckpoint: SignedCheckpoint | null;
  lastVerification: VerificationRecord | null;
}

/** Plain SQL in, rows out; `?` marks a parameter. Each dialect provides one. */
export interface SqlRows {
  all(sql: string, parameters?: readonly unknown[]): Promise<Array<Record<string, unknown>>>;
}

/** What only the dialect can answer about a resource table. */
export interface TableFacts {
  /** The tables that exist (one query, however many resources). */
  existingTables(): Promise<Set<string>>;
  /**
   * An expression of the table's counting `SELECT … FROM table` giving its newest `updated_at`,
   * stored as `columnType` (the type `_ocs_columns` records): an aggregate where it can be, so
   * the one read of the table that counts its rows finds it too. Undefined when the dialect
   * cannot read that type as a time.
   */
  newestUpdatedAtSql(table: string, columnType: ColumnType): string | undefined;
  /** What that expression gave, as ISO text (null when the table has none). */
  updatedAtText(value: unknown): string | null;
}

export interface RunRecord {
  id: number;
  kind: RunKind;
  status: RunStatus;
  startedAt: string;
  finishedAt: string | null;
  durationMs: number | null;
  schemaChecksum: string | null;
  rows: number;
  pages: number;
  requests: number;
  error: string | null;
  /** The chatbot choice the run walked under (null: a server without choices, or before). */
  selectionKey: string | null;
  /** What that key stood for, when recorded. */
  choice: ChatbotChoiceRecord | null;
}

export interface ResourceRunRecord {
  resource: string;
  status: string;
  rows: number;
  pages: number;
  durationMs: number;
  error: string | null;
  recordedAt: string;
}

export interface LockRecord extends LockHolder {
  heartbeatAt: string;
}

/** What `status` and `runs` say of a run whose process died before the next start closed it. */
export const DEAD_RUN_NOTE =
  'Its process ended without recording its end: the next start closes it as interrupted (no ' +
  'ocs-sync holds the writer lock; it was killed, ran out of memory, or the machine stopped). ' +
  'Every page it committed is kept.';

/** Run kinds that move data (a `reset` run only forgets cursors). */
export const SYNC_RUN_KINDS: readonly RunKind[] = ['initial', 'incremental', 'full_refresh'];

export function toIsoText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  return String(value);
}

function toCount(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

function toRun(row: Record<string, unknown>): RunRecord {
  const startedAt = toIsoText(row.started_at) ?? '';
  const finishedAt = toIsoText(row.finished_at);
  const duration = finishedAt === null ? NaN : Date.parse(finishedAt) - Date.parse(startedAt);
  return {
    id: Number(row.id),
    kind: row.kind as RunKind,
    status: row.status as RunStatus,
    startedAt,
    finishedAt,
    durationMs: Number.isFinite(duration) ? duration : null,
    schemaChecksum: (row.schema_checksum as string | null) ?? null,
    rows: toCount(row.rows),
    pages: toCount(row.pages),
    requests: toCount(row.requests),
    error: (row.error as string | null) ?? null,
    selectionKey: (row.selection_key as string | null | undefined) ?? null,
    choice: null,
  };
}

export function toResourceState(row: Record<string, unknown>): ResourceState {
  return {
    resource: String(row.resource),
    cursor: (row.cursor as string | null) ?? null,
    cursorKind: (row.cursor_kind as ResourceState['cursorKind']) ?? null,
    cursorSelection: (row.cursor_selection as string | null | undefined) ?? null,
    lastRunId:
      row.last_run_id === null || row.last_run_id === undefined ? null : Number(row.last_run_id),
    lastSuccessAt: toIsoText(row.last_success_at),
    lastError: (row.last_error as string | null) ?? null,
    lastErrorAt: toIsoText(row.last_error_at),
    lastFullRefreshAt: toIsoText(row.last_full_refresh_at),
    excludedAt: toIsoText(row.excluded_at),
  };
}

/** A `_ocs_chatbot_choices` row: its chatbots are JSON `[{"public_id", "name"}]`. */
export function toChoiceRecord(row: Record<string, unknown>): ChatbotChoiceRecord {
  let listed: unknown;
  try {
    listed = JSON.parse(String(row.chatbots));
  } catch {
    listed = [];
  }
  const chatbots = Array.isArray(listed)
    ? listed.map((item: { public_id?: unknown; name?: unknown }) => ({
        publicId: String(item?.public_id ?? ''),
        name: String(item?.name ?? ''),
      }))
    : [];
  return { key: String(row.selection_key), chatbots };
}

function emptyResourceState(resource: string): ResourceState {
  return toResourceState({ resource });
}

const RUN_COLUMNS =
  'id, kind, status, started_at, finished_at, schema_checksum, "rows", pages, requests, error';

/** Migration 008 (the chatbot choice's columns); a warehouse not yet migrated is read without. */
async function hasChoiceColumns(rows: SqlRows): Promise<boolean> {
  const found = await rows.all('SELECT 1 AS applied FROM _ocs_migrations WHERE version = 8');
  return found.length > 0;
}

/** Tables counted in one statement (SQLite allows 500 parts in a compound SELECT). */
const TABLES_PER_COUNT_QUERY = 100;

/** Every resource with a state row or a table, with its row counts (history tables excluded). */
export async function readResourceStatuses(
  rows: SqlRows,
  facts: TableFacts,
): Promise<ResourceStatus[]> {
  const outOfScope = (await hasChoiceColumns(rows))
    ? ', count(CASE WHEN "_deleted_at" IS NULL AND "_ocs_out_of_scope_since" IS NOT NULL THEN 1 END) AS out_of_scope'
    : '';
  const states = new Map(
    (await rows.all('SELECT * FROM _ocs_resources')).map((row) => [
      String(row.resource),
      toResourceState(row),
    ]),
  );
  const tables = await rows.all('SELECT DISTINCT table_name FROM _ocs_columns');
  const names = [
    ...new Set([...states.keys(), ...tables.map((row) => String(row.table_name))]),
  ].sort();
  const existing = await facts.existingTables();
  const updatedAtTypes = new Map(
    (
      await rows.all(
        "SELECT table_name, column_type FROM _ocs_columns WHERE column_name = 'updated_at'",
      )
    ).map((row) => [String(row.table_name), row.column_type as ColumnType]),
  );
  // Every table's counts in a few statements, not three queries a table: on PostgreSQL each
  // query is a round trip, and the daemon reads these after every run.
  const counted = names.filter((name) => existing.has(name));
  const counts = new Map<string, Record<string, unknown>>();
  for (let start = 0; start < counted.length; start += TABLES_PER_COUNT_QUERY) {
    const parts = counted.slice(start, start + TABLES_PER_COUNT_QUERY).map((name) => {
      const type = updatedAtTypes.get(name);
      const newest = type === undefined ? undefined : facts.newestUpdatedAtSql(name, type);
      // Resource names are checked identifiers (^[a-z][a-z0-9_]*$), safe to quote.
      return (
        `SELECT '${name}' AS resource, count(*) - count("_deleted_at") AS live, ` +
        `count("_deleted_at") AS deleted${outOfScope}, ${newest ?? 'NULL'} AS newest FROM "${name}"`
      );
    });
    for (const row of await rows.all(parts.join(' UNION ALL '))) {
      counts.set(String(row.resource), row);
    }
  }
  const result: ResourceStatus[] = [];
  for (const name of names) {
    const state = states.get(name) ?? emptyResourceState(name);
    const row = counts.get(name);
    result.push({
      ...state,
      rows: toCount(row?.live),
      rowsDeleted: toCount(row?.deleted),
      rowsOutOfScope: toCount(row?.out_of_scope),
      newestUpdatedAt: row === undefined ? null : facts.updatedAtText(row.newest),
    });
  }
  return result;
}

/** Read-only access to a warehouse's bookkeeping. */
export class WarehouseReader {
  /**
   * `lockHeld`: whether a process holds the writer lock now, asked of the lock itself (the
   * SQLite side file, PostgreSQL's advisory lock), not of the record; undefined when unknown.
   */
  constructor(
    readonly description: string,
    private readonly rows: SqlRows,
    private readonly facts: TableFacts,
    private readonly onClose: () => Promise<void>,
    private readonly lockHeld: () => Promise<boolean | undefined> = async () => undefined,
  ) {}

  /** Whether some process holds the writer lock right now (undefined: cannot tell). */
  writerLockHeld(): Promise<boolean | undefined> {
    return this.lockHeld();
  }

  /**
   * File contents by status, and the distinct blobs' bytes (identical contents are stored once);
   * zeros for a warehouse from before the files table.
   */
  async fileTotals(): Promise<FileTotals> {
    if (!(await this.facts.existingTables()).has('_ocs_files')) {
      return { ok: 0, missing: 0, failed: 0, blobs: 0, bytes: 0 };
    }
    const byStatus = await this.rows.all(
      'SELECT status, count(*) AS count FROM _ocs_files GROUP BY status',
    );
    const count = (status: string) =>
      Number(byStatus.find((row) => row.status === status)?.count ?? 0);
    const [blobs] = await this.rows.all(
      `SELECT count(*) AS blobs, coalesce(sum(size), 0) AS bytes FROM (
         SELECT sha256, max(size) AS size FROM _ocs_files WHERE status = 'ok' GROUP BY sha256
       ) AS distinct_blobs`,
    );
    return {
      ok: count('ok'),
      missing: count('missing'),
      failed: count('failed'),
      blobs: Number(blobs?.blobs ?? 0),
      bytes: Number(blobs?.bytes ?? 0),
    };
  }

  private choices?: Promise<Map<string, ChatbotChoiceRecord> | undefined>;

  /** Every recorded chatbot choice by key; undefined for a warehouse from before choices. */
  private chatbotChoices(): Promise<Map<string, ChatbotChoiceRecord> | undefined> {
    this.choices ??= (async () => {
      if (!(await hasChoiceColumns(this.rows))) return undefined;
      const found = await this.rows.all('SELECT selection_key, chatbots FROM _ocs_chatbot_choices');
      return new Map(found.map((row) => [String(row.selection_key), toChoiceRecord(row)]));
    })();
    return this.choices;
  }

  private async runColumns(): Promise<string> {
    return (await this.chatbotChoices()) ? `${RUN_COLUMNS}, selection_key` : RUN_COLUMNS;
  }

  private async toRuns(found: Array<Record<string, unknown>>): Promise<RunRecord[]> {
    const choices = await this.chatbotChoices();
    const runs = found.map((row) => {
      const run = toRun(row);
      const choice = run.selectionKey === null ? undefined : choices?.get(run.selectionKey);
      return choice ? { ...run, choice } : run;
    });
    // A run `running` while no process holds the writer lock died without recording its end.
    if (runs.some((run) => run.status === 'running') && (await this.lockHeld()) === false) {
      return runs.map((run) =>
        run.status === 'running' ? { ...run, status: 'interrupted', error: DEAD_RUN_NOTE } : run,
      );
    }
    return runs;
  }

  /** Newest first; `kinds` limits them (default: every kind). */
  async runs(options: { limit: number; kinds?: readonly RunKind[] }): Promise<RunRecord[]> {
    const kinds = options.kinds ?? [];
    const where = kinds.length > 0 ? `WHERE kind IN (${kinds.map(() => '?').join(', ')})` : '';
    const found = await this.rows.all(
      `SELECT ${await this.runColumns()} FROM _ocs_runs ${where} ORDER BY id DESC LIMIT ?`,
      [...kinds, options.limit],
    );
    return this.toRuns(found);
  }

  async run(id: number): Promise<RunRecord | undefined> {
    const found = await this.rows.all(
      `SELECT ${await this.runColumns()} FROM _ocs_runs WHERE id = ?`,
      [id],
    );
    return (await this.toRuns(found))[0];
  }

  /**
   * The chatbot choice of the newest sync run that recorded one, or undefined when no run did
   * (the server does not speak of choices).
   */
  async activeChatbotChoice(): Promise<ChatbotChoiceRecord | undefined> {
    const choices = await this.chatbotChoices();
    if (!choices) return undefined;
    const [row] = await this.rows.all(
      `SELECT selection_key FROM _ocs_runs
       WHERE selection_key IS NOT NULL AND kind IN (${SYNC_RUN_KINDS.map(() => '?').join(', ')})
       ORDER BY id DESC LIMIT 1`,
      SYNC_RUN_KINDS,
    );
    if (!row) return undefined;
    const key = String(row.selection_key);
    return choices.get(key) ?? { key, chatbots: [] };
  }

  /** The last sync run that ended with one of `statuses` (default: ok). */
  async lastSuccessfulRun(statuses: readonly RunStatus[] = ['ok']): Promise<RunRecord | undefined> {
    const found = await this.rows.all(
      `SELECT ${await this.runColumns()} FROM _ocs_runs
       WHERE status IN (${statuses.map(() => '?').join(', ')})
         AND kind IN (${SYNC_RUN_KINDS.map(() => '?').join(', ')})
       ORDER BY id DESC LIMIT 1`,
      [...statuses, ...SYNC_RUN_KINDS],
    );
    return (await this.toRuns(found))[0];
  }

  async runResources(runId: number): Promise<ResourceRunRecord[]> {
    const found = await this.rows.all(
      `SELECT resource, status, "rows", pages, duration_ms, error, recorded_at
       FROM _ocs_resource_runs WHERE run_id = ? ORDER BY id`,
      [runId],
    );
    return found.map((row) => ({
      resource: String(row.resource),
      status: String(row.status),
      rows: toCount(row.rows),
      pages: toCount(row.pages),
      durationMs: toCount(row.duration_ms),
      error: (row.error as string | null) ?? null,
      recordedAt: toIsoText(row.recorded_at) ?? '',
    }));
  }

  status(): Promise<ResourceStatus[]> {
    return readResourceStatuses(this.rows, this.facts);
  }

  async getState(key: string): Promise<string | undefined> {
    const [row] = await this.rows.all('SELECT value FROM _ocs_state WHERE key = ?', [key]);
    return row === undefined ? undefined : String(row.value);
  }

  /** The audit chain's state; off for a warehouse from before it existed. */
  async audit(): Promise<AuditSummary> {
    const off: AuditSummary = {
      enabled: false,
      since: null,
      entries: 0,
      lastCheckpoint: null,
      lastVerification: null,
    };
    if (!(await this.facts.existingTables()).has('_ocs_audit_head')) return off;
    const state = await this.getState(AUDIT_STATE_KEY);
    const [head] = await this.rows.all('SELECT seq FROM _ocs_audit_head WHERE one = 1');
    const entries = Number(head?.seq ?? 0);
    const [checkpoint] = await this.rows.all(
      'SELECT * FROM _ocs_audit_checkpoints ORDER BY id DESC LIMIT 1',
    );
    const verification = await this.getState(AUDIT_VERIFICATION_STATE_KEY);
    return {
      enabled: state !== undefined || entries > 0,
      since: state === undefined ? null : (parseJson<{ since?: string }>(state)?.since ?? null),
      entries,
      lastCheckpoint: checkpoint ? toCheckpoint(checkpoint) : null,
      lastVerification:
        verification === undefined ? null : (parseJson<VerificationRecord>(verification) ?? null),
    };
  }

  /** The stored audit checkpoints, oldest first (none before the chain existed). */
  async auditCheckpoints(): Promise<SignedCheckpoint[]> {
    if (!(await this.facts.existingTables()).has('_ocs_audit_checkpoints')) return [];
    return (await this.rows.all('SELECT * FROM _ocs_audit_checkpoints ORDER BY id')).map(
      toCheckpoint,
    );
  }

  /** The writer lock's record: its holder, or one that ended without releasing it. */
  async lockHolder(): Promise<LockRecord | undefined> {
    const [row] = await this.rows.all(
      "SELECT pid, host, since, heartbeat_at FROM _ocs_lock WHERE name = 'writer'",
    );
    if (!row) return undefined;
    return {
      pid: Number(row.pid),
      host: String(row.host),
      since: toIsoText(row.since) ?? '',
      heartbeatAt: toIsoText(row.heartbeat_at) ?? '',
    };
  }

  close(): Promise<void> {
    return this.onClose();
  }
}

function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}
