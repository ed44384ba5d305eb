/**
 * The daemon: scheduling decisions, backoff, health and shutdown with an injected cron function
 * and clock (ticks are fired by hand, nothing sleeps), then the whole `ocs-sync daemon` against
 * the fake export server with a real SQLite warehouse.
 */
import { getEventListeners } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { syncOnce } from '../src/cli/sync-command.js';
import { loadConfig } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import { InterruptedError } from '../src/errors.js';
import { decodeCursor, parseTimestamp } from '../src/export-api/cursor.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { sampleFileContent } from '../src/fake-server/file-contents.js';
import {
  FILE_CONTENT_ENDPOINT,
  startFakeServer,
  type FakeServer,
} from '../src/fake-server/server.js';
import { SeededRandom } from '../src/fake-server/random.js';
import type { RunKind, StageProgress } from '../src/interfaces.js';
import { silentLogger } from '../src/log.js';
import { openWarehouse, openWarehouseReader } from '../src/warehouse/open.js';
import { readWarehouseFacts } from '../src/daemon/warehouse-facts.js';
import {
  FAST_RETRIES_YAML,
  createTestWarehouse,
  expectWarehouseEqualsSource,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  testDialects,
  waitFor,
  type TestWarehouse,
} from './support.js';
import { linkedAbortController } from '../src/abort.js';
import { auditEnv, makeAuditKeys } from './audit-support.js';
import { CleanupStack } from '../src/daemon/cleanup-stack.js';
import {
  startDaemon,
  type Daemon,
  type DaemonOptions,
  type DaemonSyncRequest,
} from '../src/daemon/daemon.js';
import { describeProgress, evaluateHealth, type HealthInput } from '../src/daemon/health.js';
import {
  DEFAULT_BACKOFF,
  Scheduler,
  decideTick,
  ticksToSkipAfter,
  type RunOutcome,
  type ScheduleFunction,
} from '../src/daemon/scheduler.js';
import { FULL_REFRESH_ALL, type ResourceReport, type SyncReport } from '../src/sync/engine.js';
import type { RunExporter } from '../src/daemon/run-export.js';
import type { WarehouseFacts } from '../src/daemon/warehouse-facts.js';

// ---------------------------------------------------------------------------------------------
// Test doubles.

class ManualClock {
  constructor(public time = Date.parse('2026-01-05T10:00:00Z')) {}
  now(): number {
    return this.time;
  }
  advance(ms: number): void {
    this.time += ms;
  }
}

interface FakeJob {
  cronExpression: string;
  timezone: string;
  name: string;
  fire(): void;
  stopped: boolean;
}

/** A cron function whose jobs fire only when the test says so. */
function manualCron(): { schedule: ScheduleFunction; jobs: FakeJob[]; job(name: RegExp): FakeJob } {
  const jobs: FakeJob[] = [];
  const schedule: ScheduleFunction = (cronExpression, timezone, callback, name) => {
    const job: FakeJob = {
      cronExpression,
      timezone,
      name,
      stopped: false,
      fire: () => {
        if (!job.stopped) callback();
      },
    };
    jobs.push(job);
    return {
      stop: () => {
        job.stopped = true;
      },
      nextRuns: (count) =>
        Array.from(
          { length: count },
          (_, index) => new Date(Date.UTC(2026, 0, 5, 10, 15 * (index + 1))),
        ),
    };
  };
  const job = (name: RegExp) => {
    const found = jobs.find((candidate) => name.test(candidate.name));
    if (!found) throw new Error(`no job ${name}`);
    return found;
  };
  return { schedule, jobs, job };
}

interface PendingRun<T> {
  argument: T;
  succeed(value: RunOutcome | SyncReport): void;
  fail(error: unknown): void;
}

/** A run function whose calls stay open until the test settles them. */
function pendingRuns<T, R>() {
  const calls: Array<PendingRun<T>> = [];
  const run = (argument: T) =>
    new Promise<R>((resolve, reject) => {
      calls.push({ argument, succeed: (value) => resolve(value as R), fail: reject });
    });
  return { calls, run, last: () => calls.at(-1)! };
}

function resourceReport(overrides: Partial<ResourceReport> = {}): ResourceReport {
  return {
    resource: 'chat_messages',
    status: 'ok',
    rows: 10,
    pages: 1,
    durationMs: 5,
    warnings: [],
    valuesAltered: 0,
    deleted: 0,
    fullRefresh: false,
    ...overrides,
  };
}

