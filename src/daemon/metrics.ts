/**
 * Prometheus metrics of the daemon, on a registry of their own (never prom-client's global one,
 * so tests and embedders can hold several). Fed by the engine's SyncEvents, the HTTP source's
 * per-attempt events, the scheduler, and the warehouse's status after each run. In a fleet each
 * team has its own, every series labelled with `team`, and `renderMetrics` puts them together.
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
import type { ResourceStatus, RunKind, RunStatus } from '../interfaces.js';
import { isSafeResourceName } from '../names.js';
import type { RequestEvent } from '../source/http-source.js';
import type { ResourceReport, SyncEvents } from '../sync/engine.js';
import type { SchedulerClock, SkipReason } from './scheduler.js';

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
  /** A fleet's team: every series is labelled `team` with it, and the fleet's own are added. */
  team?: string;
}

export class SyncMetrics {
  readonly registry = new Registry();
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
  private readonly lastSuccess: Gauge;
  private readonly consecutiveFailures: Gauge;
  private readonly runInProgress: Gauge;
  private readonly skippedTicks: Counter<'reason'>;
  private readonly rowsReconciled: Counter<'resource'>;
  private readonly rowsDeleted: Counter<'resource'>;
  private readonly resourceProblems: Counter<'resource' | 'status'>;
  private readonly schemaChanges: Counter<'kind' | 'reason'>;
  private readonly storedRows: Gauge<'resource'>;
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
      help: 'Finished sync runs, by kind (incremental, full_refresh) and status (ok, partial, failed, interrupted).',
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
      registers,
    });
    this.lastSuccess = new Gauge({
      name: name('last_success_timestamp_seconds'),
      help: 'Unix time of the end of the last successful (ok or partial) run, as the warehouse records it; 0 before the first.',
      registers,
    });
    this.consecutiveFailures = new Gauge({
      name: name('consecutive_failures'),
      help: 'Failed runs in a row since the last success; scheduled ticks are skipped to back off.',
      registers,
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
      registers,
    });
    this.storedDeletedRows = new Gauge({
      name: name('resource_deleted_rows'),
      help: 'Rows kept but marked deleted (gone from the server) per resource table, as of the last run.',
      labelNames: ['resource'],
      registers,
    });
    this.storedFiles = new Gauge({
      name: name('files'),
      help: 'Files in the ledger by status of their last fetch (ok, missing = 404, failed), as of the last run.',
      labelNames: ['status'],
      registers,
    });
    this.storedFileBytes = new Gauge({
      name: name('file_bytes_stored'),
      help: 'Bytes of file contents in the blob store (each distinct content once), as of the last run.',
      registers,
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
      help: 'Now minus the newest updated_at stored, per resource that has updated_at (as of the last run).',
      labelNames: ['resource'],
      registers,
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
        if (report.status !== 'ok' && report.status !== 'excluded')
          this.resourceProblems.inc({ resource, status: report.status });
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
    if (event.outcome === 'retry') this.httpRetries.inc();
  };

  runStarted(): void {
    this.runInProgress.set(1);
  }

  runFinished(info: {
    kind: RunKind;
    status: Exclude<RunStatus, 'running'>;
    durationMs: number;
    finishedAt: number;
    consecutiveFailures: number;
  }): void {
    this.runInProgress.set(0);
    this.runs.inc({ kind: info.kind, status: info.status });
    this.runDuration.observe({ kind: info.kind, status: info.status }, info.durationMs / 1000);
    this.lastRunDuration.set(info.durationMs / 1000);
    if (info.status === 'ok' || info.status === 'partial')
      this.lastSuccess.set(info.finishedAt / 1000);
    this.consecutiveFailures.set(info.consecutiveFailures);
  }

  /** The last success recorded in the warehouse by an earlier process (read at start). */
  restoreLastSuccess(finishedAtMs: number): void {
    this.lastSuccess.set(finishedAtMs / 1000);
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

  /** Rows and freshness per resource, from `warehouse.status()` after a run. */
  warehouseStatus(statuses: readonly ResourceStatus[]): void {
    this.storedRows.reset();
    this.storedDeletedRows.reset();
    this.newestUpdatedAt.clear();
    for (const status of statuses) {
      const resource = this.resourceLabel(status.resource);
      // Past the cap, `other` is the sum of the tables it stands for, and their oldest lag.
      this.storedRows.inc({ resource }, status.rows);
      this.storedDeletedRows.inc({ resource }, status.rowsDeleted);
      if (status.newestUpdatedAt !== null) {
        const at = Date.parse(status.newestUpdatedAt);
        const kept = this.newestUpdatedAt.get(resource);
        if (Number.isFinite(at)) this.newestUpdatedAt.set(resource, Math.min(at, kept ?? at));
      }
    }
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

/** Several SyncEvents as one: each hook calls every listener that has it. */
export function combineEvents(...listeners: Array<SyncEvents | undefined>): SyncEvents {
  const present = listeners.filter((listener): listener is SyncEvents => listener !== undefined);
  const hook =
    <K extends keyof SyncEvents>(key: K) =>
    (info: Parameters<NonNullable<SyncEvents[K]>>[0]) => {
      for (const listener of present) {
        (listener[key] as ((value: typeof info) => void) | undefined)?.(info);
      }
    };
  return {
    onRunStart: hook('onRunStart'),
    onResourceStart: hook('onResourceStart'),
    onPageWritten: hook('onPageWritten'),
    onResourceDone: hook('onResourceDone'),
    onMissingSettled: hook('onMissingSettled'),
    onSchemaChange: hook('onSchemaChange'),
    onFilesDone: hook('onFilesDone'),
    onProgress: hook('onProgress'),
  };
}
