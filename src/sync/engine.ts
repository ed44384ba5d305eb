/**
 * The sync engine: reads the manifest, brings tables up to the server's schema, walks every
 * resource page by page and writes each page together with its cursor, then runs the files step
 * (src/files/) when `files` was synced. I/O goes through the ExportSource and Warehouse
 * interfaces; the decisions live in plan.ts.
 */
import { linkedAbortController, type LinkedAbortController } from '../abort.js';
import { unknownNameAdvice } from '../did-you-mean.js';
import {
  AuthError,
  ConfigError,
  HttpStatusError,
  InterruptedError,
  OcsSyncError,
  SchemaChangeStoppedError,
  ServerUnavailableError,
  UnsafeNameError,
  describeError,
} from '../errors.js';
import type {
  AuditOutcome,
  ChatbotChoiceRecord,
  ColumnSpec,
  DeleteMode,
  ExportSource,
  Manifest,
  ManifestEntry,
  Page,
  ProgressListener,
  ResourceOutcomeStatus,
  ResourceState,
  Row,
  RunKind,
  RunStatus,
  SchemaChange,
  StageProgress,
  Warehouse,
} from '../interfaces.js';
import type { Logger } from '../log.js';
import { repeatedEvents, type RepeatedKind } from '../repeated-events.js';
import {
  applySealingPolicy,
  needsArchivePublicKey,
  needsPrivateKey,
  sealedColumnType,
  type SealingKeys,
  type SecretPolicy,
} from '../sealing/policy.js';
import { createSealedValueOpener, type SealedValueOpener } from '../sealing/open-pool.js';
import { onCrash } from '../crash-guard.js';
import { columnsFromOpenApi, type SchemaColumns } from './openapi-columns.js';
import {
  detectSealedFields,
  formatSealedFieldsState,
  keepStoredSealedValues,
  parseSealedFieldsState,
  planSealedColumns,
} from './sealed-fields.js';
import { rowContentHasher } from '../warehouse/canonical.js';
import {
  cursorAfterPage,
  describeSchemaChange,
  hasNextPage,
  planColumnsForRows,
  planTable,
  selectEntries,
  withoutFields,
} from './plan.js';
import { CursorTrail, checkPageHead } from './cursor-trail.js';
import { readAhead } from './read-ahead.js';
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
  WHOLE_TEAM_KEY,
  describeChoice,
  planResourceWalk,
  readServerScope,
  selectionParameter,
  servesPartOfTeam,
  walkKey,
  type ResourceWalkPlan,
  type ServerScope,
} from './chatbot-choice.js';
import { keepExportDocuments, keepOriginalValues } from './restore-keeping.js';
import { settleMissingUnderChoice } from './settle-under-choice.js';
import {
  RELATIONSHIPS_STATE_KEY,
  RESOURCE_MODELS_STATE_KEY,
  findRelationships,
  parseRelationships,
  referenceCandidates,
} from './relationships.js';
import { isSafeFieldName, isSafeResourceName, valueByName } from '../names.js';
import { FILES_TABLE } from '../warehouse/file-ledger.js';
import type { FilesReport, FilesStep } from '../files/sync-files.js';
import {
  MANIFEST_ORDER_STATE_KEY,
  MARKED_SEALED_FIELDS_STATE_KEY,
  SCHEMA_CHECKSUM_STATE_KEY,
  SEALED_FIELDS_STATE_KEY,
  WALK_DURATIONS_STATE_KEY,
} from '../warehouse/state-keys.js';

export interface SecretsSettings {
  policyFor(resource: string): SecretPolicy;
  keys: SealingKeys;
  /** Threads that open sealed values (`secrets.open_threads`); 0: this thread; default: the cores, at most 8. */
  openThreads?: number;
  /** Opens sealed values instead of a pool of the run's own (tests); the caller closes it. */
  opener?: SealedValueOpener;
}

/** Hooks for progress display and metrics; all optional. */
export interface SyncEvents {
  onRunStart?(info: { runId: number; kind: RunKind; resources: number }): void;
  onResourceStart?(info: { resource: string; index: number; total: number }): void;
  onPageWritten?(info: { resource: string; rows: number; valuesAltered: number }): void;
  onResourceDone?(report: ResourceReport): void;
  /** A full refresh under a chatbot choice settled a resource's missing rows, after every walk. */
  onMissingSettled?(info: { resource: string; deleted: number; outOfScope: number }): void;
  onSchemaChange?(change: SchemaChange): void;
  onFilesDone?(report: FilesReport): void;
  /** Every step of every stage of the run (pages, files, deletion marking, ...). */
  onProgress?: ProgressListener;
}

