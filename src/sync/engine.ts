/**
 * The sync engine, the outline of a run: read the manifest, bring tables up to the server's
 * schema (schema-keeper.ts), store the team row, walk every resource (pipeline/walk.ts: pages
 * fetched ahead, prepared and committed in order), then find relationships and index them, and
 * run the files step (src/files/) when `files` was synced. I/O goes through the ExportSource and
 * Warehouse interfaces; the decisions live in plan.ts and its siblings.
 */
import { linkedAbortController, type LinkedAbortController } from '../abort.js';
import { unknownNameAdvice } from '../did-you-mean.js';
import {
  ConfigError,
  InterruptedError,
  OcsSyncError,
  describeError,
  errorKindOf,
} from '../errors.js';
import type {
  ChatbotChoiceRecord,
  ExportSource,
  Manifest,
  ManifestEntry,
  ResourceOutcomeStatus,
  Row,
  RunKind,
  RunStatus,
  StageProgress,
} from '../interfaces.js';
import { repeatedEvents } from '../repeated-events.js';
import type { SecretPolicy } from '../sealing/policy.js';
import { createSealedValueOpener, type SealedValueOpener } from '../sealing/open-pool.js';
import { onCrash } from '../crash-guard.js';
import { planColumnsForRows, selectEntries, withoutFields } from './plan.js';
import {
  expectedWalkMs,
  orderWalks,
  parseWalkDurations,
  recordWalkDurations,
  type WalkDurations,
} from './walk-order.js';
import {
  EXCLUDED_BY_CHOICE,
  UNKNOWN_CHOICE_KEY,
  describeChoice,
  readServerScope,
  selectionParameter,
  walkKey,
  type ServerScope,
} from './chatbot-choice.js';
import { planResourceWalk } from './walk-plan.js';
import { keepExportDocuments } from './restore-keeping.js';
import { originalValuesOf } from '../warehouse/original-values.js';
import { dialectRules } from '../warehouse/open.js';
import { settleMissingUnderChoice } from './settle-under-choice.js';
import {
  RELATIONSHIPS_CURRENT_STATE_KEY,
  RELATIONSHIPS_STATE_KEY,
  RESOURCE_MODELS_STATE_KEY,
  findRelationships,
  parseRelationships,
  referenceCandidates,
  relationshipsStillCurrent,
} from './relationships.js';
import { isSafeResourceName } from '../names.js';
import { UNSAFE_RESOURCE_ERROR, namesShown, noteUnsafeResourceName } from './refused-names.js';
import { FILES_TABLE } from '../warehouse/file-ledger.js';
import type { FilesReport } from '../files/sync-files.js';
import {
  MANIFEST_ORDER_STATE_KEY,
  SCHEMA_CHECKSUM_STATE_KEY,
  SEALED_FIELDS_STATE_KEY,
  WALK_DURATIONS_STATE_KEY,
} from '../warehouse/state-keys.js';
import {
  SelectionChangedError,
  classifyResourceError,
  interrupted,
  recordFailedRun,
  syncRunKind,
} from './run-errors.js';
import { finishedRunStatus, keepsSchemaChecksum, stoppedRunStatus } from './run-outcome.js';
import { refreshes, type ResourceReport, type SyncOptions, type SyncReport } from './run-types.js';
import { SchemaKeeper, TEAM_TABLE, storedTables } from './schema-keeper.js';
import { SealedFieldBook } from './sealed-book.js';
import { walkResource, type WalkContext } from './pipeline/walk.js';
import { PagePipeline } from './pipeline/pipeline.js';

export { FULL_REFRESH_ALL } from './run-types.js';
export type {
  FullRefresh,
  ResourceReport,
  SecretsSettings,
  SyncEvents,
  SyncOptions,
  SyncReport,
} from './run-types.js';
export { recordFailedRun, storedTables, syncRunKind };
export { SEALED_FIELDS_STATE_KEY, MANIFEST_ORDER_STATE_KEY };

/** One sync pass. Takes the writer lock for its whole duration. */
export async function runSync(options: SyncOptions): Promise<SyncReport> {
  const lock = await options.warehouse.acquireLock(options.lockWaitMs, options.signal);
  // Should the process crash (src/crash-guard.ts), the run is recorded first, then the lock goes.
  const forgetLock = onCrash(() => lock.release());
  try {
    return await new SyncRun(options).run();
  } finally {
    forgetLock();
    repeatedEvents(options.logger).flush();
    await lock.release();
  }
}