function syncReport(overrides: Partial<SyncReport> = {}): SyncReport {
  const resources = overrides.resources ?? [resourceReport()];
  return {
    runId: 1,
    kind: 'incremental',
    status: 'ok',
    schemaChecksum: 'abc',
    previousSchemaChecksum: 'abc',
    schemaChanges: [],
    resources,
    problems: [],
    rows: resources.reduce((sum, resource) => sum + resource.rows, 0),
    pages: resources.reduce((sum, resource) => sum + resource.pages, 0),
    requests: 3,
    durationMs: 10,
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------

describe('backoff and tick decisions (pure)', () => {
  it('skips 2^n - 1 ticks after n failures, up to the cap', () => {
    const policy = { ...DEFAULT_BACKOFF, maxSkippedTicks: 15 };
    expect([0, 1, 2, 3, 4, 5, 40].map((failures) => ticksToSkipAfter(failures, policy))).toEqual([
      0, 1, 3, 7, 15, 15, 15,
    ]);
    expect(ticksToSkipAfter(3, { ...policy, maxSkippedTicks: 2 })).toBe(2);
  });

  it('skips for overlap first, then for backoff, and stops backing off after maxBackoffMs', () => {
    const policy = { maxSkippedTicks: 15, maxBackoffMs: 60_000 };
    expect(decideTick({ running: true, ticksToSkip: 0, lastFailureAt: null }, 0, policy)).toEqual({
      action: 'skip',
      reason: 'overlap',
    });
    expect(decideTick({ running: false, ticksToSkip: 2, lastFailureAt: 0 }, 1_000, policy)).toEqual(
      {
        action: 'skip',
        reason: 'backoff',
      },
    );
    expect(
      decideTick({ running: false, ticksToSkip: 2, lastFailureAt: 0 }, 60_000, policy),
    ).toEqual({
      action: 'run',
    });
    expect(decideTick({ running: false, ticksToSkip: 0, lastFailureAt: 0 }, 1, policy)).toEqual({
      action: 'run',
    });
  });
});

describe('Scheduler', () => {
  const setup = (
    options: {
      fullRefreshSchedule?: string | null;
      backoff?: { maxSkippedTicks?: number; maxBackoffMs?: number };
      fullRefreshOwed?: boolean;
    } = {},
  ) => {
    const clock = new ManualClock();
    const cron = manualCron();
    const runs = pendingRuns<RunKind, RunOutcome>();
    const skipped: string[] = [];
    const scheduler = new Scheduler({
      schedule: '*/15 * * * *',
      fullRefreshSchedule:
        options.fullRefreshSchedule === undefined ? '0 3 * * 0' : options.fullRefreshSchedule,
      timezone: 'Europe/Berlin',
      clock,
      scheduleFunction: cron.schedule,
      run: runs.run,
      logger: silentLogger(),
      backoff: options.backoff,
      fullRefreshOwed: options.fullRefreshOwed,
      onTickSkipped: (reason, kind) => skipped.push(`${reason}:${kind}`),
    });
    return { clock, cron, runs, scheduler, skipped };
  };

  it('runs at start, schedules both cron jobs in the time zone, and never overlaps runs', async () => {
    const { cron, runs, scheduler, skipped } = setup();
    scheduler.start();
    expect(cron.jobs.map((job) => [job.cronExpression, job.timezone])).toEqual([
      ['*/15 * * * *', 'Europe/Berlin'],
      ['0 3 * * 0', 'Europe/Berlin'],
    ]);
    expect(runs.calls.map((call) => call.argument)).toEqual(['incremental']);

    cron.job(/incremental/).fire();
    cron.job(/incremental/).fire();
    expect(runs.calls).toHaveLength(1);
    expect(skipped).toEqual(['overlap:incremental', 'overlap:incremental']);
    expect(scheduler.status().skippedTicks).toEqual({ overlap: 2, backoff: 0 });

    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();
    cron.job(/incremental/).fire();
    expect(runs.calls.map((call) => call.argument)).toEqual(['incremental', 'incremental']);
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();
  });

  it('does not lose a full refresh whose tick fell during a run', async () => {
    const { cron, runs, scheduler, skipped } = setup();
    scheduler.start();
    cron.job(/full refresh/).fire();
    expect(skipped).toEqual(['overlap:full_refresh']);
    expect(scheduler.status().fullRefreshPending).toBe(true);
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();

    cron.job(/incremental/).fire();
    expect(runs.last().argument).toBe('full_refresh');
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();
    expect(scheduler.status().fullRefreshPending).toBe(false);
    cron.job(/incremental/).fire();
    expect(runs.last().argument).toBe('incremental');
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();
  });

  it('runs a full refresh owed from before the start first, then incremental ones', async () => {
    const { cron, runs, scheduler } = setup({ fullRefreshOwed: true });
    expect(scheduler.status().fullRefreshPending).toBe(true);
    scheduler.start();
    expect(runs.last().argument).toBe('full_refresh');
    // Interrupted again (the daemon stopped): still owed, to the next start's process.
    runs.last().succeed({ status: 'interrupted' });
    await scheduler.whenIdle();
    expect(scheduler.status().fullRefreshPending).toBe(true);
    cron.job(/incremental/).fire();
    expect(runs.last().argument).toBe('full_refresh');
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();
    cron.job(/incremental/).fire();
    expect(runs.last().argument).toBe('incremental');
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();

    // Without a full refresh schedule, nothing is owed: full refreshes are the operator's.
    const unscheduled = setup({ fullRefreshOwed: true, fullRefreshSchedule: null });
    unscheduled.scheduler.start();
    expect(unscheduled.runs.last().argument).toBe('incremental');
    unscheduled.runs.last().succeed({ status: 'ok' });
    await unscheduled.scheduler.whenIdle();
  });

  it('survives failed and throwing runs, backs off 1, 3, 7 ticks, and resets on success', async () => {
    const { cron, runs, scheduler, skipped, clock } = setup({ fullRefreshSchedule: null });
    const tick = () => cron.job(/incremental/).fire();
    /** Fire ticks until one starts a run; returns how many were skipped. */
    const ticksUntilRun = () => {
      const before = runs.calls.length;
      let skippedTicks = 0;
      for (;;) {
        clock.advance(60_000);
        tick();
        if (runs.calls.length > before) return skippedTicks;
        skippedTicks += 1;
        if (skippedTicks > 100) throw new Error('never ran');
      }
    };

    scheduler.start();
    runs.last().fail(new Error('server down'));
    await scheduler.whenIdle();
    expect(scheduler.status()).toMatchObject({
      consecutiveFailures: 1,
      ticksToSkip: 1,
      lastRun: { status: 'failed', error: 'server down' },
      lastSuccessAt: null,
    });

    expect(ticksUntilRun()).toBe(1);
    runs.last().succeed({ status: 'failed', error: 'still down' });
    await scheduler.whenIdle();
    expect(ticksUntilRun()).toBe(3);
    runs.last().fail(new Error('down'));
    await scheduler.whenIdle();
    expect(ticksUntilRun()).toBe(7);
    expect(skipped.filter((entry) => entry.startsWith('backoff'))).toHaveLength(11);

    runs.last().succeed({ status: 'partial', error: 'users skipped' });
    await scheduler.whenIdle();
    expect(scheduler.status()).toMatchObject({
      consecutiveFailures: 0,
      ticksToSkip: 0,
      lastSuccessAt: clock.now(),
    });
    expect(ticksUntilRun()).toBe(0);
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();
  });

  it('stops backing off once maxBackoffMs has passed since the failure', async () => {
    const { cron, runs, scheduler, clock } = setup({
      fullRefreshSchedule: null,
      backoff: { maxBackoffMs: 10 * 60_000 },
    });
    scheduler.start();
    runs.last().fail(new Error('1'));
    await scheduler.whenIdle();
    for (let failure = 2; failure <= 5; failure += 1) {
      clock.advance(10 * 60_000);
      cron.job(/incremental/).fire();
      expect(runs.calls).toHaveLength(failure);
      runs.last().fail(new Error(String(failure)));
      await scheduler.whenIdle();
    }
    expect(scheduler.status().consecutiveFailures).toBe(5);
  });

  it('starts nothing after stop, and stops its cron jobs', async () => {
    const { cron, runs, scheduler } = setup();
    scheduler.start();
    runs.last().succeed({ status: 'ok' });
    await scheduler.whenIdle();
    await scheduler.stop();
    expect(cron.jobs.every((job) => job.stopped)).toBe(true);
    scheduler.tick('incremental', 'schedule');
    expect(runs.calls).toHaveLength(1);
  });
});

describe('evaluateHealth (pure)', () => {
  const base: HealthInput = {
    now: 1_000_000,
    maxAgeSeconds: 600,
    running: false,
    lastProgressAt: null,
    progress: null,
    lastSuccessAt: 900_000,
    lastRunStatus: 'ok',
    lastError: null,
    consecutiveFailures: 0,
  };

  it('is healthy after a recent success, and says so', () => {
    const report = evaluateHealth(base);
    expect(report).toMatchObject({
      status: 'ok',
      httpStatus: 200,
      lastSuccessAt: new Date(900_000).toISOString(),
      lastRunStatus: 'ok',
      consecutiveFailures: 0,
    });
    expect(report.reason).toMatch(/last run succeeded; the last success was 100 s ago/);
  });

  it('is unhealthy after a failure, naming the error', () => {
    const report = evaluateHealth({
      ...base,
      lastRunStatus: 'failed',
      lastError: 'HTTP 401',
      consecutiveFailures: 2,
    });
    expect(report).toMatchObject({ status: 'unhealthy', httpStatus: 503, consecutiveFailures: 2 });
    expect(report.reason).toMatch(/failed: HTTP 401 \(2 failures in a row\)/);
  });

  it('is unhealthy when the last success is older than the max age', () => {
    const report = evaluateHealth({ ...base, now: 900_000 + 601_000 });
    expect(report.httpStatus).toBe(503);
    expect(report.reason).toMatch(/601 s ago, longer than max age 600 s/);
  });

  it('while a run is in progress: healthy with a fresh success or recent progress, else not', () => {
    expect(evaluateHealth({ ...base, running: true, lastRunStatus: 'failed' }).httpStatus).toBe(
      200,
    );
    const firstRun = { ...base, running: true, lastSuccessAt: null, lastRunStatus: null };
    expect(evaluateHealth({ ...firstRun, lastProgressAt: 999_000 })).toMatchObject({
      httpStatus: 200,
    });
    const stuck = evaluateHealth({ ...firstRun, lastProgressAt: 1_000_000 - 700_000 });
    expect(stuck).toMatchObject({ httpStatus: 503, status: 'unhealthy' });
    expect(stuck.reason).toMatch(/nothing has moved for 700 s/);
  });
});

describe('startDaemon with an injected sync', () => {
  let daemon: Daemon | undefined;
  let controller: AbortController;
  afterEach(async () => {
    controller?.abort();
    await daemon?.stopped;
    daemon = undefined;
  });

  const start = async (
    options: { listen?: boolean; maxAgeSeconds?: number; exporter?: RunExporter } = {},
  ) => {
    controller = new AbortController();
    const clock = new ManualClock();
    const cron = manualCron();
    const runs = pendingRuns<DaemonSyncRequest, SyncReport>();
    const cleanup = new CleanupStack();
    const cleaned: string[] = [];
    /** What the warehouse would say: the test sets it as the runs it settles would leave it. */
    const warehouse = {
      failuresInARow: 0,
      lastSuccessAt: undefined as number | undefined,
      lastRun: undefined as WarehouseFacts['lastRun'],
      unreadable: false,
    };
    cleanup.add('caller part', () => void cleaned.push('caller part'));
    daemon = await startDaemon({
      schedule: '*/15 * * * *',
      fullRefreshSchedule: '0 3 * * 0',
      timezone: 'UTC',
      health: {
        listen: options.listen === false ? null : { host: '127.0.0.1', port: 0 },
        maxAgeSeconds: options.maxAgeSeconds ?? 3600,
      },
      logger: silentLogger(),
      signal: controller.signal,
      // Like the engine: a run stops when the daemon's signal aborts.
      sync: (request) => {
        const promise = runs.run(request);
        const call = runs.last();
        request.signal.addEventListener(
          'abort',
          () => call.fail(new InterruptedError('interrupted')),
          { once: true },
        );
        return promise;
      },
      readFacts: async () => {
        if (warehouse.unreadable) throw new Error('the warehouse cannot be opened');
        return {
          lastRun: warehouse.lastRun,
          lastSuccessAt: warehouse.lastSuccessAt,
          consecutiveFailures: warehouse.failuresInARow,
          resources: [
            {
              resource: 'chat_messages',
              cursor: '10',
              cursorKind: 'pk',
              lastRunId: 1,
              lastSuccessAt: null,
              lastError: null,
              lastErrorAt: null,
              lastFullRefreshAt: null,
              rows: 10,
              rowsDeleted: 0,
              newestUpdatedAt: new Date(clock.now() - 90_000).toISOString(),
            },
          ],
          files: undefined,
          audit: {
            enabled: false,
            lastVerification: null,
            lastVerificationAt: null,
            lastCheckpointAt: null,
          },
        };
      },
      exporter: options.exporter,
      scheduleFunction: cron.schedule,
      clock,
      cleanup,
    });
    const get = async (path: string) => {
      const response = await fetch(`${daemon!.healthServer!.url}${path}`);
      return {
        status: response.status,
        text: await response.text(),
        type: response.headers.get('content-type'),
      };
    };
    return { clock, cron, runs, get, cleaned, daemon, warehouse };
  };

  it('serves /healthz 200 during the first run and after success, 503 after a failure', async () => {
    const { runs, get, cron, clock } = await start();
    expect(runs.calls).toHaveLength(1);
    let health = await get('/healthz');
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toMatchObject({
      status: 'ok',
      lastSuccessAt: null,
      lastRunStatus: null,
      consecutiveFailures: 0,
      running: true,
    });

    runs.last().succeed(syncReport());
    await daemon!.scheduler.whenIdle();
    health = await get('/healthz');
    expect(health.status).toBe(200);
    expect(health.type).toMatch(/application\/json/);
    expect(JSON.parse(health.text)).toMatchObject({
      status: 'ok',
      lastSuccessAt: new Date(clock.now()).toISOString(),
      lastRunStatus: 'ok',
      consecutiveFailures: 0,
    });

    clock.advance(15 * 60_000);
    cron.job(/incremental/).fire();
    runs.last().fail(new Error('GET manifest/ failed after 6 attempts: ECONNREFUSED'));
    await daemon!.scheduler.whenIdle();
    health = await get('/healthz');
    expect(health.status).toBe(503);
    const body = JSON.parse(health.text);
    expect(body).toMatchObject({
      status: 'unhealthy',
      lastRunStatus: 'failed',
      consecutiveFailures: 1,
    });
    expect(body.reason).toMatch(/ECONNREFUSED/);
    expect(Object.keys(body)).toEqual(
      expect.arrayContaining([
        'status',
        'lastSuccessAt',
        'lastRunStatus',
        'consecutiveFailures',
        'reason',
      ]),
    );

    expect((await get('/nope')).status).toBe(404);
  });

  it('counts runs, skipped ticks, failures and lag in /metrics', async () => {
    const { runs, get, cron, clock, warehouse } = await start();
    const first = runs.last().argument;
    first.events.onPageWritten?.({ resource: 'chat_messages', rows: 7, valuesAltered: 0 });
    first.onAttempt({ path: 'chat_messages/', status: 200, outcome: 'ok', durationMs: 12 });
    first.onAttempt({ path: 'chat_messages/', status: 503, outcome: 'retry', durationMs: 3 });
    cron.job(/incremental/).fire();
    clock.advance(42_000);
    warehouse.lastSuccessAt = clock.now();
    runs.last().succeed(syncReport());
    await daemon!.scheduler.whenIdle();

    cron.job(/incremental/).fire();
    // Failures in a row are the warehouse's count (a restarted daemon still knows them).
    warehouse.failuresInARow = 1;
    runs.last().fail(new Error('boom'));
    await daemon!.scheduler.whenIdle();

    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.type).toMatch(/text\/plain/);
    const text = metrics.text;
    expect(text).toContain('ocs_sync_rows_synced_total{resource="chat_messages"} 7');
    expect(text).toContain('ocs_sync_pages_total{resource="chat_messages"} 1');
    expect(text).toContain('ocs_sync_http_requests_total{status="200",outcome="ok"} 1');
    expect(text).toContain('ocs_sync_http_requests_total{status="503",outcome="retry"} 1');
    expect(text).toContain('ocs_sync_http_retries_total 1');
    expect(text).toContain('ocs_sync_runs_total{kind="incremental",status="ok"} 1');
    expect(text).toContain('ocs_sync_runs_total{kind="incremental",status="failed"} 1');
    expect(text).toContain('ocs_sync_skipped_ticks_total{reason="overlap"} 1');
    expect(text).toContain('ocs_sync_consecutive_failures 1');
    expect(text).toContain('ocs_sync_run_duration_seconds_sum{kind="incremental",status="ok"} 42');
    // Lag is computed at scrape time from the newest updated_at that readFacts reported.
    expect(text).toMatch(/ocs_sync_resource_lag_seconds\{resource="chat_messages"\} 90\n/);
    expect(text).toContain('ocs_sync_resource_rows{resource="chat_messages"} 10');
    expect(text).toMatch(/ocs_sync_last_success_timestamp_seconds \d{10}/);
    expect(text).toMatch(/^process_resident_memory_bytes /m);
  });

  it("sends each run's gauges to its exporter once the run is counted: the warehouse's record, never at start nor when unread", async () => {
    const sent: string[] = [];
    const exporter: RunExporter = {
      export: async (registry) => void sent.push(await registry.metrics()),
    };
    const { runs, cron, clock, warehouse } = await start({ exporter });
    expect(sent).toEqual([]);
    // The warehouse records the start's run as the initial load.
    warehouse.lastRun = {
      kind: 'initial',
      status: 'ok',
      startedAt: clock.now(),
      finishedAt: clock.now() + 5_000,
      rows: 70,
      pages: 7,
      requests: 9,
    };
    warehouse.lastSuccessAt = clock.now() + 5_000;
    runs.last().succeed(syncReport());
    await daemon!.scheduler.whenIdle();
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^ocs_sync_last_run_status\{kind="initial",status="ok"\} 1$/m);
    expect(sent[0]).toMatch(/^ocs_sync_last_run_rows 70$/m);
    expect(sent[0]).toMatch(/^ocs_sync_schedule_interval_seconds 900$/m);
    expect(sent[0]).not.toMatch(/_total/);
    expect(daemon!.scheduler.status().lastRun?.kind).toBe('initial');
    expect((await daemon!.metrics.render()).body).toContain(
      'ocs_sync_runs_total{kind="initial",status="ok"} 1',
    );

    // A run after which the warehouse cannot be read is not sent: its push would not carry the
    // last success, and the group keeps the last run's.
    warehouse.unreadable = true;
    clock.advance(15 * 60_000);
    cron.job(/incremental/).fire();
    runs.last().fail(new Error('boom'));
    await daemon!.scheduler.whenIdle();
    expect(sent).toHaveLength(1);
  });

  it('stops on the signal: cron jobs stopped, run aborted, server closed, cleanups in reverse', async () => {
    const { runs, cron, cleaned } = await start();
    const url = daemon!.healthServer!.url;
    const run = runs.last();
    expect(run.argument.signal.aborted).toBe(false);
    controller.abort();
    await expect(daemon!.stopped).resolves.toEqual({ abandonedRun: false });
    expect(run.argument.signal.aborted).toBe(true);
    expect(cron.jobs.every((job) => job.stopped)).toBe(true);
    expect(cleaned).toEqual(['caller part']);
    expect(daemon!.scheduler.status().lastRun?.status).toBe('interrupted');
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it('gives up on a run that does not stop within the grace time', async () => {
    controller = new AbortController();
    const runs = pendingRuns<DaemonSyncRequest, SyncReport>();
    daemon = await startDaemon({
      schedule: '*/15 * * * *',
      fullRefreshSchedule: null,
      timezone: 'UTC',
      health: { listen: null, maxAgeSeconds: 60 },
      logger: silentLogger(),
      signal: controller.signal,
      sync: runs.run,
      scheduleFunction: manualCron().schedule,
      shutdownGraceMs: 20,
    });
    controller.abort();
    await expect(daemon.stopped).resolves.toEqual({ abandonedRun: true });
  });

  it('refuses a health address already in use, with a clear error', async () => {
    const { daemon: first } = await start();
    const { port } = first.healthServer!.address;
    const other = new AbortController();
    await expect(
      startDaemon({
        schedule: '*/15 * * * *',
        fullRefreshSchedule: null,
        timezone: 'UTC',
        health: { listen: { host: '127.0.0.1', port }, maxAgeSeconds: 60 },
        logger: silentLogger(),
        signal: other.signal,
        sync: () => Promise.reject(new Error('must not run')),
        scheduleFunction: manualCron().schedule,
      }),
    ).rejects.toThrow(
      /health.listen 127.0.0.1:\d+ cannot be opened: the address is already in use/,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// The real thing: `ocs-sync daemon` (and startDaemon with the real syncOnce) against the fake
// export server, into SQLite in a temporary folder.

/** Rows of each resource at or before its stored cursor in the source's walk order. */
function sourceIdsUpToCursor(
  dataset: FakeDataset,
  resource: string,
  cursor: string | null,
): string[] {
  if (cursor === null) return [];
  const kind = dataset.cursorKind(resource);
  const decoded = decodeCursor(kind, cursor);
  return dataset
    .rows(resource)
    .filter((row) => {
      const id = BigInt(row.id);
      if (decoded.kind === 'pk') return id <= BigInt(decoded.id);
      const micros = parseTimestamp(String(row.updated_at))!;
      return (
        micros < decoded.updatedAtMicros ||
        (micros === decoded.updatedAtMicros && id <= BigInt(decoded.id))
      );
    })
    .map((row) => String(row.id))
    .sort();
}

describe('ocs-sync daemon against the fake export server', () => {
  let server: FakeServer | undefined;
  let warehouse: TestWarehouse | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await warehouse?.dispose();
    warehouse = undefined;
  });

  const startServer = async (dataset: FakeDataset, dialect: 'sqlite' | 'postgres' = 'sqlite') => {
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    warehouse = await createTestWarehouse(dialect);
    return server;
  };

  /** `main(['daemon'])` in-process; resolves its exit code. The health port comes from the logs. */
  const launch = (env: Record<string, string>) => {
    const controller = new AbortController();
    let logs = '';
    const logStream = new Writable({
      write(chunk, _encoding, callback) {
        logs += chunk.toString();
        callback();
      },
    });
    const stderr: string[] = [];
    const exit = main(['daemon'], {
      env: {
        OCS_LOG_LEVEL: 'debug',
        OCS_HEALTH_LISTEN: '127.0.0.1:0',
        // Only the start-up run happens during a test.
        OCS_SCHEDULE: '0 0 1 1 *',
        OCS_FULL_REFRESH_SCHEDULE: 'off',
        ...syncEnv(server!.url, warehouse!.env, { OCS_PAGE_SIZE: '7' }),
        ...env,
      },
      output: { out: () => undefined, err: (line) => stderr.push(line) },
      logStream,
      signal: controller.signal,
    });
    const healthUrl = () =>
      waitFor(() => /"listen":"(127\.0\.0\.1:\d+)"/.exec(logs)?.[1], 'the health server').then(
        (listen) => `http://${listen}`,
      );
    return { controller, exit, logs: () => logs, stderr, healthUrl };
  };

  it('syncs at start, reports healthy with metrics, and exits 0 on the signal', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 15, seed: 21 });
    await startServer(dataset);
    const daemon = launch({});
    const url = await daemon.healthUrl();

    const health = await waitFor(async () => {
      const response = await fetch(`${url}/healthz`);
      const body = (await response.json()) as Record<string, unknown>;
      return body.lastRunStatus !== null && { status: response.status, body };
    }, 'the first run');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({
      status: 'ok',
      lastRunStatus: 'ok',
      consecutiveFailures: 0,
    });
    expect(typeof health.body.lastSuccessAt).toBe('string');
    await expectWarehouseEqualsSource(warehouse!, dataset);

    const metrics = await (await fetch(`${url}/metrics`)).text();
    const rowsOf = (resource: string) =>
      Number(
        new RegExp(`^ocs_sync_rows_synced_total\\{resource="${resource}"\\} (\\d+)$`, 'm').exec(
          metrics,
        )?.[1],
      );
    expect(rowsOf('chat_messages')).toBe(dataset.count('chat_messages'));
    expect(rowsOf('users')).toBe(dataset.count('users'));
    expect(metrics).toMatch(/^ocs_sync_runs_total\{kind="initial",status="ok"\} 1$/m);
    expect(metrics).toMatch(/^ocs_sync_pages_total\{resource="chat_messages"\} [3-9]$/m);
    expect(metrics).toMatch(/^ocs_sync_http_requests_total\{status="200",outcome="ok"\} \d+$/m);
    expect(metrics).toMatch(/^ocs_sync_resource_lag_seconds\{resource="chat_messages"\} \d/m);
    expect(metrics).toMatch(
      /^ocs_sync_schema_changes_total\{kind="create_table",reason="schema"\} \d+$/m,
    );
    expect(metrics).toMatch(/^ocs_sync_last_success_timestamp_seconds \d{10}/m);
    expect(metrics).toMatch(/^ocs_sync_consecutive_failures 0$/m);
    expect(metrics).toMatch(
      /^ocs_sync_run_duration_seconds_count\{kind="initial",status="ok"\} 1$/m,
    );

    daemon.controller.abort();
    expect(await daemon.exit).toBe(0);
    expect(daemon.stderr).toEqual([]);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it.each(testDialects)(
    'keeps its warehouse open between runs, and catches up once it was removed (%s)',
    async (dialect) => {
      const dataset = createSampleDataset({ rowsPerResource: 4, seed: 31 });
      await startServer(dataset, dialect);
      const daemon = launch({ OCS_SCHEDULE: '* * * * * *' });
      const url = await daemon.healthUrl();
      const runsOf = async (kind: string) => {
        const metrics = await (await fetch(`${url}/metrics`)).text();
        const found = new RegExp(
          `^ocs_sync_runs_total\\{kind="${kind}",status="ok"\\} (\\d+)$`,
          'm',
        );
        return Number(found.exec(metrics)?.[1] ?? 0);
      };
      const opened = () => daemon.logs().split('"msg":"Opened the warehouse"').length - 1;
      await waitFor(async () => (await runsOf('incremental')) >= 2, 'two runs after the first');
      expect(await runsOf('initial')).toBe(1);
      // SQLite's file is kept open; a PostgreSQL pool is not kept between runs (its connections).
      if (dialect === 'sqlite') expect(opened()).toBe(1);
      else expect(opened()).toBeGreaterThanOrEqual(3);

      // Removed between runs (a warehouse started over): the next run makes a new one, in full.
      if (dialect === 'sqlite') {
        const path = warehouse!.env.OCS_WAREHOUSE_URL!;
        for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
      } else {
        await warehouse!.query(`DROP SCHEMA "${warehouse!.env.OCS_WAREHOUSE_SCHEMA}" CASCADE`);
      }
      await waitFor(
        async () => (await runsOf('initial')) === 2,
        'a first run of the new warehouse',
      );
      if (dialect === 'sqlite') {
        // The file kept open is not the one at the path any more: the new one is opened.
        expect(daemon.logs()).toContain(
          'Opening the warehouse afresh: the one kept since the last run cannot be used',
        );
        expect(daemon.logs()).toContain('was replaced or removed');
        expect(opened()).toBe(2);
      }
      await expectWarehouseEqualsSource(warehouse!, dataset);

      daemon.controller.abort();
      expect(await daemon.exit).toBe(0);
      expect(daemon.stderr).toEqual([]);
    },
  );

  it('keeps running and reports 503 when the server refuses the key', async () => {
    await startServer(createSampleDataset({ rowsPerResource: 3, seed: 2 }));
    const daemon = launch({ OCS_API_KEY: 'wrong-key' });
    const url = await daemon.healthUrl();
    const health = await waitFor(async () => {
      const response = await fetch(`${url}/healthz`);
      const body = (await response.json()) as Record<string, unknown>;
      return body.lastRunStatus !== null && { status: response.status, body };
    }, 'the first run');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({
      status: 'unhealthy',
      lastRunStatus: 'failed',
      consecutiveFailures: 1,
      lastSuccessAt: null,
    });
    expect(String(health.body.reason)).toMatch(/HTTP 401/);
    expect(String(health.body.reason)).not.toContain('wrong-key');
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^ocs_sync_runs_total\{kind="initial",status="failed"\} 1$/m);
    expect(metrics).toMatch(/^ocs_sync_http_requests_total\{status="401",outcome="error"\} 1$/m);
    daemon.controller.abort();
    expect(await daemon.exit).toBe(0);
    expect(daemon.logs()).not.toContain('wrong-key');
  });

  it('exits 1 at start, before serving or syncing, when the private key cannot be used', async () => {
    await startServer(createSampleDataset({ rowsPerResource: 3, seed: 2 }));
    const daemon = launch({
      OCS_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----',
    });
    expect(await daemon.exit).toBe(1);
    expect(daemon.stderr.join('\n')).toMatch(/key/i);
    expect(daemon.logs()).not.toContain('Serving /healthz');
    expect(server!.requests).toEqual([]);
  });

  it('on the signal mid-walk, stops with exit 0 and leaves rows and cursors that agree; a resumed sync completes exactly', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 30, seed: 8 });
    await startServer(dataset);
    const daemon = launch({});
    let pagesServed = 0;
    server!.options.onPageServed = async ({ resource, pageIndex }) => {
      pagesServed += 1;
      // Well into the walk, in the middle of a resource with several pages: once pages of it
      // have committed, while the next one is held back.
      if (resource === 'chat_messages' && pageIndex === 3) {
        await waitFor(
          async () => (await warehouse!.readTable('chat_messages')).length > 0 || undefined,
          'pages of chat_messages to commit',
        );
        daemon.controller.abort();
      }
    };
    expect(await daemon.exit).toBe(0);
    server!.options.onPageServed = undefined;
    expect(pagesServed).toBeGreaterThan(10);
    expect(daemon.logs()).toMatch(/"status":"interrupted"|interrupted/);

    const opened = await openWarehouse({ url: warehouse!.env.OCS_WAREHOUSE_URL! });
    try {
      let partlyStored = 0;
      for (const resource of dataset.resources()) {
        const state = await opened.bookkeeping.getResourceState(resource);
        const cursor = state?.cursor ?? null;
        const expected = sourceIdsUpToCursor(dataset, resource, cursor);
        const stored = (await opened.describeTable(resource))
          ? (await warehouse!.readTable(resource, { includeDeleted: true }))
              .map((row) => String(row.id))
              .sort()
          : [];
        expect(stored, `${resource}: rows agree with cursor ${cursor}`).toEqual(expected);
        if (expected.length > 0 && expected.length < dataset.count(resource)) partlyStored += 1;
      }
      // The walk really stopped inside chat_messages.
      expect(partlyStored).toBeGreaterThanOrEqual(1);
      const stored = await opened.bookkeeping.getResourceState('chat_messages');
      expect(stored?.cursor).not.toBeNull();
    } finally {
      await opened.close();
    }

    // The writer lock was released: a sync that will not wait for it goes through, and resumes.
    const directory = temporaryDirectory();
    try {
      const configFile = join(directory.path, 'no-wait.yaml');
      writeFileSync(configFile, 'lock:\n  wait_seconds: 0\n');
      const resumed = await runCli(
        ['--config', configFile, 'sync'],
        syncEnv(server!.url, warehouse!.env, { OCS_PAGE_SIZE: '7' }),
      );
      expect(resumed.stderr).toBe('');
      expect(resumed.code).toBe(0);
    } finally {
      directory.remove();
    }
    await expectWarehouseEqualsSource(warehouse!, dataset);
  });
});

