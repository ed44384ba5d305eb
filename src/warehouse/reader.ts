/**
 * Reading the warehouse's bookkeeping without writing anything: run history, per-resource status,
 * state, the lock's holder. Written once over a narrow query interface (plain SQL with `?`
 * placeholders) so both dialects share it, and so read-only commands (`status`, `runs`, `check`)
 * start without the query builder and the writer's machinery.
 */
import type {
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
  /** Newest `updated_at` of the table as ISO text, or null when it has none. */
  newestUpdatedAt(table: string): Promise<string | null>;
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

/** Run kinds that move data (a `reset` run only forgets cursors). */
export const SYNC_RUN_KINDS: readonly RunKind[] = ['incremental', 'full_refresh'];

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
  };
}

export function toResourceState(row: Record<string, unknown>): ResourceState {
  return {
    resource: String(row.resource),
    cursor: (row.cursor as string | null) ?? null,
    cursorKind: (row.cursor_kind as ResourceState['cursorKind']) ?? null,
    lastRunId:
      row.last_run_id === null || row.last_run_id === undefined ? null : Number(row.last_run_id),
    lastSuccessAt: toIsoText(row.last_success_at),
    lastError: (row.last_error as string | null) ?? null,
    lastErrorAt: toIsoText(row.last_error_at),
    lastFullRefreshAt: toIsoText(row.last_full_refresh_at),
  };
}

function emptyResourceState(resource: string): ResourceState {
  return toResourceState({ resource });
}

const RUN_COLUMNS =
  'id, kind, status, started_at, finished_at, schema_checksum, "rows", pages, requests, error';

/** Every resource with a state row or a table, with its row counts (history tables excluded). */
export async function readResourceStatuses(
  rows: SqlRows,
  facts: TableFacts,
): Promise<ResourceStatus[]> {
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
  const withUpdatedAt = new Set(
    (await rows.all("SELECT table_name FROM _ocs_columns WHERE column_name = 'updated_at'")).map(
      (row) => String(row.table_name),
    ),
  );
  const result: ResourceStatus[] = [];
  for (const name of names) {
    const state = states.get(name) ?? emptyResourceState(name);
    let live = 0;
    let deleted = 0;
    let newestUpdatedAt: string | null = null;
    if (existing.has(name)) {
      // Resource names are checked identifiers (^[a-z][a-z0-9_]*$), safe to quote.
      const [counts] = await rows.all(
        `SELECT count(*) - count("_deleted_at") AS live, count("_deleted_at") AS deleted FROM "${name}"`,
      );
      live = toCount(counts?.live);
      deleted = toCount(counts?.deleted);
      if (withUpdatedAt.has(name)) newestUpdatedAt = await facts.newestUpdatedAt(name);
    }
    result.push({ ...state, rows: live, rowsDeleted: deleted, newestUpdatedAt });
  }
  return result;
}

/** Read-only access to a warehouse's bookkeeping. */
export class WarehouseReader {
  constructor(
    readonly description: string,
    private readonly rows: SqlRows,
    private readonly facts: TableFacts,
    private readonly onClose: () => Promise<void>,
  ) {}

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

  /** Newest first; `kinds` limits them (default: every kind). */
  async runs(options: { limit: number; kinds?: readonly RunKind[] }): Promise<RunRecord[]> {
    const kinds = options.kinds ?? [];
    const where = kinds.length > 0 ? `WHERE kind IN (${kinds.map(() => '?').join(', ')})` : '';
    const found = await this.rows.all(
      `SELECT ${RUN_COLUMNS} FROM _ocs_runs ${where} ORDER BY id DESC LIMIT ?`,
      [...kinds, options.limit],
    );
    return found.map(toRun);
  }

  async run(id: number): Promise<RunRecord | undefined> {
    const [row] = await this.rows.all(`SELECT ${RUN_COLUMNS} FROM _ocs_runs WHERE id = ?`, [id]);
    return row ? toRun(row) : undefined;
  }

  /** The last sync run that ended with one of `statuses` (default: ok). */
  async lastSuccessfulRun(statuses: readonly RunStatus[] = ['ok']): Promise<RunRecord | undefined> {
    const [row] = await this.rows.all(
      `SELECT ${RUN_COLUMNS} FROM _ocs_runs
       WHERE status IN (${statuses.map(() => '?').join(', ')}) AND kind IN ('incremental', 'full_refresh')
       ORDER BY id DESC LIMIT 1`,
      statuses,
    );
    return row ? toRun(row) : undefined;
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

  /** Who holds the writer lock, if anyone (a stale holder is still shown). */
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