class SyncRun {
  private readonly started = performance.now();
  private readonly problems: string[] = [];
  private runId = 0;
  private readonly sealed: SealedFieldBook;
  private readonly schema: SchemaKeeper;
  /** What the server says about its chatbot choice (chatbot-choice.ts), read from `team/`. */
  private scope: ServerScope = { kind: 'unscoped' };
  /** Every chatbot choice recorded in the warehouse, by key. */
  private choices = new Map<string, ChatbotChoiceRecord>();
  /** One walk of the resources; aborted when the choice changes under it. */
  private pass: LinkedAbortController = linkedAbortController(undefined);
  private selectionChange: SelectionChangedError | undefined;
  /** Set when the choice changed twice in this run and the run stopped walking. */
  private gaveUp: string | undefined;
  /** Rows and pages committed in this run, walks cut short by a choice change included. */
  private readonly totals = { rows: 0, pages: 0 };
  /** Opens sealed values; its threads start with the first value and stop when the walks end. */
  private readonly opener: SealedValueOpener;
  /** Parses, prepares and writes the walks' pages off this thread; stopped when the walks end. */
  private readonly pipeline: PagePipeline;
  /** How long each resource's last walks took, to start the longest first (walk-order.ts). */
  private walkDurations: WalkDurations = { fromStart: {}, resumed: {} };
  /** Resources this run walked from their first page. */
  private readonly walkedFromStart = new Set<string>();
  /** Full refreshes under a choice whose missing rows wait for every walk: resource -> key. */
  private readonly awaitingProofs = new Map<string, string>();

  constructor(private readonly options: SyncOptions) {
    this.opener =
      options.secrets.opener ??
      createSealedValueOpener(options.secrets.keys, options.secrets.openThreads);
    this.pipeline = new PagePipeline({
      warehouse: options.warehouse,
      keys: options.secrets.keys,
      pageThread: options.pageThreads ?? true,
      threadModule: options.pageThreadModule,
    });
    const policyOf = (entry: ManifestEntry) => this.policyOf(entry);
    this.sealed = new SealedFieldBook(
      options.warehouse,
      options.logger,
      options.secrets.keys,
      policyOf,
    );
    this.schema = new SchemaKeeper({
      ...options,
      sealed: this.sealed,
      policyOf,
      problem: (message) => this.problems.push(message),
    });
  }

  async run(): Promise<SyncReport> {
    const { source, warehouse, logger } = this.options;
    const requestsBefore = source.requestCount ?? 0;
    const kind = await syncRunKind(warehouse.bookkeeping, this.options.fullRefresh);
    let manifest: Awaited<ReturnType<ExportSource['manifest']>>;
    try {
      manifest = await source.manifest(this.options.signal);
    } catch (error) {
      // Unreachable server, 401, 403: a run that never started is still one to see in `status`.
      const failure = this.stoppedBy(error);
      await recordFailedRun(
        warehouse,
        kind,
        failure,
        (source.requestCount ?? 0) - requestsBefore,
      ).catch((recordError: unknown) =>
        logger.warn({ error: describeError(recordError) }, 'Could not record the failed run'),
      );
      throw failure;
    }
    const { selected, unknown } = selectEntries(
      manifest.entries,
      this.requestedResources(),
      this.options.excludeResources ?? [],
    );
    try {
      this.checkHistoryForAudit(selected);
    } catch (error) {
      await recordFailedRun(warehouse, kind, error, (source.requestCount ?? 0) - requestsBefore);
      throw error;
    }
    const previous = (await warehouse.bookkeeping.getState(SCHEMA_CHECKSUM_STATE_KEY)) ?? null;
    this.runId = await warehouse.bookkeeping.startRun(kind, manifest.schemaChecksum || null);
    const forgetRun = onCrash(async (reason) => {
      await warehouse.bookkeeping.finishRun(this.runId, {
        status: 'failed',
        ...this.totals,
        requests: (source.requestCount ?? 0) - requestsBefore,
        error: reason,
      });
      return `Run ${this.runId} is recorded as failed`;
    });
    try {
      return await this.walkAndFinish({
        manifest,
        selected,
        unknown,
        previous,
        kind,
        requestsBefore,
      });
    } finally {
      forgetRun();
    }
  }

