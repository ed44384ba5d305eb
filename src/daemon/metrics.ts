/**
 * Prometheus metrics of a team's runs, on registries of their own (never prom-client's global
 * one, so tests and embedders can hold several). Fed by the engine's SyncEvents, the HTTP
 * source's per-attempt events, the scheduler, and what the warehouse says after each run
 * (warehouse-facts.ts). `registry` is everything the daemon serves on /metrics; `runRegistry` is
 * the gauges of the last run alone (Prometheus's batch-job conventions), which a run that exits
 * pushes to a Pushgateway or writes for node_exporter (run-export.ts): no counters, whose values
 * would restart with every process. In a fleet each team has its own, every series labelled with
 * `team`, and `renderMetrics` puts them together.
 */
import {
  AggregatorRegistry,
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';
import type { ErrorKind } from '../errors.js';
import type { RunKind, RunStatus } from '../interfaces.js';
import { isSafeResourceName } from '../names.js';
import type { RequestEvent } from '../source/http-source.js';
import type { ResourceReport, SyncEvents } from '../sync/engine.js';
import type { SchedulerClock, SkipReason } from './scheduler.js';
import type { WarehouseFacts } from './warehouse-facts.js';

export const METRIC_PREFIX = 'ocs_sync_';

/** The `resource` of every name the manifest gives that is not a table name (the engine skips it). */
export const INVALID_RESOURCE_LABEL = 'invalid';
/** A label the server feeds past its cap of values: every further value counts under this one. */
export const OTHER_LABEL_VALUE = 'other';
/** Distinct `resource` values (a real team has a few dozen resources) and `status` values. */
export const MAX_RESOURCE_LABELS = 500;
export const MAX_STATUS_LABELS = 50;

/**
 * The values a label fed by the server may take: the first `max` distinct ones, then `other`.
 * Counters never forget a series, so a server that names something new every run would otherwise
 * grow the memory of every team in the process (and Prometheus's) without end.
 */
class CappedLabel {
  private readonly seen = new Set<string>();

  constructor(private readonly max: number) {}

  value(raw: string): string {
    if (this.seen.has(raw)) return raw;
    if (this.seen.size >= this.max) return OTHER_LABEL_VALUE;
    this.seen.add(raw);
    return raw;
  }
}

export interface SyncMetricsOptions {
  clock?: SchedulerClock;
  /** Also export prom-client's default process metrics (CPU, memory, event loop). */
  processMetrics?: boolean;
  /** Every series is labelled `team` with it (a fleet's team, or `metrics.team`). */
  team?: string;
  /** A fleet's team: the fleet's own series (waiting for a slot, stalled runs) are added. */
  fleet?: boolean;
}

/** A run as the process saw it end (the warehouse's record refines it: `warehouseFacts`). */
export interface FinishedRun {
  kind: RunKind;
  status: Exclude<RunStatus, 'running'>;
  durationMs: number;
  finishedAt: number;
  consecutiveFailures: number;
  /** What kind of error failed it (absent: it did not fail, or nothing says why). */
  errorKind?: ErrorKind;
}

export class SyncMetrics {
  readonly registry = new Registry();
  /** The last run's gauges alone: what a push or the textfile carries. */
  readonly runRegistry = new Registry();
  private readonly clock: SchedulerClock;
  /** Newest stored `updated_at` per resource label, epoch ms; lag is computed at scrape time. */
  private readonly newestUpdatedAt = new Map<string, number>();
  private readonly resources = new CappedLabel(MAX_RESOURCE_LABELS);
  private readonly statuses = new CappedLabel(MAX_STATUS_LABELS);

  private readonly rowsSynced: Counter<'resource'>;
  private readonly pages: Counter<'resource'>;
  private readonly httpRequests: Counter<'status' | 'outcome'>;
  private readonly httpRequestDuration: Histogram<'outcome'>;
  private readonly httpRetries: Counter;
  private readonly runs: Counter<'kind' | 'status'>;
  private readonly runDuration: Histogram<'kind' | 'status'>;
  private readonly lastRunDuration: Gauge;
  private readonly lastRunAt: Gauge;
  private readonly lastRunStatus: Gauge<'kind' | 'status' | 'error'>;
  private readonly lastRunRows: Gauge;
  private readonly lastRunPages: Gauge;
  private readonly lastRunRequests: Gauge;
  private readonly lastRunRetries: Gauge;
  private readonly scheduleInterval: Gauge;
  private readonly lastSuccess: Gauge;
  private readonly consecutiveFailures: Gauge;
  private readonly runInProgress: Gauge;
  private readonly skippedTicks: Counter<'reason'>;
  private readonly rowsReconciled: Counter<'resource'>;
  private readonly rowsDeleted: Counter<'resource'>;
  private readonly resourceProblems: Counter<'resource' | 'status'>;
  private readonly schemaChanges: Counter<'kind' | 'reason'>;
  private readonly storedRows: Gauge<'resource'>;
  private readonly resourceLastSuccess: Gauge<'resource'>;
  private readonly newestRowAt: Gauge<'resource'>;
  private readonly resourceLastError: Gauge<'resource' | 'kind'>;
  private readonly auditBroken: Gauge;
  private readonly auditLastVerify: Gauge;
  private readonly auditLastCheckpoint: Gauge;
  private readonly auditCheckpointFailed: Gauge;
  private readonly storedDeletedRows: Gauge<'resource'>;
  private readonly storedFiles: Gauge<'status'>;
  private readonly storedFileBytes: Gauge;
  private readonly filesFetched: Counter;
  private readonly fileBytesFetched: Counter;
  private readonly fileFetchFailures: Counter;
  private readonly waitingForSlotGauge: Gauge | undefined;
  private readonly stalledRuns: Counter | undefined;

  constructor(options: SyncMetricsOptions = {}) {
    this.clock = options.clock ?? { now: () => Date.now() };
    const registers = [this.registry];
    // The last run's gauges: on /metrics, and what a run that exits pushes.
    const both = [this.registry, this.runRegistry];
    const name = (suffix: string) => `${METRIC_PREFIX}${suffix}`;

    this.rowsSynced = new Counter({
      name: name('rows_synced_total'),
      help: 'Rows written to the warehouse (upserts), by resource.',
      labelNames: ['resource'],
      registers,
    });
    this.pages = new Counter({
      name: name('pages_total'),
      help: 'Pages committed to the warehouse, by resource.',
      labelNames: ['resource'],
      registers,
    });
    this.httpRequests = new Counter({
      name: name('http_requests_total'),
      help: 'HTTP attempts to the export API, by status (0 = no response) and outcome (ok, retry, error).',
      labelNames: ['status', 'outcome'],
      registers,
    });
    this.httpRequestDuration = new Histogram({
      name: name('http_request_duration_seconds'),
      help: 'Time of one HTTP attempt to the export API, by outcome.',
      labelNames: ['outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.httpRetries = new Counter({
      name: name('http_retries_total'),
      help: 'HTTP attempts that failed transiently (timeout, connection, 5xx, 429) and were retried, or ended the request when attempts ran out.',
      registers,
    });
    this.runs = new Counter({
      name: name('runs_total'),
      help: 'Finished sync runs, by kind (initial, incremental, full_refresh) and status (ok, partial, failed, interrupted).',
      labelNames: ['kind', 'status'],
      registers,
    });
    this.runDuration = new Histogram({
      name: name('run_duration_seconds'),
      help: 'Duration of sync runs, by kind and status.',
      labelNames: ['kind', 'status'],
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400],
      registers,
    });
    this.lastRunDuration = new Gauge({
      name: name('last_run_duration_seconds'),
      help: 'Duration of the last finished sync run.',
      registers: both,
    });
    this.lastRunAt = new Gauge({
      name: name('last_run_timestamp_seconds'),
      help: 'Unix time the last sync run ended, whatever its status.',
      registers: both,
    });
    this.lastRunStatus = new Gauge({
      name: name('last_run_status'),
      help: 'The last sync run, as one series of value 1: its kind (initial, incremental, full_refresh), status (ok, partial, failed, interrupted) and, for a failed one, the kind of error (auth, unavailable, http, ...).',
      labelNames: ['kind', 'status', 'error'],
      registers: both,
    });
    this.lastRunRows = new Gauge({
      name: name('last_run_rows'),
      help: 'Rows the last sync run wrote.',
      registers: both,
    });
    this.lastRunPages = new Gauge({
      name: name('last_run_pages'),
      help: 'Pages the last sync run committed.',
      registers: both,
    });
    this.lastRunRequests = new Gauge({
      name: name('last_run_requests'),
      help: 'HTTP requests the last sync run sent, retries included.',
      registers: both,
    });
    this.lastRunRetries = new Gauge({
      name: name('last_run_http_retries'),
      help: 'HTTP attempts of the last sync run that failed transiently and were retried.',
      registers: both,
    });
    this.scheduleInterval = new Gauge({
      name: name('schedule_interval_seconds'),
      help: 'Seconds between two scheduled runs (the schedule setting; a CronJob gives it its own): the alerts allow a few of them without a success.',
      registers: both,
    });
    this.lastSuccess = new Gauge({
      name: name('last_success_timestamp_seconds'),
      help: 'Unix time of the end of the last successful (ok or partial) run, as the warehouse records it; 0 before the first.',
      registers: both,
    });
    this.consecutiveFailures = new Gauge({
      name: name('consecutive_failures'),
      help: 'Failed runs in a row since the last success, as the warehouse records them; the daemon skips scheduled ticks to back off.',
      registers: both,
    });
    this.runInProgress = new Gauge({
      name: name('run_in_progress'),
      help: '1 while a sync run is in progress, else 0.',
      registers,
    });
    this.skippedTicks = new Counter({
      name: name('skipped_ticks_total'),
      help: 'Scheduled ticks that did not start a run: overlap (a run was in progress) or backoff (after failures).',
      labelNames: ['reason'],
      registers,
    });
    this.rowsReconciled = new Counter({
      name: name('rows_reconciled_total'),
      help: 'Rows re-read and compared by full refreshes, by resource.',
      labelNames: ['resource'],
      registers,
    });
    this.rowsDeleted = new Counter({
      name: name('rows_deleted_total'),
      help: 'Rows found deleted on the server by full refreshes (marked or removed), by resource.',
      labelNames: ['resource'],
      registers,
    });
    this.resourceProblems = new Counter({
      name: name('resource_problems_total'),
      help: 'Resources that a run skipped or failed, by resource and status.',
      labelNames: ['resource', 'status'],
      registers,
    });
    this.schemaChanges = new Counter({
      name: name('schema_changes_total'),
      help: 'Warehouse schema changes applied (create_table, add_column, widen_column), by kind and reason.',
      labelNames: ['kind', 'reason'],
      registers,
    });
    this.storedRows = new Gauge({
      name: name('resource_rows'),
      help: 'Live rows stored per resource table (not marked deleted), as of the last run.',
      labelNames: ['resource'],
      registers: both,
    });
    this.storedDeletedRows = new Gauge({
      name: name('resource_deleted_rows'),
      help: 'Rows kept but marked deleted (gone from the server) per resource table, as of the last run.',
      labelNames: ['resource'],
      registers: both,
    });
    this.resourceLastSuccess = new Gauge({
      name: name('resource_last_success_timestamp_seconds'),
      help: 'Unix time a run last synced the resource to its end; resources the chatbot choice leaves out, and those never synced, have none.',
      labelNames: ['resource'],
      registers: both,
    });
    this.newestRowAt = new Gauge({
      name: name('resource_newest_row_timestamp_seconds'),
      help: 'Newest updated_at stored, as Unix time, per resource that has updated_at (its age is time() minus it).',
      labelNames: ['resource'],
      registers: both,
    });
    this.resourceLastError = new Gauge({
      name: name('resource_last_error'),
      help: '1 for each resource the last run skipped or failed, with the kind of error (skipped, auth, unavailable, http, protocol, too_large, sealed, ...).',
      labelNames: ['resource', 'kind'],
      registers: both,
    });
    this.storedFiles = new Gauge({
      name: name('files'),
      help: 'Files in the ledger by status of their last fetch (ok, missing = 404, failed), as of the last run.',
      labelNames: ['status'],
      registers: both,
    });
    this.storedFileBytes = new Gauge({
      name: name('file_bytes_stored'),
      help: 'Bytes of file contents in the blob store (each distinct content once), as of the last run.',
      registers: both,
    });
    this.auditBroken = new Gauge({
      name: name('audit_broken'),
      help: 'With the audit archive on: 1 when the last `audit verify` found it broken, else 0.',
      registers: both,
    });
    this.auditLastVerify = new Gauge({
      name: name('audit_last_verify_timestamp_seconds'),
      help: 'With the audit archive on: Unix time of the last `audit verify`; 0 before the first.',
      registers: both,
    });
    this.auditLastCheckpoint = new Gauge({
      name: name('audit_last_checkpoint_timestamp_seconds'),
      help: 'With the audit archive on: Unix time of the last signed checkpoint; 0 before the first.',
      registers: both,
    });
    this.auditCheckpointFailed = new Gauge({
      name: name('audit_checkpoint_failed'),
      help: "With a signing key: 1 when the last run's checkpoint could not be signed or appended to the checkpoint file, else 0.",
      registers: both,
    });
    this.filesFetched = new Counter({
      name: name('files_fetched_total'),
      help: 'File contents downloaded and stored.',
      registers,
    });
    this.fileBytesFetched = new Counter({
      name: name('file_bytes_fetched_total'),
      help: 'Bytes of file contents downloaded and stored.',
      registers,
    });
    this.fileFetchFailures = new Counter({
      name: name('file_fetch_failures_total'),
      help: 'File content downloads that failed after every retry (retried on the next run).',
      registers,
    });
    const { clock, newestUpdatedAt } = this;
    new Gauge({
      name: name('resource_lag_seconds'),
      help: 'Now minus the newest updated_at stored, per resource that has updated_at (as of the last run; pushed, as of the push).',
      labelNames: ['resource'],
      registers: both,
      // Computed at scrape time, so lag keeps growing between runs.
      collect() {
        this.reset();
        const now = clock.now();
        for (const [resource, newest] of newestUpdatedAt) {
          this.set({ resource }, Math.max(0, (now - newest) / 1000));
        }
      },
    });

    if (options.team !== undefined) {
      this.registry.setDefaultLabels({ team: options.team });
      this.runRegistry.setDefaultLabels({ team: options.team });
    }
    if (options.fleet) {
      this.waitingForSlotGauge = new Gauge({
        name: name('waiting_for_slot'),
        help: "1 while a run of the team waits for one of the fleet's teams_at_once slots, else 0.",
        registers,
      });
      this.stalledRuns = new Counter({
        name: name('stalled_runs_total'),
        help: 'Runs stopped because nothing moved for health.max_age_seconds (their slot went to the next team).',
        registers,
      });
      this.waitingForSlotGauge.set(0);
      this.stalledRuns.inc(0);
    }
    this.lastSuccess.set(0);
    this.consecutiveFailures.set(0);
    this.runInProgress.set(0);
    for (const reason of ['overlap', 'backoff'] satisfies SkipReason[])
      this.skippedTicks.inc({ reason }, 0);
    this.httpRetries.inc(0);
    // No prefix: stock dashboards look for process_cpu_seconds_total, nodejs_heap_size_*, ….
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** The `resource` label of a name: a name the engine refuses is `invalid`, as is every other. */
  private resourceLabel(name: string): string {
    return isSafeResourceName(name) ? this.resources.value(name) : INVALID_RESOURCE_LABEL;
  }

  /** SyncEvents for one run; combine with others via `combineEvents`. */
  syncEvents(): SyncEvents {
    return {
      onPageWritten: ({ resource, rows }) => {
        const label = this.resourceLabel(resource);
        this.rowsSynced.inc({ resource: label }, rows);
        this.pages.inc({ resource: label });
      },
      onResourceDone: (report: ResourceReport) => {
        const resource = this.resourceLabel(report.resource);
        if (report.fullRefresh && report.status === 'ok') {
          this.rowsReconciled.inc({ resource }, report.rows);
          this.rowsDeleted.inc({ resource }, report.deleted);
        }
        // An excluded resource is the team's chatbot choice, not a problem.
        if (report.status !== 'ok' && report.status !== 'excluded') {
          this.resourceProblems.inc({ resource, status: report.status });
          this.resourceLastError.set({ resource, kind: report.errorKind ?? 'other' }, 1);
        }
      },
      onMissingSettled: ({ resource, deleted }) => {
        this.rowsDeleted.inc({ resource: this.resourceLabel(resource) }, deleted);
      },
      onSchemaChange: (change) => {
        this.schemaChanges.inc({ kind: change.kind, reason: change.reason });
      },
      onFilesDone: (report) => {
        this.filesFetched.inc(report.fetched);
        this.fileBytesFetched.inc(report.bytesFetched);
        this.fileFetchFailures.inc(report.failed);
        for (const status of ['ok', 'missing', 'failed'] as const) {
          this.storedFiles.set({ status }, report.totals[status]);
        }
        this.storedFileBytes.set(report.totals.bytes);
      },
    };
  }

  /** For the HTTP source's `onAttempt`. */
  readonly onAttempt = (event: RequestEvent): void => {
    this.httpRequests.inc({
      status: this.statuses.value(String(event.status)),
      outcome: event.outcome,
    });
    this.httpRequestDuration.observe({ outcome: event.outcome }, event.durationMs / 1000);
    if (event.outcome === 'retry') {
      this.httpRetries.inc();
      this.lastRunRetries.inc();
    }
  };

  /** A run starts: what belongs to the last run starts again. */
  runStarted(): void {
    this.runInProgress.set(1);
    this.resourceLastError.reset();
    this.lastRunRetries.set(0);
  }

  /** A run ended, as the process saw it; `warehouseFacts` then sets what the warehouse recorded. */
  runFinished(info: FinishedRun): void {
    this.runInProgress.set(0);
    this.runs.inc({ kind: info.kind, status: info.status });
    this.runDuration.observe({ kind: info.kind, status: info.status }, info.durationMs / 1000);
    this.setLastRun({ ...info, startedAt: info.finishedAt - info.durationMs });
    if (info.status === 'ok' || info.status === 'partial')
      this.lastSuccess.set(info.finishedAt / 1000);
    this.consecutiveFailures.set(info.consecutiveFailures);
  }

  /**
   * What the warehouse says after a run (or at the daemon's start): the last success, failures in
   * a row, each resource's rows and freshness, the files and the audit archive. `run` names the
   * run this process just made: when the warehouse's last run is it (it started at `since` or
   * later), the last run's gauges take its record (its kind, as `initial`; its rows and pages).
   */
  warehouseFacts(facts: WarehouseFacts, run?: { since: number; errorKind?: ErrorKind }): void {
    const last = facts.lastRun;
    if (run && last && last.finishedAt !== null && last.startedAt >= run.since) {
      this.setLastRun({ ...last, finishedAt: last.finishedAt, errorKind: run.errorKind });
      this.lastRunRows.set(last.rows);
      this.lastRunPages.set(last.pages);
      this.lastRunRequests.set(last.requests);
    }
    this.lastSuccess.set((facts.lastSuccessAt ?? 0) / 1000);
    this.consecutiveFailures.set(facts.consecutiveFailures);
    this.storedRows.reset();
    this.storedDeletedRows.reset();
    this.resourceLastSuccess.reset();
    this.newestRowAt.reset();
    this.newestUpdatedAt.clear();
    // Past the label cap, `other` is the sum of the tables it stands for, and their oldest times.
    const oldest = new Map<string, { synced?: number; newest?: number }>();
    for (const status of facts.resources) {
      const resource = this.resourceLabel(status.resource);
      const labels = { resource };
      // Every resource's counters exist from the start: a rate of 0, not no data.
      this.rowsSynced.inc(labels, 0);
      this.pages.inc(labels, 0);
      this.storedRows.inc(labels, status.rows);
      this.storedDeletedRows.inc(labels, status.rowsDeleted);
      const times = oldest.get(resource) ?? {};
      oldest.set(resource, times);
      const synced = status.lastSuccessAt === null ? NaN : Date.parse(status.lastSuccessAt);
      if (!status.excludedAt && Number.isFinite(synced))
        times.synced = Math.min(synced, times.synced ?? synced);
      const newest = status.newestUpdatedAt === null ? NaN : Date.parse(status.newestUpdatedAt);
      if (Number.isFinite(newest)) times.newest = Math.min(newest, times.newest ?? newest);
    }
    for (const [resource, { synced, newest }] of oldest) {
      if (synced !== undefined) this.resourceLastSuccess.set({ resource }, synced / 1000);
      if (newest !== undefined) {
        this.newestUpdatedAt.set(resource, newest);
        this.newestRowAt.set({ resource }, newest / 1000);
      }
    }
    if (facts.files) {
      for (const status of ['ok', 'missing', 'failed'] as const) {
        this.storedFiles.set({ status }, facts.files[status]);
      }
      this.storedFileBytes.set(facts.files.bytes);
    }
    const { audit } = facts;
    if (audit.enabled) {
      this.auditBroken.set(audit.lastVerification && !audit.lastVerification.intact ? 1 : 0);
      this.auditLastVerify.set((audit.lastVerificationAt ?? 0) / 1000);
      this.auditLastCheckpoint.set((audit.lastCheckpointAt ?? 0) / 1000);
    }
  }

  /** The checkpoint a run ended with (with a signing key): whether it could be written. */
  checkpointWritten(written: boolean): void {
    this.auditCheckpointFailed.set(written ? 0 : 1);
  }

  /** Seconds between two scheduled runs, when known. */
  scheduleIntervalSeconds(seconds: number): void {
    this.scheduleInterval.set(seconds);
  }

  private setLastRun(run: {
    kind: RunKind;
    status: RunStatus;
    startedAt: number;
    finishedAt: number;
    errorKind?: ErrorKind;
  }): void {
    this.lastRunAt.set(run.finishedAt / 1000);
    this.lastRunDuration.set(Math.max(0, run.finishedAt - run.startedAt) / 1000);
    this.lastRunStatus.reset();
    this.lastRunStatus.set(
      {
        kind: run.kind,
        status: run.status,
        ...(run.status === 'failed' ? { error: run.errorKind ?? 'other' } : {}),
      },
      1,
    );
  }

  waitingForSlot(waiting: boolean): void {
    this.waitingForSlotGauge?.set(waiting ? 1 : 0);
  }

  runStalled(): void {
    this.stalledRuns?.inc();
  }

  tickSkipped(reason: SkipReason): void {
    this.skippedTicks.inc({ reason });
  }

  /** The Prometheus text exposition. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/**
 * One exposition of several registries (a fleet's teams, each series labelled with its team, and
 * the process's own): each metric's help and type once, then every registry's series of it.
 */
export async function renderMetrics(
  registries: readonly Registry[],
): Promise<{ contentType: string; body: string }> {
  const all = await Promise.all(registries.map((registry) => registry.getMetricsAsJSON()));
  // Series are told apart by their labels (the team), so no two are ever combined: `first` keeps
  // each as it is (the default aggregators would also leave out process_start_time_seconds).
  const merged = AggregatorRegistry.aggregate(
    all.map((metrics) =>
      metrics.map((metric) => ({ ...metric, aggregator: 'first' as const })),
    ) as Array<Array<MetricObjectWithValues<MetricValue<string>>>>,
  );
  return { contentType: merged.contentType, body: await merged.metrics() };
}