export interface SyncOptions {
  source: ExportSource;
  warehouse: Warehouse;
  logger: Logger;
  pageSize: number;
  resources?: readonly string[];
  excludeResources?: readonly string[];
  /** Fields never stored, per resource; a stored column of one is dropped. */
  excludeFields?: Readonly<Record<string, readonly string[]>>;
  secrets: SecretsSettings;
  onSchemaChange: 'evolve' | 'stop';
  acceptSchemaChange?: boolean;
  history: boolean | readonly string[];
  deletes: DeleteMode;
  /** Walk these resources (true: all selected) from the start and find deleted rows. */
  fullRefresh?: boolean | readonly string[];
  /** Pages fetched ahead of the writer. */
  pagesInFlight: number;
  /** Resources synced at once; 1 keeps manifest order. */
  concurrency: number;
  lockWaitMs: number;
  signal?: AbortSignal;
  events?: SyncEvents;
  /** Fetch file contents after the resources, when `files` was synced (files.enabled). */
  files?: FilesStep;
}

export interface ResourceReport {
  resource: string;
  status: ResourceOutcomeStatus;
  rows: number;
  pages: number;
  durationMs: number;
  /** Why it was skipped or failed; safe to show. */
  error?: string;
  /** Problems that did not stop the resource (refused field names, altered values). */
  warnings: string[];
  valuesAltered: number;
  /** Rows marked deleted (or removed) by a full refresh. */
  deleted: number;
  /** Rows marked out of the team's chatbot choice by this walk (absent: none). */
  outOfScope?: number;
  fullRefresh: boolean;
}

export interface SyncReport {
  runId: number;
  kind: RunKind;
  status: RunStatus;
  schemaChecksum: string;
  previousSchemaChecksum: string | null;
  schemaChanges: SchemaChange[];
  resources: ResourceReport[];
  /** Run-level problems (refused resource names, unknown requested resources). */
  problems: string[];
  rows: number;
  pages: number;
  /** HTTP requests sent, retries included. */
  requests: number;
  durationMs: number;
  /** The files step, when it ran. */
  files?: FilesReport;
  /** The audit checkpoint written after the run (added by the caller that writes it). */
  audit?: AuditOutcome;
  /** The chatbot choice the run ended under, when the server speaks of one. */
  choice?: ChatbotChoiceRecord;
}

const SCHEMA_CHECKSUM_KEY = SCHEMA_CHECKSUM_STATE_KEY;
export { SEALED_FIELDS_STATE_KEY, MANIFEST_ORDER_STATE_KEY };
const TEAM_TABLE = 'team';