  /** The run once recorded: everything it does, then its end, recorded. */
  private async walkAndFinish(started: {
    manifest: Manifest;
    selected: ManifestEntry[];
    unknown: string[];
    previous: string | null;
    kind: RunKind;
    requestsBefore: number;
  }): Promise<SyncReport> {
    const { manifest, selected, unknown, previous, kind, requestsBefore } = started;
    const { source, warehouse, logger } = this.options;

    for (const name of unknown) {
      this.problems.push(
        `Resource ${JSON.stringify(name)} is not in the server's manifest; ${unknownNameAdvice(
          name,
          manifest.entries.map((entry) => entry.resource),
        )}`,
      );
    }
    this.options.events?.onRunStart?.({ runId: this.runId, kind, resources: selected.length });
    await warehouse.bookkeeping.setState(
      MANIFEST_ORDER_STATE_KEY,
      JSON.stringify(
        [TEAM_TABLE, ...manifest.entries.map((entry) => entry.resource)].filter(isSafeResourceName),
      ),
    );

    const reports: ResourceReport[] = [];
    let status: RunStatus;
    let runError: unknown;
    let files: FilesReport | undefined;
    try {
      await this.schema.prepare(selected, previous, manifest.schemaChecksum);
      await keepExportDocuments(
        warehouse,
        source,
        manifest,
        this.schema.openApiDocument,
        this.options.signal,
      );
      const team = await this.syncTeam();
      await this.readScope(team, manifest.entries);
      this.sealed.planResources(selected, team);
      this.walkDurations = parseWalkDurations(
        await warehouse.bookkeeping.getState(WALK_DURATIONS_STATE_KEY),
      );
      const relationshipsCurrent =
        (await warehouse.bookkeeping.getState(RELATIONSHIPS_CURRENT_STATE_KEY)) === 'yes';
      if (relationshipsCurrent) {
        await warehouse.bookkeeping.setState(RELATIONSHIPS_CURRENT_STATE_KEY, 'no');
      }
      try {
        reports.push(...(await this.walkResources(selected, manifest.entries)));
      } finally {
        // Nothing parses a page nor opens a value after the walks: no thread (nor key) outlives
        // them.
        await this.pipeline.close();
        if (this.options.secrets.opener === undefined) await this.opener.close();
      }
      await settleMissingUnderChoice(reports, {
        warehouse,
        runId: this.runId,
        key: walkKey(this.scope),
        entries: manifest.entries,
        awaiting: this.awaitingProofs,
        deletes: this.options.deletes,
        historyFor: (resource) => this.historyFor(resource),
        logger,
        progress: (progress) => this.progress(progress),
        onSettled: (info) => this.options.events?.onMissingSettled?.(info),
        throwIfAborted: () => this.throwIfAborted(),
      });
      repeatedEvents(logger).flush();
      await this.keepWalkDurations(reports);
      await this.refreshRelationships(manifest.entries, relationshipsCurrent, reports);
      files = await this.syncFiles(reports);
      status = finishedRunStatus({ problems: this.problems, resources: reports, files });
      if (keepsSchemaChecksum({ resources: reports, gaveUp: this.gaveUp !== undefined })) {
        await warehouse.bookkeeping.setState(SCHEMA_CHECKSUM_STATE_KEY, manifest.schemaChecksum);
      }
    } catch (error) {
      runError = this.stoppedBy(error);
      // However the run ends, no thread of it is left.
      await this.pipeline.close();
      status = stoppedRunStatus(runError);
    }

    const requests = (source.requestCount ?? 0) - requestsBefore;
    const { rows, pages } = this.totals;
    await warehouse.bookkeeping.finishRun(this.runId, {
      status,
      rows,
      pages,
      requests,
      error: runError === undefined ? this.gaveUp : describeError(runError),
    });
    if (runError !== undefined) throw runError;

    const report: SyncReport = {
      runId: this.runId,
      kind,
      status,
      schemaChecksum: manifest.schemaChecksum,
      previousSchemaChecksum: previous,
      schemaChanges: this.schema.changes,
      resources: reports,
      problems: this.problems,
      ...(this.scope.kind === 'choice' ? { choice: this.scope.choice } : {}),
      rows,
      pages,
      requests,
      durationMs: Math.round(performance.now() - this.started),
      ...(files ? { files } : {}),
    };
    logger.info(
      {
        runId: this.runId,
        status,
        rows,
        pages,
        resources: reports.length,
        skipped: namesShown(reports.filter((r) => r.status === 'skipped').map((r) => r.resource)),
        failed: namesShown(reports.filter((r) => r.status === 'failed').map((r) => r.resource)),
        durationMs: report.durationMs,
        pageThread: this.pipeline.threaded,
      },
      `Sync ${status}`,
    );
    return report;
  }