/**
 * startDaemon running the real sync (syncOnce) of `config` on a manual cron; `overrides` replace
 * its options, `onRun` sees each run's request.
 */
async function startRealDaemon(
  config: Config,
  signal: AbortSignal,
  overrides: Partial<DaemonOptions> = {},
  onRun?: (request: DaemonSyncRequest) => void,
) {
  const logger = silentLogger();
  const cron = manualCron();
  const daemon = await startDaemon({
    schedule: config.schedule,
    fullRefreshSchedule: config.fullRefreshSchedule,
    timezone: config.timezone,
    health: config.health,
    logger,
    signal,
    scheduleFunction: cron.schedule,
    sync: (request) => {
      onRun?.(request);
      return syncOnce(config, logger, {
        fullRefresh: request.kind === 'full_refresh' ? FULL_REFRESH_ALL : undefined,
        signal: request.signal,
        events: request.events,
        onAttempt: request.onAttempt,
      });
    },
    ...overrides,
  });
  return { daemon, cron };
}

describe('startDaemon with the real sync: full refresh on its schedule', () => {
  it('runs the full refresh tick as a full refresh, reconciling deletions into the metrics', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 4 });
    const server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const warehouse = await createTestWarehouse('sqlite');
    const controller = new AbortController();
    try {
      const config = loadConfig({
        env: syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '5', OCS_HEALTH_LISTEN: 'off' }),
        needs: { server: true },
      });
      const { daemon, cron } = await startRealDaemon(config, controller.signal, {
        readFacts: async () => {
          const reader = await openWarehouseReader({ url: config.warehouse.url });
          try {
            return await readWarehouseFacts(reader);
          } finally {
            await reader.close();
          }
        },
      });
      expect(daemon.healthServer).toBeUndefined();
      expect(cron.jobs.map((job) => job.cronExpression)).toEqual(['*/15 * * * *', '0 3 * * 0']);
      // A tick while the start-up run is going is skipped.
      cron.job(/incremental/).fire();
      await daemon.scheduler.whenIdle();
      expect(daemon.scheduler.status().lastRun).toMatchObject({
        kind: 'initial',
        status: 'ok',
      });

      const gone = dataset.ids('chat_messages').slice(0, 3);
      dataset.remove('chat_messages', gone);
      cron.job(/full refresh/).fire();
      expect(daemon.scheduler.status().running?.kind).toBe('full_refresh');
      await daemon.scheduler.whenIdle();
      expect(daemon.scheduler.status().lastRun).toMatchObject({
        kind: 'full_refresh',
        status: 'ok',
      });
      expect(daemon.health()).toMatchObject({ status: 'ok', httpStatus: 200 });
      await expectWarehouseEqualsSource(warehouse, dataset);

      const metrics = (await daemon.metrics.render()).body;
      expect(metrics).toMatch(/^ocs_sync_skipped_ticks_total\{reason="overlap"\} 1$/m);
      expect(metrics).toMatch(/^ocs_sync_rows_deleted_total\{resource="chat_messages"\} 3$/m);
      expect(metrics).toContain(
        `ocs_sync_rows_reconciled_total{resource="chat_messages"} ${dataset.count('chat_messages')}`,
      );
      expect(metrics).toMatch(/^ocs_sync_runs_total\{kind="full_refresh",status="ok"\} 1$/m);
      expect(metrics).toMatch(/^ocs_sync_runs_total\{kind="initial",status="ok"\} 1$/m);
      expect(metrics).toContain(
        `ocs_sync_resource_rows{resource="chat_messages"} ${dataset.count('chat_messages')}`,
      );
      expect(metrics).toMatch(/^ocs_sync_resource_deleted_rows\{resource="chat_messages"\} 3$/m);
      // File contents: fetched by the first run, unchanged by the full refresh.
      const withContent = dataset.rows('files').filter((row) => sampleFileContent(row) !== null);
      expect(metrics).toContain(`ocs_sync_files{status="ok"} ${withContent.length}`);
      expect(metrics).toContain(`ocs_sync_files_fetched_total ${withContent.length}`);
      expect(metrics).toMatch(/^ocs_sync_file_bytes_stored [1-9]\d*$/m);
    } finally {
      controller.abort();
      await server.close();
      await warehouse.dispose();
    }
  });
});

