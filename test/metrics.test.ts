/** The daemon's Prometheus metrics (src/daemon/metrics.ts), fed by hand. */
import { register as globalRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ResourceStatus } from '../src/interfaces.js';
import { MAX_RESOURCE_LABELS, MAX_STATUS_LABELS, SyncMetrics } from '../src/daemon/metrics.js';
import { combineEvents } from '../src/sync/run-types.js';
import { failuresInARow, type WarehouseFacts } from '../src/daemon/warehouse-facts.js';
import type { ResourceReport } from '../src/sync/engine.js';

function resourceReport(overrides: Partial<ResourceReport>): ResourceReport {
  return {
    resource: 'participants',
    status: 'ok',
    rows: 0,
    pages: 0,
    durationMs: 1,
    warnings: [],
    valuesAltered: 0,
    deleted: 0,
    fullRefresh: false,
    ...overrides,
  };
}

function status(
  resource: string,
  rows: number,
  newestUpdatedAt: string | null,
  rowsDeleted = 0,
): ResourceStatus {
  return {
    resource,
    cursor: null,
    cursorKind: null,
    lastRunId: 1,
    lastSuccessAt: null,
    lastError: null,
    lastErrorAt: null,
    lastFullRefreshAt: null,
    rows,
    rowsDeleted,
    newestUpdatedAt,
  };
}

/** What the warehouse says: these resources, and nothing else recorded. */
function facts(
  resources: ResourceStatus[],
  overrides: Partial<WarehouseFacts> = {},
): WarehouseFacts {
  return {
    lastRun: undefined,
    lastSuccessAt: undefined,
    consecutiveFailures: 0,
    resources,
    files: undefined,
    audit: {
      enabled: false,
      lastVerification: null,
      lastVerificationAt: null,
      lastCheckpointAt: null,
    },
    ...overrides,
  };
}