  /** Reads the server's chatbot choice from the team row and records it for the run. */
  private async readScope(
    team: Record<string, unknown>,
    entries: readonly ManifestEntry[],
  ): Promise<void> {
    const { warehouse, logger } = this.options;
    this.scope = readServerScope(team, entries);
    if (this.scope.kind === 'unscoped') return;
    const choice =
      this.scope.kind === 'choice' ? this.scope.choice : { key: UNKNOWN_CHOICE_KEY, chatbots: [] };
    await warehouse.bookkeeping.recordRunChoice(this.runId, choice);
    this.choices = await warehouse.bookkeeping.chatbotChoices();
    if (this.scope.kind === 'unknown') {
      logger.warn(
        { reason: this.scope.reason },
        'The server classes its resources by chatbot but does not say which chatbots it serves: ' +
          'every resource is read from the start, and no missing row is taken for deleted',
      );
    } else {
      logger.info(
        { selection: choice.key, chatbots: choice.chatbots.length },
        `Chatbot choice: ${describeChoice(choice)}`,
      );
    }
  }

  /**
   * Walks the resources. When the team's chatbot choice changes under the walk (the server's
   * 409), the walk stops, keeps every committed page (true when served, and stored under the
   * choice it was requested with), re-reads `team/` and walks again under the new choice, once;
   * a second change ends the run `partial`.
   */
  private async walkResources(
    entries: ManifestEntry[],
    manifestEntries: readonly ManifestEntry[],
  ): Promise<ResourceReport[]> {
    const { logger, concurrency } = this.options;
    const ordered = orderWalks(
      entries,
      (entry) =>
        expectedWalkMs(
          this.walkDurations,
          entry.resource,
          refreshes(this.options.fullRefresh, entry.resource),
        ),
      concurrency,
    );
    if (concurrency > 1) {
      logger.debug(
        { resources: ordered.map((entry) => entry.resource) },
        'Walks start longest first, as long as their last walks took',
      );
    }
    for (let changes = 0; ; changes += 1) {
      const reports: ResourceReport[] = [];
      // Linked to the run's signal and released when the pass ends: nothing per pass stays on it.
      this.pass = linkedAbortController(this.options.signal);
      this.selectionChange = undefined;
      try {
        await this.forEachEntry(ordered, async (entry, index) => {
          this.options.events?.onResourceStart?.({
            resource: entry.resource,
            index,
            total: ordered.length,
          });
          const report = await this.syncResource(entry);
          reports.push(report);
          this.options.events?.onResourceDone?.(report);
        });
        return reports;
      } catch (error) {
        if (!(error instanceof SelectionChangedError)) throw error;
        if (changes >= 1) {
          this.gaveUp =
            `The team's chatbot choice changed again during this run (${error.message}); the run ` +
            'stopped walking. Every page committed is kept under the choice it was served with; ' +
            "the next run walks under the team's current choice.";
          this.problems.push(this.gaveUp);
          logger.error({ detail: error.detail }, this.gaveUp);
          return reports;
        }
        logger.warn(
          { detail: error.detail },
          "The team's chatbot choice changed during the run: committed pages are kept; " +
            'walking again under the new choice',
        );
        const team = await this.syncTeam();
        await this.readScope(team, manifestEntries);
        this.sealed.forgetSkips();
        this.sealed.planResources(entries, team);
      } finally {
        this.pass.release();
      }
    }
  }