/** What hangs on a signal: its abort listeners, and (Node 20) the dependants AbortSignal.any left. */
function attachedTo(signal: AbortSignal): { listeners: number; dependants: number | undefined } {
  // Node keeps AbortSignal.any's dependants in a Set of WeakRefs under a private symbol; look it
  // up by its description, and say "unknown" when a Node version keeps them otherwise.
  const key = Object.getOwnPropertySymbols(signal).find(
    (symbol) => symbol.description === 'kDependantSignals',
  );
  const dependants = key ? (signal as unknown as Record<symbol, unknown>)[key] : undefined;
  return {
    listeners: getEventListeners(signal, 'abort').length,
    dependants: key === undefined ? 0 : (dependants as { size?: number } | undefined)?.size,
  };
}

describe('the daemon over many runs in one process', () => {
  it('counts what hangs on a signal: listeners and the dependants AbortSignal.any leaves', () => {
    const probe = new AbortController().signal;
    const any = AbortSignal.any([probe]);
    // Node 20 and 22 both keep the dependants where attachedTo looks: the count below is real.
    expect(attachedTo(probe)).toEqual({ listeners: 0, dependants: 1 });
    expect(any.aborted).toBe(false);
  });

  it('links a short-lived controller to a long-lived signal until it is released', () => {
    const parent = new AbortController();
    const first = linkedAbortController(parent.signal);
    const second = linkedAbortController(parent.signal);
    expect(attachedTo(parent.signal)).toEqual({ listeners: 2, dependants: 0 });
    first.release();
    first.release();
    second.abort(new Error('this part only'));
    expect(second.signal.aborted).toBe(true);
    // Released, or aborted on its own: nothing of either is left on the parent.
    expect(attachedTo(parent.signal).listeners).toBe(0);
    const third = linkedAbortController(parent.signal);
    parent.abort(new Error('shutdown'));
    expect(third.signal.reason).toEqual(new Error('shutdown'));
    expect(first.signal.aborted).toBe(false);
    expect(linkedAbortController(parent.signal).signal.aborted).toBe(true);
    expect(linkedAbortController(undefined).signal.aborted).toBe(false);
  });

  it('hangs nothing more on the daemon signal after 8 runs than after the first: runs, walks and requests release theirs', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 28 });
    const server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      // Retries and their backoff sleeps hang listeners too.
      randomFaults: { seed: 28, rate: 0.05, kinds: [{ kind: 'status', status: 503 }] },
    });
    const warehouse = await createTestWarehouse('sqlite');
    const directory = temporaryDirectory();
    const controller = new AbortController();
    try {
      const configFile = join(directory.path, 'config.yaml');
      writeFileSync(configFile, FAST_RETRIES_YAML);
      const config = loadConfig({
        env: syncEnv(server.url, warehouse.env, {
          OCS_PAGE_SIZE: '4',
          OCS_HEALTH_LISTEN: 'off',
          OCS_CONFIG: configFile,
        }),
        needs: { server: true },
      });
      const runSignals: AbortSignal[] = [];
      const { daemon, cron } = await startRealDaemon(config, controller.signal, {}, (request) =>
        runSignals.push(request.signal),
      );
      const random = new SeededRandom(28);
      const runOnce = async (run: number) => {
        // Steady change: new rows and files, edits, and deletions for the full refreshes (runs 4
        // and 8, the last).
        dataset.insert('chat_messages', 3);
        dataset.insert('files', 1);
        dataset.edit('participants', [dataset.randomId('participants', random)!]);
        dataset.remove('chat_messages', [dataset.randomId('chat_messages', random)!]);
        cron.job(run % 4 === 0 ? /full refresh/ : /incremental/).fire();
        await daemon.scheduler.whenIdle();
        expect(daemon.scheduler.status().lastRun?.status, `run ${run}`).toBe('ok');
        // Each run's own signal: its walks and requests left nothing on it either.
        expect(attachedTo(runSignals.at(-1)!), `run ${run}`).toEqual({
          listeners: 0,
          dependants: 0,
        });
      };
      await daemon.scheduler.whenIdle();
      await runOnce(1);
      const early = attachedTo(controller.signal);
      const pagesEarly = server.requests.length;
      for (let run = 2; run <= 8; run += 1) await runOnce(run);
      // The runs really walked pages, retried and fetched files in between.
      expect(server.requests.length - pagesEarly).toBeGreaterThan(7 * 30);
      expect(server.requests.some((request) => request.fault !== undefined)).toBe(true);
      expect(
        server.requests.filter((request) => request.endpoint === FILE_CONTENT_ENDPOINT).length,
      ).toBeGreaterThan(7);
      expect(attachedTo(controller.signal)).toEqual(early);
      // Only the daemon's own shutdown listener is left.
      expect(early.listeners).toBe(1);
      expect(early.dependants ?? 0).toBe(0);
      await expectWarehouseEqualsSource(warehouse, dataset);
    } finally {
      controller.abort();
      await server.close();
      await warehouse.dispose();
      directory.remove();
    }
  });
});