/** The value of one sample line, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('SyncMetrics', () => {
  it('uses a registry of its own, so several can live side by side', async () => {
    const first = new SyncMetrics();
    const second = new SyncMetrics({ processMetrics: true });
    first.onAttempt({ path: 'users/', status: 200, outcome: 'ok', durationMs: 1 });
    expect(await globalRegistry.metrics()).not.toContain('ocs_sync_');
    expect(
      sample(
        (await first.render()).body,
        'ocs_sync_http_requests_total{status="200",outcome="ok"}',
      ),
    ).toBe(1);
    expect((await second.render()).body).not.toContain('ocs_sync_http_requests_total{');
    // Standard names, so stock Node.js dashboards work.
    expect((await second.render()).body).toMatch(/^process_cpu_seconds_total /m);
    expect((await second.render()).body).toMatch(/^nodejs_eventloop_lag_seconds /m);
    expect((await first.render()).body).not.toContain('process_cpu_seconds_total');
  });

  it('counts rows, pages, schema changes, reconciled and deleted rows from the sync events', async () => {
    const metrics = new SyncMetrics();
    const events = metrics.syncEvents();
    events.onPageWritten?.({ resource: 'participants', rows: 100, valuesAltered: 0 });
    events.onPageWritten?.({ resource: 'participants', rows: 40, valuesAltered: 0 });
    events.onPageWritten?.({ resource: 'chats', rows: 3, valuesAltered: 0 });
    events.onSchemaChange?.({
      kind: 'add_column',
      table: 'chats',
      column: 'topic',
      reason: 'schema',
    });
    events.onSchemaChange?.({ kind: 'widen_column', table: 'chats', column: 'n', reason: 'value' });
    events.onResourceDone?.(
      resourceReport({ resource: 'participants', rows: 140, deleted: 6, fullRefresh: true }),
    );
    // An incremental resource does not count as reconciled; a failed one counts as a problem.
    events.onResourceDone?.(resourceReport({ resource: 'chats', rows: 3 }));
    events.onResourceDone?.(
      resourceReport({ resource: 'users', status: 'failed', fullRefresh: true, rows: 5 }),
    );
    // Under a chatbot choice a full refresh settles deletions after every walk.
    events.onMissingSettled?.({ resource: 'llm_providers', deleted: 2, outOfScope: 3 });
    const text = (await metrics.render()).body;
    expect(sample(text, 'ocs_sync_rows_synced_total{resource="participants"}')).toBe(140);
    expect(sample(text, 'ocs_sync_rows_synced_total{resource="chats"}')).toBe(3);
    expect(sample(text, 'ocs_sync_pages_total{resource="participants"}')).toBe(2);
    expect(sample(text, 'ocs_sync_schema_changes_total{kind="add_column",reason="schema"}')).toBe(
      1,
    );
    expect(sample(text, 'ocs_sync_schema_changes_total{kind="widen_column",reason="value"}')).toBe(
      1,
    );
    expect(sample(text, 'ocs_sync_rows_reconciled_total{resource="participants"}')).toBe(140);
    expect(sample(text, 'ocs_sync_rows_deleted_total{resource="participants"}')).toBe(6);
    expect(sample(text, 'ocs_sync_rows_deleted_total{resource="llm_providers"}')).toBe(2);
    expect(sample(text, 'ocs_sync_rows_reconciled_total{resource="chats"}')).toBeUndefined();
    expect(sample(text, 'ocs_sync_rows_reconciled_total{resource="users"}')).toBeUndefined();
    expect(sample(text, 'ocs_sync_resource_problems_total{resource="users",status="failed"}')).toBe(
      1,
    );
  });

  it('records HTTP attempts by status and outcome, with retries and durations', async () => {
    const metrics = new SyncMetrics();
    metrics.onAttempt({ path: 'a/', status: 200, outcome: 'ok', durationMs: 40 });
    metrics.onAttempt({ path: 'a/', status: 429, outcome: 'retry', durationMs: 5 });
    metrics.onAttempt({ path: 'a/', status: 0, outcome: 'retry', durationMs: 5 });
    metrics.onAttempt({ path: 'a/', status: 401, outcome: 'error', durationMs: 5 });
    const text = (await metrics.render()).body;
    expect(sample(text, 'ocs_sync_http_requests_total{status="429",outcome="retry"}')).toBe(1);
    expect(sample(text, 'ocs_sync_http_requests_total{status="0",outcome="retry"}')).toBe(1);
    expect(sample(text, 'ocs_sync_http_requests_total{status="401",outcome="error"}')).toBe(1);
    expect(sample(text, 'ocs_sync_http_retries_total')).toBe(2);
    expect(sample(text, 'ocs_sync_http_request_duration_seconds_count{outcome="ok"}')).toBe(1);
    expect(sample(text, 'ocs_sync_http_request_duration_seconds_sum{outcome="ok"}')).toBeCloseTo(
      0.04,
    );
  });

  it('tracks runs, the last success, failures in a row and skipped ticks', async () => {
    const metrics = new SyncMetrics();
    let text = (await metrics.render()).body;
    expect(sample(text, 'ocs_sync_last_success_timestamp_seconds')).toBe(0);
    expect(sample(text, 'ocs_sync_skipped_ticks_total{reason="overlap"}')).toBe(0);

    metrics.runStarted();
    text = (await metrics.render()).body;
    expect(sample(text, 'ocs_sync_run_in_progress')).toBe(1);
    metrics.runFinished({
      kind: 'full_refresh',
      status: 'ok',
      durationMs: 90_000,
      finishedAt: 1_767_600_000_000,
      consecutiveFailures: 0,
    });
    metrics.runFinished({
      kind: 'incremental',
      status: 'failed',
      durationMs: 2_000,
      finishedAt: 1_767_600_900_000,
      consecutiveFailures: 1,
    });
    metrics.runFinished({
      kind: 'incremental',
      status: 'failed',
      durationMs: 2_000,
      finishedAt: 1_767_601_800_000,
      consecutiveFailures: 2,
    });
    metrics.tickSkipped('overlap');
    metrics.tickSkipped('backoff');
    metrics.tickSkipped('backoff');
    text = (await metrics.render()).body;
    expect(sample(text, 'ocs_sync_run_in_progress')).toBe(0);
    expect(sample(text, 'ocs_sync_runs_total{kind="full_refresh",status="ok"}')).toBe(1);
    expect(sample(text, 'ocs_sync_runs_total{kind="incremental",status="failed"}')).toBe(2);
    expect(sample(text, 'ocs_sync_run_duration_seconds_sum{kind="full_refresh",status="ok"}')).toBe(
      90,
    );
    expect(
      sample(
        text,
        'ocs_sync_run_duration_seconds_bucket{le="120",kind="full_refresh",status="ok"}',
      ),
    ).toBe(1);
    expect(
      sample(text, 'ocs_sync_run_duration_seconds_bucket{le="60",kind="full_refresh",status="ok"}'),
    ).toBe(0);
    expect(sample(text, 'ocs_sync_last_run_duration_seconds')).toBe(2);
    // Failures do not move the last success.
    expect(sample(text, 'ocs_sync_last_success_timestamp_seconds')).toBe(1_767_600_000);
    expect(sample(text, 'ocs_sync_consecutive_failures')).toBe(2);
    expect(sample(text, 'ocs_sync_skipped_ticks_total{reason="overlap"}')).toBe(1);
    expect(sample(text, 'ocs_sync_skipped_ticks_total{reason="backoff"}')).toBe(2);
  });

  it('computes per-resource lag at scrape time from the newest updated_at stored', async () => {
    let now = Date.parse('2026-03-01T12:00:00Z');
    const metrics = new SyncMetrics({ clock: { now: () => now } });
    metrics.warehouseFacts(
      facts([
        status('chat_messages', 500, '2026-03-01T11:59:00.250000Z', 4),
        status('users', 7, null),
        status('teams_broken', 1, 'not a date'),
      ]),
    );
    let text = (await metrics.render()).body;
    expect(sample(text, 'ocs_sync_resource_lag_seconds{resource="chat_messages"}')).toBe(59.75);
    expect(sample(text, 'ocs_sync_resource_lag_seconds{resource="users"}')).toBeUndefined();
    expect(sample(text, 'ocs_sync_resource_lag_seconds{resource="teams_broken"}')).toBeUndefined();
    expect(sample(text, 'ocs_sync_resource_rows{resource="chat_messages"}')).toBe(500);
    expect(sample(text, 'ocs_sync_resource_rows{resource="users"}')).toBe(7);
    expect(sample(text, 'ocs_sync_resource_deleted_rows{resource="chat_messages"}')).toBe(4);
    // Each resource's counters exist from the first facts on: a rate of 0, not no data.
    expect(sample(text, 'ocs_sync_rows_synced_total{resource="users"}')).toBe(0);
    expect(sample(text, 'ocs_sync_pages_total{resource="users"}')).toBe(0);

    now += 60_000;
    text = (await metrics.render()).body;
    expect(sample(text, 'ocs_sync_resource_lag_seconds{resource="chat_messages"}')).toBe(119.75);

    // A resource gone from the warehouse status disappears from the gauges.
    metrics.warehouseFacts(facts([status('users', 8, '2026-03-01T12:01:00Z')]));
    text = (await metrics.render()).body;
    expect(text).not.toMatch(/^ocs_sync_resource_\w+\{resource="chat_messages"/m);
    expect(sample(text, 'ocs_sync_resource_lag_seconds{resource="users"}')).toBe(0);
  });
});

describe('labels the server feeds', () => {
  it('take at most so many values, names no table may have count under invalid, the rest under other', async () => {
    const metrics = new SyncMetrics();
    const events = metrics.syncEvents();
    for (let index = 0; index < MAX_RESOURCE_LABELS + 100; index += 1) {
      events.onResourceDone?.(resourceReport({ resource: `made_up_${index}`, status: 'failed' }));
      events.onResourceDone?.(resourceReport({ resource: `Made-Up ${index}`, status: 'skipped' }));
    }
    for (let status = 100; status < 1000; status += 1) {
      metrics.onAttempt({ path: 'a/', status, outcome: 'error', durationMs: 1 });
    }
    metrics.warehouseFacts(facts([status('made_up_1', 3, null), status('made_up_9999', 4, null)]));
    const text = (await metrics.render()).body;
    const seriesOf = (name: string) =>
      text.split('\n').filter((line) => line.startsWith(`${name}{`));
    expect(seriesOf('ocs_sync_resource_problems_total')).toHaveLength(MAX_RESOURCE_LABELS + 2);
    expect(
      sample(text, 'ocs_sync_resource_problems_total{resource="invalid",status="skipped"}'),
    ).toBe(MAX_RESOURCE_LABELS + 100);
    expect(sample(text, 'ocs_sync_resource_problems_total{resource="other",status="failed"}')).toBe(
      100,
    );
    expect(seriesOf('ocs_sync_http_requests_total')).toHaveLength(MAX_STATUS_LABELS + 1);
    expect(sample(text, 'ocs_sync_http_requests_total{status="other",outcome="error"}')).toBe(
      900 - MAX_STATUS_LABELS,
    );
    expect(sample(text, 'ocs_sync_resource_rows{resource="made_up_1"}')).toBe(3);
    expect(sample(text, 'ocs_sync_resource_rows{resource="other"}')).toBe(4);
  });
});

describe('the last run, as the warehouse recorded it', () => {
  const run = {
    kind: 'initial' as const,
    status: 'failed' as const,
    startedAt: Date.parse('2026-03-01T12:00:00Z'),
    finishedAt: Date.parse('2026-03-01T12:00:42Z'),
    rows: 1200,
    pages: 3,
    requests: 9,
  };

  it('takes the run this process made from its record: kind, status, error, rows, pages, times', async () => {
    const metrics = new SyncMetrics({ team: 'kenya' });
    metrics.runStarted();
    const events = metrics.syncEvents();
    events.onResourceDone?.(
      resourceReport({ resource: 'chats', status: 'failed', errorKind: 'unavailable' }),
    );
    events.onResourceDone?.(
      resourceReport({ resource: 'llm_providers', status: 'skipped', errorKind: 'skipped' }),
    );
    events.onResourceDone?.(resourceReport({ resource: 'users', status: 'excluded' }));
    metrics.onAttempt({ path: 'chats/', status: 503, outcome: 'retry', durationMs: 1 });
    metrics.warehouseFacts(
      facts(
        [
          {
            ...status('chats', 10, '2026-03-01T11:00:00Z'),
            lastSuccessAt: '2026-02-28T09:00:00.000Z',
          },
          { ...status('users', 2, null), lastSuccessAt: '2026-02-28T09:00:00Z', excludedAt: 'x' },
        ],
        {
          lastRun: run,
          lastSuccessAt: Date.parse('2026-02-28T09:00:01Z'),
          consecutiveFailures: 3,
          files: { ok: 5, missing: 1, failed: 2, bytes: 4096 },
          audit: {
            enabled: true,
            lastVerification: { intact: false },
            lastVerificationAt: Date.parse('2026-03-01T06:00:00Z'),
            lastCheckpointAt: null,
          },
        },
      ),
      { since: run.startedAt, errorKind: 'auth' },
    );
    metrics.checkpointWritten(false);
    metrics.scheduleIntervalSeconds(900);
    const text = await metrics.runRegistry.metrics();
    const at = (series: string) => sample(text, series);
    expect(
      at('ocs_sync_last_run_status{kind="initial",status="failed",error="auth",team="kenya"}'),
    ).toBe(1);
    expect(text.match(/^ocs_sync_last_run_status\{/gm)).toHaveLength(1);
    expect(at('ocs_sync_last_run_timestamp_seconds{team="kenya"}')).toBe(run.finishedAt / 1000);
    expect(at('ocs_sync_last_run_duration_seconds{team="kenya"}')).toBe(42);
    expect(at('ocs_sync_last_run_rows{team="kenya"}')).toBe(1200);
    expect(at('ocs_sync_last_run_pages{team="kenya"}')).toBe(3);
    expect(at('ocs_sync_last_run_requests{team="kenya"}')).toBe(9);
    expect(at('ocs_sync_last_run_http_retries{team="kenya"}')).toBe(1);
    // The last success is the warehouse's, whatever this run did.
    expect(at('ocs_sync_last_success_timestamp_seconds{team="kenya"}')).toBe(
      Date.parse('2026-02-28T09:00:01Z') / 1000,
    );
    expect(at('ocs_sync_consecutive_failures{team="kenya"}')).toBe(3);
    expect(
      at('ocs_sync_resource_last_error{resource="chats",kind="unavailable",team="kenya"}'),
    ).toBe(1);
    expect(
      at('ocs_sync_resource_last_error{resource="llm_providers",kind="skipped",team="kenya"}'),
    ).toBe(1);
    expect(text).not.toMatch(/resource_last_error\{resource="users"/);
    expect(
      at('ocs_sync_resource_last_success_timestamp_seconds{resource="chats",team="kenya"}'),
    ).toBe(Date.parse('2026-02-28T09:00:00Z') / 1000);
    // A resource the chatbot choice leaves out is not one that lags.
    expect(text).not.toMatch(/resource_last_success_timestamp_seconds\{resource="users"/);
    expect(
      at('ocs_sync_resource_newest_row_timestamp_seconds{resource="chats",team="kenya"}'),
    ).toBe(Date.parse('2026-03-01T11:00:00Z') / 1000);
    expect(at('ocs_sync_files{status="failed",team="kenya"}')).toBe(2);
    expect(at('ocs_sync_file_bytes_stored{team="kenya"}')).toBe(4096);
    expect(at('ocs_sync_audit_broken{team="kenya"}')).toBe(1);
    expect(at('ocs_sync_audit_last_verify_timestamp_seconds{team="kenya"}')).toBe(
      Date.parse('2026-03-01T06:00:00Z') / 1000,
    );
    expect(at('ocs_sync_audit_last_checkpoint_timestamp_seconds{team="kenya"}')).toBe(0);
    expect(at('ocs_sync_audit_checkpoint_failed{team="kenya"}')).toBe(1);
    expect(at('ocs_sync_schedule_interval_seconds{team="kenya"}')).toBe(900);
  });

  it('holds gauges only in the run registry: no counter restarts with each process that pushes', async () => {
    const metrics = new SyncMetrics({ processMetrics: true });
    metrics.syncEvents().onPageWritten?.({ resource: 'chats', rows: 5, valuesAltered: 0 });
    const pushed = await metrics.runRegistry.getMetricsAsJSON();
    expect(pushed.map((metric) => String(metric.type)).filter((type) => type !== 'gauge')).toEqual(
      [],
    );
    const names = pushed.map((metric) => metric.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'ocs_sync_last_run_timestamp_seconds',
        'ocs_sync_last_success_timestamp_seconds',
        'ocs_sync_last_run_status',
      ]),
    );
    expect(names).not.toContain('ocs_sync_run_in_progress');
    expect(names.filter((name) => !name.startsWith('ocs_sync_'))).toEqual([]);
    // Everything pushed is served on /metrics too, under the same name.
    const served = (await metrics.registry.getMetricsAsJSON()).map((metric) => metric.name);
    expect(served).toEqual(expect.arrayContaining(names));
  });

  it("leaves the last run's gauges alone when the warehouse's last run is an older one", async () => {
    const metrics = new SyncMetrics();
    metrics.runFinished({
      kind: 'incremental',
      status: 'failed',
      durationMs: 2_000,
      finishedAt: run.finishedAt + 60_000,
      consecutiveFailures: 1,
      errorKind: 'warehouse',
    });
    metrics.warehouseFacts(facts([], { lastRun: run }), { since: run.finishedAt + 58_000 });
    const text = await metrics.runRegistry.metrics();
    expect(
      sample(
        text,
        'ocs_sync_last_run_status{kind="incremental",status="failed",error="warehouse"}',
      ),
    ).toBe(1);
    expect(sample(text, 'ocs_sync_last_run_rows')).toBe(0);
  });

  it('counts failures in a row up to the last success, passing over interrupted runs', () => {
    const runs = (...statuses: string[]) => statuses.map((status) => ({ status }) as never);
    expect(failuresInARow(runs('failed', 'interrupted', 'failed', 'ok', 'failed'))).toBe(2);
    expect(failuresInARow(runs('partial', 'failed'))).toBe(0);
    expect(failuresInARow(runs('failed', 'failed'))).toBe(2);
    expect(failuresInARow([])).toBe(0);
  });
});

describe('combineEvents', () => {
  it('calls every listener that has the hook, in order', () => {
    const calls: string[] = [];
    const events = combineEvents(
      { onPageWritten: ({ resource }) => calls.push(`a:${resource}`) },
      undefined,
      {
        onPageWritten: ({ resource }) => calls.push(`b:${resource}`),
        onRunStart: () => calls.push('b:start'),
      },
    );
    events.onRunStart?.({ runId: 1, kind: 'incremental', resources: 2 });
    events.onPageWritten?.({ resource: 'x', rows: 1, valuesAltered: 0 });
    events.onResourceDone?.(resourceReport({}));
    expect(calls).toEqual(['b:start', 'a:x', 'b:x']);
  });
});
