/**
 * The metrics of a `sync` that exits (a CronJob's): gathered while it runs (each resource's
 * error, the retries), then, once it has ended however it ended, what the warehouse recorded of
 * it and holds after it, sent where `metrics.push_url` and `metrics.textfile` say. Not a run, not
 * sent: one refused for the writer lock (its holder reports), and one the warehouse has no record
 * of (it could not be opened), whose push could not carry the last success.
 */
import type { Config } from '../config/schema.js';
import { LockHeldError, describeError, errorKindOf, type ErrorKind } from '../errors.js';
import type { Logger } from '../log.js';
import type { RequestEvent } from '../source/http-source.js';
import type { SyncEvents, SyncReport } from '../sync/engine.js';
import { SyncMetrics } from '../daemon/metrics.js';
import type { RunExporter } from '../daemon/run-export.js';
import { cronIntervalMs } from '../daemon/scheduler.js';
import { readWarehouseFacts, type WarehouseFacts } from '../daemon/warehouse-facts.js';
import { openWarehouseReader } from '../warehouse/open.js';
import { createExporter } from './wiring.js';

export class SyncRunMetrics {
  private readonly metrics: SyncMetrics;
  private since = Date.now();

  private constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly exporter: RunExporter,
    team: string | undefined,
  ) {
    this.metrics = new SyncMetrics({ team });
  }

  /** A run's metrics when the configuration sends them anywhere; undefined otherwise. */
  static of(
    config: Config,
    logger: Logger,
    team = config.metrics.team,
  ): SyncRunMetrics | undefined {
    const exporter = createExporter(config, logger, team);
    return exporter && new SyncRunMetrics(config, logger, exporter, team);
  }

  /** The run starts (now): its events and its requests are counted from here. */
  started(): { events: SyncEvents; onAttempt: (event: RequestEvent) => void } {
    this.since = Date.now();
    this.metrics.runStarted();
    return { events: this.metrics.syncEvents(), onAttempt: this.metrics.onAttempt };
  }

  /** The run ended with `report`, or threw `error`: its metrics are sent (never throws). */
  async finished(outcome: { report?: SyncReport; error?: unknown }): Promise<void> {
    const { error, report } = outcome;
    if (error instanceof LockHeldError) {
      this.logger.debug('Another ocs-sync holds the writer lock: this was no run; no metrics sent');
      return;
    }
    const facts = await this.readFacts();
    if (!facts) return;
    const last = facts.lastRun;
    if (!last || last.finishedAt === null || last.startedAt < this.since) {
      this.logger.warn(
        "The run's metrics are not sent: the warehouse has no record of the run (its group keeps the last run's)",
      );
      return;
    }
    const errorKind: ErrorKind | undefined = error === undefined ? undefined : errorKindOf(error);
    this.metrics.warehouseFacts(facts, { since: this.since, errorKind });
    if (report?.audit) this.metrics.checkpointWritten(report.audit.error === undefined);
    const intervalMs = cronIntervalMs(this.config.schedule, this.config.timezone);
    if (intervalMs !== undefined) this.metrics.scheduleIntervalSeconds(intervalMs / 1000);
    await this.exporter.export(this.metrics.runRegistry);
  }

  private async readFacts(): Promise<WarehouseFacts | undefined> {
    try {
      const reader = await openWarehouseReader({
        url: this.config.warehouse.url,
        schema: this.config.warehouse.schema,
        statementTimeoutSeconds: this.config.warehouse.statementTimeoutSeconds,
      });
      try {
        return await readWarehouseFacts(reader);
      } finally {
        await reader.close();
      }
    } catch (error) {
      this.logger.warn(
        { error: describeError(error) },
        "The run's metrics are not sent: the warehouse could not be read, and a push without its last success would erase it",
      );
      return undefined;
    }
  }
}