describe('/healthz counts every stage that moves', () => {
  let cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const step of cleanup.reverse()) await step();
    cleanup = [];
  });

  /** The real sync under startDaemon, on a manual clock, health on a free port. */
  const startWithRealSync = async (dataset: FakeDataset, maxAgeSeconds: number) => {
    const server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const warehouse = await createTestWarehouse('sqlite');
    const controller = new AbortController();
    cleanup.push(
      () => server.close(),
      () => warehouse.dispose(),
    );
    const config = loadConfig({
      env: syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '5', OCS_FILES_CONCURRENCY: '1' }),
      needs: { server: true },
    });
    const clock = new ManualClock();
    const { daemon } = await startRealDaemon(config, controller.signal, {
      fullRefreshSchedule: null,
      health: { listen: { host: '127.0.0.1', port: 0 }, maxAgeSeconds },
      clock,
    });
    cleanup.push(async () => {
      controller.abort();
      await daemon.stopped;
    });
    const health = async () => {
      const response = await fetch(`${daemon.healthServer!.url}/healthz`);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    return { server, daemon, clock, health };
  };

  it('stays 200 through a first sync whose file downloads outlast max_age_seconds, and turns 503 when they stall', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 5 });
    const files = dataset.count('files');
    const withContent = dataset.rows('files').filter((row) => sampleFileContent(row) !== null);
    expect(withContent.length).toBeGreaterThanOrEqual(6);
    const { server, daemon, clock, health } = await startWithRealSync(dataset, 60);

    const seen: Array<{ status: number; body: Record<string, unknown> }> = [];
    const started = new Set<string>();
    let stalled!: () => void;
    const stall = new Promise<void>((resolve) => (stalled = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    server.options.onFileContent = async ({ fileId }) => {
      if (started.has(fileId)) return;
      started.add(fileId);
      // Each download takes two thirds of the max age on the daemon's clock: together they
      // outlast it many times over, while every one of them moves the stage.
      clock.advance(40_000);
      seen.push(await health());
      if (started.size === 4) {
        stalled();
        await released;
      }
    };
    await stall;
    // The fourth download hangs: nothing moves for longer than the max age. (The file before it
    // may have gone into place after the fourth began: its last move is then 40 s later.)
    clock.advance(61_000);
    const stuck = await health();
    expect(stuck.status).toBe(503);
    expect(stuck.body).toMatchObject({ status: 'unhealthy', running: true, lastSuccessAt: null });
    expect(stuck.body.stage).toMatch(
      new RegExp(`^downloading file contents: \\d of ${files} files$`),
    );
    expect(String(stuck.body.reason)).toMatch(
      /nothing has moved for (61|101) s \(stuck at downloading file contents: \d of \d+ files\)/,
    );
    release();
    await daemon.scheduler.whenIdle();
    server.options.onFileContent = undefined;

    // Every download was moving: 200, the stage named with how far it was.
    expect(seen.length).toBeGreaterThanOrEqual(4);
    expect(clock.time - Date.parse('2026-01-05T10:00:00Z')).toBeGreaterThan(3 * 60_000);
    for (const [index, { status, body }] of seen.entries()) {
      expect(status, `download ${index + 1}`).toBe(200);
      expect(body.stage).toMatch(new RegExp(`^downloading file contents: \\d+ of ${files} files$`));
      // The last move: the file before in hand (40 s ago), or, just now, gone into place (0 s).
      expect(String(body.reason)).toMatch(
        /A run is in progress and moved (40|0) s ago \(downloading/,
      );
    }
    expect(daemon.scheduler.status().lastRun).toMatchObject({ status: 'ok' });
    expect(await health()).toMatchObject({ status: 200, body: { stage: null, running: false } });
  });

  it('reports each step of every stage of a run: pages, deletion marking, relationships, files', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 6 });
    const server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const warehouse = await createTestWarehouse('sqlite');
    cleanup.push(
      () => server.close(),
      () => warehouse.dispose(),
    );
    const config = loadConfig({
      env: syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '5' }),
      needs: { server: true },
    });
    const run = async (fullRefresh: boolean) => {
      // Each step as the daemon's /healthz would name it at that moment.
      const steps: string[] = [];
      const onProgress = (progress: StageProgress) => steps.push(describeProgress(progress));
      await syncOnce(config, silentLogger(), {
        fullRefresh: fullRefresh ? FULL_REFRESH_ALL : undefined,
        events: { onProgress },
      });
      return steps;
    };
    const files = dataset.count('files');
    const first = await run(false);
    const messages = dataset.count('chat_messages');
    expect(first).toContain(`syncing chat_messages: ${messages} rows`);
    expect(first).toContain('syncing chat_messages: 5 rows');
    expect(first).toContain('finding relationships and creating indexes');
    expect(first).toContain(`downloading file contents: 0 of ${files} files`);
    expect(first.at(-1)).toBe(`downloading file contents: ${files} of ${files} files`);

    dataset.remove('chat_messages', dataset.ids('chat_messages').slice(0, 2));
    const refresh = await run(true);
    const marking = 'marking rows of chat_messages the server no longer has';
    expect(refresh).toContain(`full refresh of chat_messages: ${messages - 2} rows`);
    expect(refresh.indexOf(marking)).toBeGreaterThan(
      refresh.indexOf(`full refresh of chat_messages: ${messages - 2} rows`),
    );
    expect(refresh[refresh.indexOf(marking) + 1]).toBe(`${marking}: 2 rows`);
    // Nothing left to download: the stage says so, and nothing more.
    expect(refresh.at(-1)).toBe('downloading file contents: 0 of 0 files');
  });

  it("counts the audit archive's work as progress: chained pages, then the signed checkpoint", async () => {
    const dataset = createSampleDataset({ rowsPerResource: 6, seed: 8 });
    const server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const warehouse = await createTestWarehouse('sqlite');
    const keysDirectory = mkdtempSync(join(tmpdir(), 'ocs-sync-audit-progress-'));
    cleanup.push(
      () => server.close(),
      () => warehouse.dispose(),
      () => rmSync(keysDirectory, { recursive: true, force: true }),
    );
    const keys = await makeAuditKeys(keysDirectory);
    const config = loadConfig({
      env: syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '5', ...auditEnv(keys) }),
      needs: { server: true },
    });
    const steps: string[] = [];
    const onProgress = (progress: StageProgress) => steps.push(describeProgress(progress));
    await syncOnce(config, silentLogger(), { events: { onProgress } });
    expect(steps).toContain(`syncing chat_messages: ${dataset.count('chat_messages')} rows`);
    expect(steps.slice(-2)).toEqual([
      'signing the audit checkpoint: 0 of 1 checkpoints',
      'signing the audit checkpoint: 1 of 1 checkpoints',
    ]);
  });
});