/** Schema changes of one kind in a run: each at debug, one line for all (repeated-events.ts). */
const SCHEMA_CHANGE_KINDS: Record<Exclude<SchemaChange['kind'], 'drop_column'>, RepeatedKind> = {
  create_table: {
    level: 'info',
    message: 'Schema: new table',
    summary: (n) => `Schema: ${n} new tables`,
  },
  add_column: {
    level: 'info',
    message: 'Schema: new column',
    summary: (n) => `Schema: ${n} new columns`,
  },
  widen_column: {
    level: 'info',
    message: 'Schema: column widens',
    summary: (n) => `Schema: ${n} columns widen`,
  },
};

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
  private readonly schemaChanges: SchemaChange[] = [];
  private readonly problems: string[] = [];
  private schema: SchemaColumns | undefined;
  /** The OpenAPI document, when this run fetched it (kept for `serve`). */
  private openApiDocument: unknown;
  private checksums: { from: string | null; to: string | null } = { from: null, to: null };
  private runId = 0;
  /** Sealed fields per resource: the schema's marks and every field seen sealed. */
  private readonly sealedFields = new Map<string, { marked: Set<string>; all: Set<string> }>();
  /** Resources skipped without a request, and why (no public key on the team, no private key). */
  private readonly notRequested = new Map<string, SkipResource>();
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
  }

  async run(): Promise<SyncReport> {
    const { source, warehouse, logger } = this.options;
    const requestsBefore = source.requestCount ?? 0;
    const kind: RunKind = this.options.fullRefresh ? 'full_refresh' : 'incremental';
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
    const previous = (await warehouse.getState(SCHEMA_CHECKSUM_KEY)) ?? null;
    this.checksums = { from: previous, to: manifest.schemaChecksum || null };
    this.runId = await warehouse.startRun(kind, manifest.schemaChecksum || null);
    const forgetRun = onCrash(async (reason) => {
      await warehouse.finishRun(this.runId, {
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
    await warehouse.setState(
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
      await this.prepareSchema(selected, previous, manifest.schemaChecksum);
      await keepExportDocuments(
        warehouse,
        source,
        manifest,
        this.openApiDocument,
        this.options.signal,
      );
      const team = await this.syncTeam();
      await this.readScope(team, manifest.entries);
      this.planSealedResources(selected, team);
      this.walkDurations = parseWalkDurations(await warehouse.getState(WALK_DURATIONS_STATE_KEY));
      try {
        reports.push(...(await this.walkResources(selected, manifest.entries)));
      } finally {
        // Nothing opens a value after the walks: no thread (nor key) outlives them.
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
      await this.refreshRelationships(manifest.entries);
      files = await this.syncFiles(reports);
      const partial =
        this.problems.length > 0 ||
        reports.some(
          (report) =>
            (report.status !== 'ok' && report.status !== 'excluded') || report.warnings.length > 0,
        ) ||
        (files !== undefined && (files.failed > 0 || files.error !== undefined));
      status = partial ? 'partial' : 'ok';
      // Skipped or failed resources may not have their tables evolved yet: re-read the schema next time.
      if (
        this.gaveUp === undefined &&
        reports.every((report) => report.status === 'ok' || report.status === 'excluded')
      ) {
        await warehouse.setState(SCHEMA_CHECKSUM_KEY, manifest.schemaChecksum);
      }
    } catch (error) {
      runError = this.stoppedBy(error);
      status =
        runError instanceof InterruptedError
          ? 'interrupted'
          : runError instanceof SchemaChangeStoppedError
            ? 'partial'
            : 'failed';
    }

    const requests = (source.requestCount ?? 0) - requestsBefore;
    const { rows, pages } = this.totals;
    await warehouse.finishRun(this.runId, {
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
      schemaChanges: this.schemaChanges,
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
        skipped: reports.filter((r) => r.status === 'skipped').map((r) => r.resource),
        failed: reports.filter((r) => r.status === 'failed').map((r) => r.resource),
        durationMs: report.durationMs,
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
    await warehouse.recordRunChoice(this.runId, choice);
    this.choices = await warehouse.chatbotChoices();
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
        expectedWalkMs(this.walkDurations, entry.resource, this.isFullRefresh(entry.resource)),
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
        this.notRequested.clear();
        this.planSealedResources(entries, team);
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
    await this.options.warehouse.setState(
      WALK_DURATIONS_STATE_KEY,
      JSON.stringify(this.walkDurations),
    );
  }

  /**
   * Finds which columns reference which tables (relationships.ts) and indexes them and every
   * `updated_at`. New candidates cost a scan each, once; a failure here is a problem of the run,
   * never lost rows.
   */
  private async refreshRelationships(entries: readonly ManifestEntry[]): Promise<void> {
    const { warehouse, logger } = this.options;
    this.progress({ stage: 'finding relationships and creating indexes', done: 0, unit: 'steps' });
    try {
      const models = new Map(
        entries
          .filter((entry) => isSafeResourceName(entry.resource))
          .map((entry) => [entry.resource, entry.model]),
      );
      await warehouse.setState(
        RESOURCE_MODELS_STATE_KEY,
        JSON.stringify(Object.fromEntries(models)),
      );
      const tables = await storedTables(warehouse, [TEAM_TABLE, ...models.keys()]);
      const relationships = await findRelationships(
        warehouse,
        referenceCandidates(tables, models),
        parseRelationships(await warehouse.getState(RELATIONSHIPS_STATE_KEY)),
      );
      await warehouse.setState(RELATIONSHIPS_STATE_KEY, JSON.stringify(relationships));
      const created = await warehouse.ensureIndexes([
        ...relationships.map(({ table, column }) => ({ table, column })),
        ...[...tables]
          .filter(([, columns]) => columns.some((column) => column.name === 'updated_at'))
          .map(([table]) => ({ table, column: 'updated_at' })),
      ]);
      if (created > 0) logger.info({ indexes: created }, `Created ${created} index(es)`);
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
    if (Array.isArray(fullRefresh) && fullRefresh.length > 0) return fullRefresh;
    return resources;
  }

  /** Fetch the OpenAPI when the schema may have moved; stop here if the policy says so. */
  private async prepareSchema(
    entries: ManifestEntry[],
    previous: string | null,
    current: string,
  ): Promise<void> {
    const { warehouse, logger, source } = this.options;
    const changed = previous !== null && previous !== current;
    const missingTable = await someAsync(
      [TEAM_TABLE, ...entries.map((e) => e.resource)],
      async (table) =>
        isSafeResourceName(table) ? (await warehouse.describeTable(table)) === undefined : false,
    );
    const marked = parseMarkedState(await warehouse.getState(MARKED_SEALED_FIELDS_STATE_KEY));
    // An unpublished schema is asked for again next run: it may have been a passing fault.
    const markedKnown = marked?.checksum === current && marked.published;
    if (previous === null || changed || missingTable || !markedKnown) {
      const document = await source.openApi(this.options.signal);
      this.openApiDocument = document;
      this.schema = columnsFromOpenApi(document);
      for (const refused of this.schema.refused) {
        this.problems.push(new UnsafeNameError('field', refused, 'the OpenAPI schema').message);
      }
      await warehouse.setState(
        MARKED_SEALED_FIELDS_STATE_KEY,
        JSON.stringify({
          checksum: current,
          published: document !== undefined,
          fields: Object.fromEntries(this.schema.sealed),
        }),
      );
      await this.loadSealedFields(this.schema.sealed);
    } else {
      await this.loadSealedFields(marked.fields);
    }
    if (!changed) return;
    logger.warn(
      { previousChecksum: previous, checksum: current },
      "The server's export schema changed since the last run",
    );
    if (this.options.onSchemaChange === 'stop' && !this.options.acceptSchemaChange) {
      const planned: string[] = [];
      for (const entry of entries) {
        if (!isSafeResourceName(entry.resource)) continue;
        const desired = this.desiredColumns(entry, this.policyOf(entry));
        if (!desired) continue;
        const existing = await warehouse.describeTable(entry.resource);
        planned.push(
          ...planTable(entry.resource, existing, desired, 'schema').changes.map(
            describeSchemaChange,
          ),
        );
      }
      throw new SchemaChangeStoppedError(
        `The server's export schema changed (checksum ${previous.slice(0, 12)}… -> ${current.slice(0, 12)}…) ` +
          `and on_schema_change is "stop". Planned changes:\n` +
          (planned.length > 0
            ? planned.map((line) => `  - ${line}`).join('\n')
            : '  (none to the tables)'),
        { hint: 'Review them, then run `ocs-sync sync --accept-schema-change`.' },
      );
    }
  }

  /** Store the team row; returns it (its `has_public_key` says whether sealed resources answer). */
  private async syncTeam(): Promise<Record<string, unknown>> {
    const { source, warehouse } = this.options;
    const team = await source.team(this.options.signal);
    const desired = this.schema?.tables.get(TEAM_TABLE);
    let columns = await this.ensureTable(TEAM_TABLE, desired);
    const row = withoutFields([team as Row], [...this.excludedFields(TEAM_TABLE)])[0]!;
    const rowPlan = planColumnsForRows(TEAM_TABLE, columns ?? [], [row]);
    columns = await this.applyChanges(rowPlan.changes, rowPlan.columns);
    await keepOriginalValues(warehouse, TEAM_TABLE, columns, [row]);
    const started = performance.now();
    const written = await warehouse.writePage({
      runId: this.runId,
      resource: TEAM_TABLE,
      columns,
      rows: withoutFields([row], rowPlan.refusedFields),
      cursor: null,
      cursorKind: null,
      history: this.historyFor(TEAM_TABLE),
    });
    await warehouse.recordResourceOutcome({
      runId: this.runId,
      resource: TEAM_TABLE,
      status: 'ok',
      rows: written.rowsWritten,
      pages: 1,
      durationMs: Math.round(performance.now() - started),
    });
    return team;
  }

  /** Known sealed fields per resource: the schema's marks plus every field seen sealed before. */
  private async loadSealedFields(marked: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const { warehouse } = this.options;
    const seen = parseSealedFieldsState(await warehouse.getState(SEALED_FIELDS_STATE_KEY));
    for (const resource of new Set([...seen.keys(), ...marked.keys()])) {
      const markedFields = new Set((marked.get(resource) ?? []).filter(isSafeFieldName));
      const all = new Set([...markedFields, ...(seen.get(resource) ?? [])]);
      this.sealedFields.set(resource, { marked: markedFields, all });
    }
    await this.saveSealedFields();
  }

  private async saveSealedFields(): Promise<void> {
    const all = new Map([...this.sealedFields].map(([resource, fields]) => [resource, fields.all]));
    await this.options.warehouse.setState(SEALED_FIELDS_STATE_KEY, formatSealedFieldsState(all));
  }

  private sealedFieldsOf(resource: string): { marked: Set<string>; all: Set<string> } {
    let fields = this.sealedFields.get(resource);
    if (!fields) {
      fields = { marked: new Set(), all: new Set() };
      this.sealedFields.set(resource, fields);
    }
    return fields;
  }

  /**
   * Decide once per run which sealed resources cannot answer, and say why once: the team has no
   * public key (the server would refuse them), or the policy needs a key we were not given.
   */
  private planSealedResources(entries: ManifestEntry[], team: Record<string, unknown>): void {
    const secret = entries.filter((entry) => entry.secret && isSafeResourceName(entry.resource));
    if (secret.length === 0) return;
    const { keys } = this.options.secrets;
    const skip = (names: ManifestEntry[], reason: SkipResource) => {
      if (names.length === 0) return;
      for (const entry of names) this.notRequested.set(entry.resource, reason);
      this.options.logger.warn(
        { resources: names.map((entry) => entry.resource) },
        describeError(reason),
      );
    };
    if (team.has_public_key === false) {
      skip(
        secret,
        new SkipResource(
          'Not requested: the team has no public key registered on the server, so the server cannot seal these resources and would refuse them.',
          {
            hint:
              "Run `ocs-sync keygen --out ./keys`, register ./keys/ocs-team-public.pem as the team's public key in Open Chat Studio (a team admin), " +
              'set OCS_PRIVATE_KEY_FILE=./keys/ocs-team-private.pem, and sync again.',
          },
        ),
      );
      return;
    }
    if (!keys.privateKey) {
      skip(
        secret.filter((entry) => needsPrivateKey(this.policyOf(entry))),
        new SkipResource(
          "Not requested: their sealed fields need the team's private key to be opened (secrets policy plaintext or reseal), and none is configured.",
          {
            hint: 'Set OCS_PRIVATE_KEY_FILE (or private_key_file / OCS_PRIVATE_KEY), or set the secrets policy "sealed" or "drop" for them.',
          },
        ),
      );
    }
    if (!keys.archivePublicKey) {
      skip(
        secret.filter(
          (entry) =>
            !this.notRequested.has(entry.resource) && needsArchivePublicKey(this.policyOf(entry)),
        ),
        new SkipResource(
          'Not requested: the "reseal" policy needs secrets.archive_public_key, which is not configured.',
          {
            hint: 'Create one with `ocs-sync keygen --archive --out DIR` and set OCS_ARCHIVE_PUBLIC_KEY.',
          },
        ),
      );
    }
  }

  /**
   * Fields the schema does not mark carry sealed values (a schema not served, or a server newer
   * than it): from now on they are sealed fields, here and in every later run.
   */
  private async learnSealedFields(
    entry: ManifestEntry,
    fields: string[],
    policy: SecretPolicy,
  ): Promise<void> {
    const sealed = this.sealedFieldsOf(entry.resource);
    for (const field of fields) sealed.all.add(field);
    await this.saveSealedFields();
    this.options.logger.warn(
      { resource: entry.resource, fields },
      `${entry.resource}: ${fields.join(', ')} hold sealed values the server's schema does not mark; treated as sealed fields`,
    );
    if (!entry.secret || this.notRequested.has(entry.resource)) {
      const { keys } = this.options.secrets;
      if (needsPrivateKey(policy) && !keys.privateKey) {
        throw new SkipResource(
          `${entry.resource} skipped: ${fields.join(', ')} hold sealed values and the "${policy}" policy needs the team's private key, which is not configured; nothing sealed was stored.`,
          {
            hint: 'Set OCS_PRIVATE_KEY_FILE (or OCS_PRIVATE_KEY), or set the secrets policy "sealed" or "drop" for it.',
          },
        );
      }
      if (needsArchivePublicKey(policy) && !keys.archivePublicKey) {
        throw new SkipResource(
          `${entry.resource} skipped: the "reseal" policy needs secrets.archive_public_key, which is not configured.`,
        );
      }
    }
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
    const fullRefresh = this.isFullRefresh(entry.resource);
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
      report.error = new UnsafeNameError('resource', entry.resource, 'the manifest').message;
      logger.error({ resource: entry.resource.slice(0, 80) }, report.error);
      return report;
    }

    const notRequested = this.notRequested.get(entry.resource);
    if (notRequested) {
      // Said once for the run by planSealedResources; here only recorded.
      await this.record(report, 'skipped', notRequested, started);
      return report;
    }

    let state: ResourceState | undefined;
    let plan: ResourceWalkPlan;
    try {
      state = await this.options.warehouse.getResourceState(entry.resource);
      plan = planResourceWalk({
        entry,
        scope: this.scope,
        cursor: state?.cursor ?? null,
        cursorKey: state?.cursorSelection ?? null,
        fullRefresh,
        chatbotsOf: (key) => this.choices.get(key)?.chatbots.map((chatbot) => chatbot.publicId),
      });
      if (plan.excluded) {
        // Not requested; its table still follows the schema for the day the choice is cleared.
        await this.ensureTable(entry.resource, this.desiredColumns(entry, this.policyOf(entry)));
        await this.record(report, 'excluded', EXCLUDED_BY_CHOICE, started);
        logger.debug({ resource: entry.resource }, report.error);
        return report;
      }
      await this.walk(entry, report, fullRefresh, state, plan);
    } catch (caught) {
      // The choice changed under this run: not an outcome of the resource; the run walks again.
      if (this.selectionChange && this.pass.signal.aborted) throw this.selectionChange;
      const change = asSelectionChange(caught, selectionParameter(this.scope));
      if (change) {
        this.selectionChange = change;
        this.pass.abort();
        throw change;
      }
      const error = this.options.signal?.aborted
        ? interrupted()
        : (asSkip(caught, entry.resource) ?? caught);
      if (
        error instanceof AuthError ||
        error instanceof ServerUnavailableError ||
        error instanceof InterruptedError
      ) {
        await this.record(report, 'failed', error, started);
        throw error;
      }
      if (!(error instanceof OcsSyncError)) throw error;
      // A skip is the configuration or the server saying "not this one": a warning, not a failure.
      const skipped = error instanceof SkipResource;
      await this.record(report, skipped ? 'skipped' : 'failed', error, started);
      logger[skipped ? 'warn' : 'error'](
        { resource: entry.resource, rows: report.rows },
        report.error,
      );
      return report;
    }
    await this.record(report, 'ok', undefined, started);
    logger.info(
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

  private async walk(
    entry: ManifestEntry,
    report: ResourceReport,
    fullRefresh: boolean,
    state: ResourceState | undefined,
    plan: ResourceWalkPlan,
  ): Promise<void> {
    const { source, warehouse, logger, pageSize } = this.options;
    const { resource } = entry;
    const policy = this.policyOf(entry);
    const sealed = this.sealedFieldsOf(resource);
    // Fixed for the walk: every page is requested, and committed, under this choice (a server
    // without choices: nothing, as before choices were known).
    const key = walkKey(this.scope);
    const selection = selectionParameter(this.scope);
    const servedUnder = this.scope.kind === 'unscoped' ? undefined : key;

    let columns = (await this.ensureTable(resource, this.desiredColumns(entry, policy))) ?? [];
    let cursor = plan.cursor;
    if (plan.restartReason !== undefined) {
      logger.debug({ resource, reason: plan.restartReason }, `${resource}: walking from the start`);
    }
    if (!fullRefresh && state?.cursorKind && state.cursorKind !== entry.cursor) {
      logger.warn(
        { resource },
        'The cursor kind changed on the server; walking this resource from the start',
      );
      cursor = null;
    }
    if (cursor === null) this.walkedFromStart.add(resource);
    // A walk from the start under a choice tells which rows the choice no longer serves.
    const missing =
      plan.missing === 'none' && cursor === null && servesPartOfTeam(this.scope)
        ? 'out_of_scope'
        : plan.missing;
    const history = this.historyFor(resource);

    const trail = new CursorTrail(resource, cursor);
    let pageNumber = 0;
    const pages = readAhead<Page, { page: Page; after: string | null }>(
      {
        start: cursor,
        fetch: (from, signal, announce) =>
          source.page(resource, from, pageSize, signal, selection, (head) =>
            announce(head.hasMore && head.cursor !== null ? head.cursor : undefined),
          ),
        settle: (from, page) => {
          pageNumber += 1;
          checkPageHead(resource, pageNumber, page);
          const after = cursorAfterPage(page, entry.cursor, from);
          const last = !hasNextPage(page, pageSize) || after === null;
          // Any cursor followed before in this walk, not only the last one, would loop forever.
          if (!last) trail.follow(after);
          return { value: { page, after }, next: last ? undefined : after };
        },
      },
      this.options.pagesInFlight,
      // The pass's signal follows the run's: one listener per walk, released when it ends.
      this.pass.signal,
    );

    // Write-behind: the warehouse commits a page (on SQLite's writer thread, or in PostgreSQL)
    // while this thread plans and encodes the next one. It commits pages in the order they are
    // handed over and none after one that failed (warehouse/commit-order.ts). While a page is
    // committing, the walk changes nothing else in the warehouse but the values' originals.
    const walk = `${this.runId}/${resource}`;
    let committing: Promise<void> | undefined;
    const settle = async () => {
      const pending = committing;
      committing = undefined;
      await pending;
    };
    try {
      for await (const { page, after } of pages) {
        this.throwIfAborted();
        let rows = page.rows;
        if (rows.length === 0 && (after === cursor || fullRefresh)) continue;
        // An excluded field is never stored, so never opened either.
        const excluded = this.excludedFields(resource);
        rows = withoutFields(rows, [...excluded]);
        const found = detectSealedFields(rows, sealed.all);
        if (found.length > 0) {
          await settle();
          await this.learnSealedFields(entry, found, policy);
        }
        if (sealed.all.size > 0) {
          // Opened on the pool's threads: other walks go on meanwhile.
          rows = await applySealingPolicy(
            resource,
            rows,
            sealed,
            policy,
            this.options.secrets.keys,
            {
              opener: this.opener,
              signal: this.pass.signal,
            },
          );
          const sealedPlan = planSealedColumns(
            resource,
            columns,
            [...sealed.all].filter((field) => isSafeFieldName(field) && !excluded.includes(field)),
            policy,
          );
          if (sealedPlan.changes.length > 0) await settle();
          columns = await this.applyChanges(sealedPlan.changes, sealedPlan.columns);
        }
        const rowPlan = planColumnsForRows(resource, columns, rows);
        for (const field of rowPlan.refusedFields) {
          const message = new UnsafeNameError('field', field, resource).message;
          if (!report.warnings.includes(message)) {
            report.warnings.push(message);
            logger.error({ resource }, message);
          }
        }
        if (rowPlan.changes.length > 0) await settle();
        columns = await this.applyChanges(rowPlan.changes, rowPlan.columns);
        if (sealed.all.size > 0) {
          rows = await this.stableSealedValues(resource, columns, rows, [...sealed.all], policy);
        }
        // Saved beside the page, not in it: no need to wait for the page ahead.
        await keepOriginalValues(warehouse, resource, columns, rows);
        const written = warehouse
          .writePage({
            runId: this.runId,
            resource,
            columns,
            rows: withoutFields(rows, rowPlan.refusedFields),
            // A full refresh leaves the incremental cursor alone until it has walked everything.
            cursor: fullRefresh ? null : after,
            cursorKind: entry.cursor,
            history,
            selection: servedUnder,
            walk,
          })
          .then((result) => {
            report.rows += result.rowsWritten;
            report.pages += 1;
            this.totals.rows += result.rowsWritten;
            this.totals.pages += 1;
            report.valuesAltered += result.valuesAltered;
            this.options.events?.onPageWritten?.({
              resource,
              rows: result.rowsWritten,
              valuesAltered: result.valuesAltered,
            });
            this.progress({
              stage: `${fullRefresh ? 'full refresh of' : 'syncing'} ${resource}`,
              done: report.rows,
              unit: 'rows',
            });
          });
        // Awaited below or in `finally`; a failure of the page ahead of it is the one reported.
        written.catch(() => undefined);
        cursor = after;
        const ahead = committing;
        committing = written;
        await ahead;
      }
      await settle();
    } finally {
      // Never leave a page committing behind a failure or an abort.
      await committing?.catch(() => undefined);
    }
    if (report.valuesAltered > 0) {
      // Reported, not a failure: the rows are stored, minus characters the database cannot hold.
      logger.warn(
        { resource, valuesAltered: report.valuesAltered },
        `${report.valuesAltered} value(s) of ${resource} had NUL characters removed to fit the database`,
      );
    }
    if (missing !== 'none') this.throwIfAborted();
    // Only a complete walk may say what is gone or out of the choice. One statement on the
    // warehouse's side, whatever the table's size: nothing per row here.
    const marking =
      missing === 'out_of_scope'
        ? `marking rows of ${resource} the chatbot choice no longer serves`
        : `marking rows of ${resource} the server no longer has`;
    const marksNow = missing === 'delete' || (missing === 'out_of_scope' && !plan.provesDeletions);
    if (marksNow) this.progress({ stage: marking, done: 0, unit: 'rows' });
    if (missing === 'delete') {
      report.deleted = await warehouse.markMissingAsDeleted(
        resource,
        this.runId,
        this.options.deletes,
        history,
      );
    } else if (missing === 'out_of_scope' && plan.provesDeletions) {
      // Settled when every walk is done: the proofs read what the other walks served.
      this.awaitingProofs.set(resource, key);
    } else if (missing === 'out_of_scope') {
      const marked = await warehouse.markMissingUnderChoice(resource, this.runId, {
        selection: key,
        mode: this.options.deletes,
        history,
      });
      report.deleted = marked.deleted;
      report.outOfScope = marked.outOfScope;
    }
    if (marksNow) {
      this.progress({
        stage: marking,
        done: report.deleted + (report.outOfScope ?? 0),
        unit: 'rows',
      });
    }
    if (fullRefresh) {
      // The cursor moves to where the walk ended (a stored one stays only under its own choice).
      const stored =
        (state?.cursorSelection ?? WHOLE_TEAM_KEY) === key ? (state?.cursor ?? null) : null;
      await warehouse.writePage({
        runId: this.runId,
        resource,
        columns,
        rows: [],
        cursor: cursor ?? stored,
        cursorKind: entry.cursor,
        history: false,
        selection: servedUnder,
      });
    }
  }

  private policyOf(entry: ManifestEntry): SecretPolicy {
    return this.options.secrets.policyFor(entry.resource);
  }

  /** The schema's columns for a resource, with sealed fields typed by the policy. */
  private desiredColumns(entry: ManifestEntry, policy: SecretPolicy): ColumnSpec[] | undefined {
    const fromSchema = this.schema?.tables.get(entry.resource);
    if (!fromSchema) return undefined;
    const sealed = this.sealedFieldsOf(entry.resource).all;
    return this.withoutExcluded(entry.resource, fromSchema).map((column) =>
      sealed.has(column.name) ? { name: column.name, type: sealedColumnType(policy) } : column,
    );
  }

  private excludedFields(table: string): readonly string[] {
    return valueByName(this.options.excludeFields, table) ?? [];
  }

  private withoutExcluded(table: string, columns: ColumnSpec[]): ColumnSpec[] {
    const excluded = this.excludedFields(table);
    return excluded.length === 0
      ? columns
      : columns.filter((column) => !excluded.includes(column.name));
  }

  /** Create or evolve a table to the desired columns; returns its columns (undefined: no table yet). */
  private async ensureTable(
    table: string,
    desired: ColumnSpec[] | undefined,
  ): Promise<ColumnSpec[] | undefined> {
    let existing = await this.options.warehouse.describeTable(table);
    // A field newly excluded: its stored column is emptied and dropped (history too).
    const excluded = existing?.filter((column) => this.excludedFields(table).includes(column.name));
    if (existing && excluded && excluded.length > 0) {
      existing = await this.applyChanges(
        excluded.map((column) => ({
          kind: 'drop_column',
          table,
          column: column.name,
          fromType: column.type,
          reason: 'excluded',
        })),
        this.withoutExcluded(table, existing),
      );
    }
    if (desired) desired = this.withoutExcluded(table, desired);
    if (!desired) {
      if (existing) return existing;
      return this.applyChanges(planTable(table, undefined, [], 'rows').changes, []);
    }
    const plan = planTable(table, existing, desired, 'schema');
    return this.applyChanges(plan.changes, plan.columns);
  }

  private async applyChanges(
    changes: SchemaChange[],
    columns: ColumnSpec[],
  ): Promise<ColumnSpec[]> {
    if (changes.length === 0) return columns;
    await this.options.warehouse.applySchemaChanges(changes, this.checksums);
    for (const change of changes) {
      this.schemaChanges.push(change);
      this.options.events?.onSchemaChange?.(change);
      const event = {
        id: change.column === undefined ? change.table : `${change.table}.${change.column}`,
        message: `Schema: ${describeSchemaChange(change)}`,
        fields: { table: change.table, change: change.kind },
      };
      // A value that did not fit is a warning of its own, and a dropped column (exclude_fields)
      // is rare and deliberate; new tables and columns are summed per kind.
      if (change.reason === 'value') this.options.logger.warn(event.fields, event.message);
      else if (change.kind === 'drop_column') this.options.logger.info(event.fields, event.message);
      else repeatedEvents(this.options.logger).add(SCHEMA_CHANGE_KINDS[change.kind], event);
    }
    return columns;
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

  /**
   * Under the `sealed` and `reseal` policies, sealed text changes on every export for the same
   * content: rows whose other fields are as stored keep their stored sealed text (history only,
   * where it would make a version of every such row on every full refresh).
   */
  private async stableSealedValues(
    resource: string,
    columns: readonly ColumnSpec[],
    rows: Row[],
    sealed: readonly string[],
    policy: SecretPolicy,
  ): Promise<Row[]> {
    if (policy !== 'sealed' && policy !== 'reseal') return rows;
    if (!this.historyFor(resource) || rows.length === 0) return rows;
    const kept = sealed.filter((field) => columns.some((column) => column.name === field));
    if (kept.length === 0) return rows;
    const stored = await this.options.warehouse.readRowsById(
      resource,
      columns,
      rows.map((row) => String(row.id)),
    );
    const others = rowContentHasher(columns.filter((column) => !kept.includes(column.name)));
    return keepStoredSealedValues(rows, stored as Row[], kept, others);
  }

  private isFullRefresh(resource: string): boolean {
    const { fullRefresh } = this.options;
    if (!fullRefresh) return false;
    return fullRefresh === true || fullRefresh.length === 0 || fullRefresh.includes(resource);
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
    const warnings = report.warnings.length > 0 ? report.warnings.join(' ') : undefined;
    await this.options.warehouse.recordResourceOutcome({
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

/**
 * Records a run that failed before it could start (the manifest could not be read, the
 * configuration or a key could not be used), so `status` and `runs` show it like any other.
 */
export async function recordFailedRun(
  warehouse: Warehouse,
  kind: RunKind,
  error: unknown,
  requests = 0,
): Promise<void> {
  const runId = await warehouse.startRun(kind, null);
  await warehouse.finishRun(runId, {
    status: error instanceof InterruptedError ? 'interrupted' : 'failed',
    rows: 0,
    pages: 0,
    requests,
    error: describeError(error),
  });
}

function interrupted(): InterruptedError {
  return new InterruptedError(
    'The run was interrupted; every committed page is kept and the next run resumes from there.',
  );
}

/** A resource that cannot be synced in this configuration; the rest of the run goes on. */
class SkipResource extends OcsSyncError {}

/** 404 (not on this server) and the sealed-without-public-key 400 skip the resource; the rest fail it. */
function asSkip(error: unknown, resource: string): SkipResource | undefined {
  if (!(error instanceof HttpStatusError)) return undefined;
  if (error.status === 404) {
    return new SkipResource(
      `${resource} skipped: the server does not export it (HTTP 404: ${error.detail})`,
      {
        hint: 'Remove it from `resources`, or upgrade the server.',
      },
    );
  }
  // 400 as REFERENCE.md says; newer servers document a 409 for the same refusal.
  if ((error.status === 400 || error.status === 409) && /public key/i.test(error.detail)) {
    return new SkipResource(`${resource} skipped: the server says "${error.detail}"`, {
      hint: 'Register the team public key printed by `ocs-sync keygen` on the team, then sync again.',
    });
  }
  return undefined;
}

/** The team's chatbot choice changed under the run (the server's 409 to a `selection`). */
class SelectionChangedError extends OcsSyncError {
  constructor(readonly detail: string) {
    super(`HTTP 409: "${detail}"`);
  }
}

/**
 * A 409 to a request that carried `selection`, but not the sealed-without-public-key refusal
 * some servers answer with a 409 too: the choice changed, whatever the detail's words.
 */
function asSelectionChange(
  error: unknown,
  selection: string | undefined,
): SelectionChangedError | undefined {
  if (selection === undefined || !(error instanceof HttpStatusError)) return undefined;
  if (error.status !== 409 || /public key/i.test(error.detail)) return undefined;
  return new SelectionChangedError(error.detail);
}

/** The tables among `names` that exist, with their data columns. */
export async function storedTables(
  warehouse: Pick<Warehouse, 'describeTable'>,
  names: readonly string[],
): Promise<Map<string, ColumnSpec[]>> {
  const tables = new Map<string, ColumnSpec[]>();
  for (const name of names) {
    if (!isSafeResourceName(name)) continue;
    const columns = await warehouse.describeTable(name);
    if (columns) tables.set(name, columns);
  }
  return tables;
}

async function someAsync<T>(
  items: T[],
  predicate: (item: T) => Promise<boolean>,
): Promise<boolean> {
  for (const item of items) if (await predicate(item)) return true;
  return false;
}

interface MarkedState {
  checksum: string;
  published: boolean;
  fields: Map<string, string[]>;
}

function parseMarkedState(text: string | undefined): MarkedState | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = JSON.parse(text) as {
      checksum?: unknown;
      published?: unknown;
      fields?: unknown;
    };
    if (typeof parsed.checksum !== 'string') return undefined;
    return {
      checksum: parsed.checksum,
      published: parsed.published === true,
      fields: new Map(
        [...parseSealedFieldsState(JSON.stringify(parsed.fields ?? {}))].map(([resource, set]) => [
          resource,
          [...set],
        ]),
      ),
    };
  } catch {
    return undefined;
  }
}