  /** Keeps how long each walk that ended `ok` took, for the order of the next run's walks. */
  private async keepWalkDurations(reports: readonly ResourceReport[]): Promise<void> {
    const walks = reports
      .filter((report) => report.status === 'ok')
      .map((report) => ({
        resource: report.resource,
        durationMs: report.durationMs,
        fromStart: this.walkedFromStart.has(report.resource),
      }));
    if (walks.length === 0) return;
    this.walkDurations = recordWalkDurations(this.walkDurations, walks);
    await this.options.warehouse.bookkeeping.setState(
      WALK_DURATIONS_STATE_KEY,
      JSON.stringify(this.walkDurations),
    );
  }

  /**
   * Finds which columns reference which tables (relationships.ts) and indexes them and every
   * `updated_at`. New candidates cost a scan each, once; a failure here is a problem of the run,
   * never lost rows.
   */
  private async refreshRelationships(
    entries: readonly ManifestEntry[],
    currentBefore: boolean,
    reports: readonly ResourceReport[],
  ): Promise<void> {
    const { warehouse, logger } = this.options;
    this.progress({ stage: 'finding relationships and creating indexes', done: 0, unit: 'steps' });
    try {
      const models = new Map(
        entries
          .filter((entry) => isSafeResourceName(entry.resource))
          .map((entry) => [entry.resource, entry.model]),
      );
      const modelsText = JSON.stringify(Object.fromEntries(models));
      const still = relationshipsStillCurrent({
        currentBefore,
        rowsWritten: this.totals.rows,
        rowsMarked: reports.reduce((sum, r) => sum + r.deleted + (r.outOfScope ?? 0), 0),
        schemaChanges: this.schema.changes.length,
        modelsBefore: await warehouse.bookkeeping.getState(RESOURCE_MODELS_STATE_KEY),
        models: modelsText,
      });
      if (still) {
        await warehouse.bookkeeping.setState(RELATIONSHIPS_CURRENT_STATE_KEY, 'yes');
        return;
      }
      await warehouse.bookkeeping.setState(RESOURCE_MODELS_STATE_KEY, modelsText);
      const tables = await storedTables(warehouse, [TEAM_TABLE, ...models.keys()]);
      const relationships = await findRelationships(
        warehouse.reads,
        referenceCandidates(tables, models),
        parseRelationships(await warehouse.bookkeeping.getState(RELATIONSHIPS_STATE_KEY)),
      );
      await warehouse.bookkeeping.setState(RELATIONSHIPS_STATE_KEY, JSON.stringify(relationships));
      const created = await warehouse.reads.ensureIndexes([
        ...relationships.map(({ table, column }) => ({ table, column })),
        ...[...tables]
          .filter(([, columns]) => columns.some((column) => column.name === 'updated_at'))
          .map(([table]) => ({ table, column: 'updated_at' })),
      ]);
      if (created > 0) logger.info({ indexes: created }, `Created ${created} index(es)`);
      await warehouse.bookkeeping.setState(RELATIONSHIPS_CURRENT_STATE_KEY, 'yes');
    } catch (error) {
      if (!(error instanceof OcsSyncError)) throw error;
      this.problems.push(`Finding relationships and indexing failed: ${describeError(error)}`);
      logger.warn({ err: describeError(error) }, 'Finding relationships and indexing failed');
    }
  }

  /**
   * File contents, once the `files` rows are stored: only when `files` was part of this run and
   * not skipped. A 404 is recorded as missing and does not make the run partial; a failed fetch does.
   */
  private async syncFiles(reports: ResourceReport[]): Promise<FilesReport | undefined> {
    const step = this.options.files;
    const filesResource = reports.find((report) => report.resource === FILES_TABLE);
    if (!step || !filesResource || filesResource.status === 'skipped') return undefined;
    this.throwIfAborted();
    const report = await step.run(this.options.signal, this.options.events?.onProgress);
    this.options.events?.onFilesDone?.(report);
    return report;
  }

  private requestedResources(): readonly string[] | undefined {
    const { resources, fullRefresh } = this.options;
    // `--full-refresh A B` limits the run to A and B.
    return fullRefresh?.kind === 'some' ? fullRefresh.resources : resources;
  }

  /** Store the team row; returns it (its `has_public_key` says whether sealed resources answer). */
  private async syncTeam(): Promise<Record<string, unknown>> {
    const { source, warehouse } = this.options;
    const team = await source.team(this.options.signal);
    let columns = await this.schema.ensureTable(TEAM_TABLE, this.schema.schemaColumns(TEAM_TABLE));
    const row = withoutFields([team as Row], [...this.schema.excludedFields(TEAM_TABLE)])[0]!;
    const rowPlan = planColumnsForRows(TEAM_TABLE, columns ?? [], [row]);
    columns = await this.schema.apply(rowPlan.changes, rowPlan.columns);
    const rows = withoutFields([row], rowPlan.refusedFields);
    const started = performance.now();
    const written = await warehouse.writePage({
      runId: this.runId,
      resource: TEAM_TABLE,
      columns,
      rows,
      originals: originalValuesOf(dialectRules(warehouse.dialect).values, columns, rows),
      cursor: null,
      cursorKind: null,
      history: this.historyFor(TEAM_TABLE),
    });
    await warehouse.bookkeeping.recordResourceOutcome({
      runId: this.runId,
      resource: TEAM_TABLE,
      status: 'ok',
      rows: written.rowsWritten,
      pages: 1,
      durationMs: Math.round(performance.now() - started),
    });
    return team;
  }

  private async forEachEntry(
    entries: ManifestEntry[],
    work: (entry: ManifestEntry, index: number) => Promise<void>,
  ): Promise<void> {
    let next = 0;
    // After a failure no worker takes another entry, and every walk settles before the failure
    // is thrown: nothing of this run writes after it has ended (or walks again).
    let failure: { error: unknown } | undefined;
    const worker = async () => {
      try {
        while (failure === undefined && next < entries.length) {
          this.throwIfAborted();
          const index = next++;
          await work(entries[index]!, index);
        }
      } catch (error) {
        failure ??= { error };
      }
    };
    const workers = Math.max(1, Math.min(this.options.concurrency, entries.length));
    await Promise.all(Array.from({ length: workers }, worker));
    if (failure) throw failure.error;
  }

  private async syncResource(entry: ManifestEntry): Promise<ResourceReport> {
    const started = performance.now();
    const fullRefresh = refreshes(this.options.fullRefresh, entry.resource);
    const report: ResourceReport = {
      resource: entry.resource,
      status: 'ok',
      rows: 0,
      pages: 0,
      durationMs: 0,
      warnings: [],
      valuesAltered: 0,
      deleted: 0,
      outOfScope: 0,
      fullRefresh,
    };
    const { logger } = this.options;
    if (!isSafeResourceName(entry.resource)) {
      report.status = 'skipped';
      report.error = UNSAFE_RESOURCE_ERROR;
      report.errorKind = 'unsafe_name';
      noteUnsafeResourceName(entry.resource, logger);
      return report;
    }

    const notRequested = this.sealed.skipReason(entry.resource);
    if (notRequested) {
      // Said once for the run by planResources; here only recorded.
      await this.record(report, 'skipped', notRequested, started);
      return report;
    }

    try {
      const plan = planResourceWalk({
        entry,
        scope: this.scope,
        stored: await this.options.warehouse.bookkeeping.getResourceState(entry.resource),
        fullRefresh,
        chatbotsOf: (key) => this.choices.get(key)?.chatbots.map((chatbot) => chatbot.publicId),
      });
      if (plan.excluded) {
        // Not requested; its table still follows the schema for the day the choice is cleared.
        await this.schema.ensureTable(
          entry.resource,
          this.schema.desiredColumns(entry, this.policyOf(entry)),
        );
        await this.record(report, 'excluded', EXCLUDED_BY_CHOICE, started);
        logger.debug({ resource: entry.resource }, report.error);
        return report;
      }
      if (plan.cursor === null) this.walkedFromStart.add(entry.resource);
      await walkResource(this.walkContext(), { entry, report, plan });
    } catch (caught) {
      // Another walk saw the choice change: this one was cut short by it, nothing of its own.
      if (this.selectionChange && this.pass.signal.aborted) throw this.selectionChange;
      const { kind, error } = classifyResourceError(caught, {
        resource: entry.resource,
        selection: selectionParameter(this.scope),
        interrupted: this.options.signal?.aborted === true,
      });
      if (kind === 'selection changed') {
        this.selectionChange = error;
        this.pass.abort();
        throw error;
      }
      if (kind === 'not ours') throw error;
      if (kind === 'stops the run') {
        await this.record(report, 'failed', error, started);
        throw error;
      }
      // A skip is the configuration or the server saying "not this one": a warning, not a failure.
      const skipped = kind === 'skipped';
      await this.record(report, skipped ? 'skipped' : 'failed', error, started);
      logger[skipped ? 'warn' : 'error'](
        { resource: entry.resource, rows: report.rows },
        report.error,
      );
      return report;
    }
    await this.record(report, 'ok', undefined, started);
    // One line a resource is for `log.level: debug`: the run's own line sums them up.
    logger.debug(
      {
        resource: entry.resource,
        rows: report.rows,
        pages: report.pages,
        durationMs: report.durationMs,
        ...(fullRefresh ? { deleted: report.deleted } : {}),
        ...(report.outOfScope ? { outOfScope: report.outOfScope } : {}),
        ...(report.valuesAltered ? { valuesAltered: report.valuesAltered } : {}),
      },
      `${entry.resource}: ${report.rows} rows`,
    );
    return report;
  }

  /** What a walk needs of this run, as it is now (the scope and the pass change between passes). */
  private walkContext(): WalkContext {
    return {
      options: this.options,
      runId: this.runId,
      scope: this.scope,
      signal: this.pass.signal,
      schema: this.schema,
      sealed: this.sealed,
      opener: this.opener,
      pipeline: this.pipeline,
      totals: this.totals,
      policyOf: (entry) => this.policyOf(entry),
      historyFor: (resource) => this.historyFor(resource),
      awaitProofs: (resource, key) => this.awaitingProofs.set(resource, key),
      throwIfAborted: () => this.throwIfAborted(),
    };
  }

  private policyOf(entry: ManifestEntry): SecretPolicy {
    return this.options.secrets.policyFor(entry.resource);
  }

  private historyFor(resource: string): boolean {
    // The audit chain holds every version of every resource.
    if (this.options.warehouse.audit.enabled) return true;
    const { history } = this.options;
    return history === true || (Array.isArray(history) && history.includes(resource));
  }

  /**
   * With the audit chain on, history is kept for every resource: a `history` list that leaves
   * some of this run's resources out is a configuration error naming them (the resources are
   * known only from the manifest, so this is checked here, before the run writes anything).
   */
  private checkHistoryForAudit(selected: readonly ManifestEntry[]): void {
    const { history, warehouse } = this.options;
    if (!warehouse.audit.enabled || !Array.isArray(history)) return;
    const missing = [TEAM_TABLE, ...selected.map((entry) => entry.resource)].filter(
      (resource) => isSafeResourceName(resource) && !history.includes(resource),
    );
    if (missing.length === 0) return;
    throw new ConfigError([
      `history lists some resources, but audit is on for this warehouse, which keeps the history of every resource; it leaves out ${missing.join(', ')}: set history: true (OCS_HISTORY=true), or leave history out`,
    ]);
  }

  private async record(
    report: ResourceReport,
    status: ResourceOutcomeStatus,
    error: unknown,
    started: number,
  ): Promise<void> {
    report.status = status;
    report.durationMs = Math.round(performance.now() - started);
    if (error !== undefined) report.error = describeError(error);
    if (status === 'skipped' || status === 'failed') {
      report.errorKind = status === 'skipped' ? 'skipped' : errorKindOf(error);
    }
    const warnings = report.warnings.length > 0 ? report.warnings.join(' ') : undefined;
    await this.options.warehouse.bookkeeping.recordResourceOutcome({
      runId: this.runId,
      resource: report.resource,
      status,
      rows: report.rows,
      pages: report.pages,
      durationMs: report.durationMs,
      error: report.error ?? warnings,
    });
  }

  private throwIfAborted(): void {
    if (this.options.signal?.aborted) throw interrupted();
  }

  /**
   * What ended the run: once the run's signal is aborted, whatever failed (a retry's wait or a
   * request cut short by the abort, which throw the signal's reason) is the interruption.
   */
  private stoppedBy(error: unknown): unknown {
    return this.options.signal?.aborted && !(error instanceof InterruptedError)
      ? interrupted()
      : error;
  }

  private progress(progress: StageProgress): void {
    this.options.events?.onProgress?.(progress);
  }
}
