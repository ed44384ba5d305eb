/**
 * The measured stages. Each runs in a fresh child process (stage-process.ts), so the peak RSS it
 * reports is the stage's own. Times cover the measured work only: not process start, not opening
 * the warehouse, not generating the write-only rows.
 */
import { createPrivateKey } from 'node:crypto';
import pg from 'pg';
import type { ColumnSpec, PageWriteResult, Warehouse } from '../src/interfaces.js';
import { createLogger, type Logger } from '../src/log.js';
import { HttpExportSource } from '../src/source/http-source.js';
import { FULL_REFRESH_ALL, runSync } from '../src/sync/engine.js';
import { columnsFromOpenApi } from '../src/sync/openapi-columns.js';
import { cursorAfterPage, hasNextPage, planTable } from '../src/sync/plan.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { openApiFromFixture } from '../src/fake-server/fixture.js';
import { BENCH_RESOURCE, benchFixture, generateBenchPages } from './bench-dataset.js';
import { runDesign, type OverlapDesign } from './overlap-designs.js';
import { verifyAudit } from '../src/audit/verify.js';
import { chaseCursors } from './cursor-chase.js';

/** Where a stage writes: a SQLite file or a PostgreSQL schema. */
export interface WarehouseTarget {
  url: string;
  /** PostgreSQL only: the (fresh) schema. */
  schema?: string;
  /** PostgreSQL only: drop the schema when the stage is done. */
  dropSchemaAfter?: boolean;
}

export interface ServerTarget {
  url: string;
  apiKey: string;
}

export type StageRequest =
  /**
   * runSync with the real HTTP source: a full sync into a fresh warehouse, or a rerun; with
   * `fullRefresh`, a full refresh of the warehouse (walk from the start, mark what is gone).
   */
  | {
      kind: 'sync';
      server: ServerTarget;
      warehouse: WarehouseTarget;
      pageSize: number;
      pagesInFlight: number;
      /** What the warehouse keeps besides the rows (default none): history, or the audit chain. */
      keep?: Keeping;
      fullRefresh?: boolean;
      /** Resources walked at once (default 1). */
      concurrency?: number;
      /** Only these resources (default all). */
      resources?: string[];
      /** The team's private key (PEM): sealed values are opened (`plaintext`). */
      privateKeyPem?: string;
    }
  /** The same pages fetched and parsed through HttpExportSource, nothing stored. */
  | { kind: 'fetch-only'; server: ServerTarget; pageSize: number }
  /** The cursor-chasing loop (cursor-chase.ts): the next request as soon as a head names it. */
  | { kind: 'cursor-chase'; server: ServerTarget; pageSize: number; rows: number }
  /** The same rows (generated page by page here) written with writePage as the sync does, no network. */
  | {
      kind: 'write-only';
      warehouse: WarehouseTarget;
      rows: number;
      seed: number;
      pageSize: number;
      keep?: Keeping;
    }
  /** `audit verify` over a warehouse an audited write-only stage built. */
  | { kind: 'verify'; warehouse: WarehouseTarget }
  /** The server's own client: fetch a page at limit 100, write it, then the next; nothing overlaps. */
  | { kind: 'baseline'; server: ServerTarget; warehouse: WarehouseTarget; pageSize: number }
  /** A candidate overlap design (overlap-designs.ts) walking into a fresh SQLite warehouse. */
  | {
      kind: 'design';
      design: OverlapDesign;
      server: ServerTarget;
      warehouse: WarehouseTarget;
      pageSize: number;
      pagesInFlight: number;
    };

/** What a warehouse keeps besides the rows. */
export type Keeping = 'none' | 'history' | 'audit';

export interface StageResult {
  rows: number;
  pages: number;
  seconds: number;
  /** CPU time (user + system) of the stage's process during the measured work. */
  cpuSeconds: number;
  /**
   * CPU time of the whole stage process, start-up included (the goals count it), minus
   * work that is not the stage's (the write-only floor's row generation).
   */
  processCpuSeconds: number;
  /** Wall time of that work, taken off the process's wall time by the parent. */
  excludedSeconds: number;
  /** HTTP requests the stage sent (0 without network). */
  requests: number;
  /** The process's peak resident set, MB (1 MB = 2^20 bytes). */
  peakRssMb: number;
  /** RSS sampled every 50 ms during the measured work, at 10%, 50%, 90% and 100% of it, MB. */
  rssProfileMb: number[];
  /** Rows a full refresh marked deleted. */
  deleted?: number;
  /** Each resource a sync walked: its rows and how long its walk took. */
  walks?: Array<{ resource: string; rows: number; seconds: number }>;
}

const MB = 1024 * 1024;

/** What a stage measures itself; cpuSeconds when only part of the work is measured. */
type Measured = Omit<
  StageResult,
  'peakRssMb' | 'rssProfileMb' | 'cpuSeconds' | 'processCpuSeconds' | 'excludedSeconds'
> & {
  cpuSeconds?: number;
  /** Seconds of this process's work (wall and CPU alike) that are not the stage's. */
  excludedSeconds?: number;
};

export async function runStage(request: StageRequest): Promise<StageResult> {
  const logger = createLogger({ level: 'warn', pretty: false });
  const sampler = startRssSampler();
  let measured: Measured;
  switch (request.kind) {
    case 'sync':
      measured = await syncStage(request, logger, sampler);
      break;
    case 'fetch-only':
      measured = await fetchOnlyStage(request, logger, sampler);
      break;
    case 'cursor-chase': {
      const started = sampler.begin();
      const chased = await chaseCursors(request.server, BENCH_RESOURCE, request.pageSize);
      const seconds = (performance.now() - started) / 1000;
      sampler.end();
      // Nothing is parsed: the rows are the server's.
      measured = { rows: request.rows, pages: chased.pages, seconds, requests: chased.requests };
      break;
    }
    case 'write-only':
      measured = await writeOnlyStage(request, logger, sampler);
      break;
    case 'baseline':
      measured = await baselineStage(request, logger, sampler);
      break;
    case 'design':
      measured = await designStage(request, logger, sampler);
      break;
    case 'verify':
      measured = await verifyStage(request, logger, sampler);
      break;
  }
  sampler.stop();
  const total = process.cpuUsage();
  const excludedSeconds = measured.excludedSeconds ?? 0;
  // resourceUsage().maxRSS is in kilobytes.
  return {
    ...measured,
    excludedSeconds,
    processCpuSeconds: (total.user + total.system) / 1e6 - excludedSeconds,
    cpuSeconds: measured.cpuSeconds ?? sampler.cpuSeconds(),
    peakRssMb: (process.resourceUsage().maxRSS * 1024) / MB,
    rssProfileMb: sampler.profile(),
  };
}

function createSource(server: ServerTarget, logger: Logger, connections: number): HttpExportSource {
  return new HttpExportSource({
    baseUrl: server.url,
    apiKey: server.apiKey,
    authScheme: 'api-key',
    requestTimeoutMs: 120_000,
    maxAttempts: 3,
    minRetryDelayMs: 100,
    maxRetryDelayMs: 2_000,
    maxRequestsPerMinute: 0,
    userAgent: 'ocs-sync-bench',
    connections,
    logger,
  });
}

async function openTarget(
  target: WarehouseTarget,
  logger: Logger,
  keep: Keeping = 'none',
): Promise<Warehouse> {
  const warehouse = await openWarehouse({ url: target.url, schema: target.schema, logger });
  if (keep === 'audit') await warehouse.audit.enable();
  return warehouse;
}

async function closeTarget(warehouse: Warehouse, target: WarehouseTarget): Promise<void> {
  await warehouse.close();
  if (target.dropSchemaAfter && target.schema) await dropPostgresSchema(target.url, target.schema);
}

/** Opens the stage's warehouse and HTTP source, runs `work`, and closes both. */
async function withWarehouseAndSource<T>(
  targets: { warehouse: WarehouseTarget; server: ServerTarget; keep?: Keeping },
  logger: Logger,
  connections: number,
  work: (warehouse: Warehouse, source: HttpExportSource) => Promise<T>,
): Promise<T> {
  const warehouse = await openTarget(targets.warehouse, logger, targets.keep);
  const source = createSource(targets.server, logger, connections);
  try {
    return await work(warehouse, source);
  } finally {
    await source.close();
    await closeTarget(warehouse, targets.warehouse);
  }
}

/** As a sync starts: the lock, the table from the OpenAPI document, a run; finish() ends both. */
async function startBenchRun(warehouse: Warehouse, source: HttpExportSource) {
  const lock = await warehouse.acquireLock(10_000);
  const manifest = await source.manifest();
  const columns = await prepareTable(warehouse, benchColumns(await source.openApi()));
  const runId = await warehouse.bookkeeping.startRun('incremental', manifest.schemaChecksum);
  return {
    columns,
    runId,
    async finish(summary: { rows: number; pages: number; requests: number }): Promise<void> {
      await warehouse.bookkeeping.finishRun(runId, { status: 'ok', ...summary });
      await lock.release();
    },
  };
}

export async function dropPostgresSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema.replace(/"/g, '""')}" CASCADE`);
  } finally {
    await client.end();
  }
}

async function syncStage(
  request: Extract<StageRequest, { kind: 'sync' }>,
  logger: Logger,
  sampler: RssSampler,
): Promise<Measured> {
  return withWarehouseAndSource(
    request,
    logger,
    request.pagesInFlight * (request.concurrency ?? 1) + 1,
    async (warehouse, source) => {
      const started = sampler.begin();
      const report = await runSync({
        source,
        warehouse,
        logger,
        pageSize: request.pageSize,
        secrets: {
          policyFor: () => 'plaintext',
          keys: request.privateKeyPem
            ? { privateKey: createPrivateKey(request.privateKeyPem) }
            : {},
        },
        onSchemaChange: 'evolve',
        history: (request.keep ?? 'none') !== 'none',
        deletes: 'mark',
        pagesInFlight: request.pagesInFlight,
        concurrency: request.concurrency ?? 1,
        lockWaitMs: 10_000,
        fullRefresh: request.fullRefresh ? FULL_REFRESH_ALL : undefined,
        resources: request.resources,
      });
      const seconds = (performance.now() - started) / 1000;
      sampler.end();
      if (report.status !== 'ok') {
        throw new Error(
          `The benchmark sync ended ${report.status}: ${report.resources.map((r) => r.error ?? '').join(' ')}`,
        );
      }
      return {
        rows: report.rows,
        pages: report.pages,
        seconds,
        requests: source.requestCount,
        walks: report.resources.map((walk) => ({
          resource: walk.resource,
          rows: walk.rows,
          seconds: walk.durationMs / 1000,
        })),
        ...(request.fullRefresh
          ? { deleted: report.resources.reduce((sum, resource) => sum + resource.deleted, 0) }
          : {}),
      };
    },
  );
}

async function fetchOnlyStage(
  request: Extract<StageRequest, { kind: 'fetch-only' }>,
  logger: Logger,
  sampler: RssSampler,
): Promise<Measured> {
  const source = createSource(request.server, logger, 1);
  try {
    const started = sampler.begin();
    let cursor: string | null = null;
    let rows = 0;
    let pages = 0;
    for (;;) {
      const page = await source.page(BENCH_RESOURCE, cursor, request.pageSize);
      rows += page.rows.length;
      pages += 1;
      if (!hasNextPage(page, request.pageSize)) break;
      cursor = cursorAfterPage(page, 'updated_at_id', cursor);
    }
    const seconds = (performance.now() - started) / 1000;
    sampler.end();
    return { rows, pages, seconds, requests: source.requestCount };
  } finally {
    await source.close();
  }
}

/** The benchmark table's columns as the engine derives them from the fixture's OpenAPI. */
function benchColumns(openApi: unknown): ColumnSpec[] {
  const columns = columnsFromOpenApi(openApi).tables.get(BENCH_RESOURCE);
  if (!columns) throw new Error(`The OpenAPI document has no ${BENCH_RESOURCE} rows.`);
  return columns;
}

/** The bench resource's columns from the fixture's OpenAPI document. */
export function benchColumnsOf(): ColumnSpec[] {
  return benchColumns(openApiFromFixture(benchFixture()));
}

/** Creates the table as the engine would (no-op when it exists). */
async function prepareTable(warehouse: Warehouse, columns: ColumnSpec[]): Promise<ColumnSpec[]> {
  const existing = await warehouse.describeTable(BENCH_RESOURCE);
  const plan = planTable(BENCH_RESOURCE, existing, columns, 'schema');
  if (plan.changes.length > 0)
    await warehouse.applySchemaChanges(plan.changes, { from: null, to: null });
  return plan.columns;
}

async function writeOnlyStage(
  request: Extract<StageRequest, { kind: 'write-only' }>,
  logger: Logger,
  sampler: RssSampler,
): Promise<Measured> {
  const warehouse = await openTarget(request.warehouse, logger, request.keep);
  try {
    const lock = await warehouse.acquireLock(10_000);
    const columns = await prepareTable(warehouse, benchColumns(openApiFromFixture(benchFixture())));
    const runId = await warehouse.bookkeeping.startRun('incremental', null);
    let cursor: string | null = null;
    let rows = 0;
    let pages = 0;
    // As the sync writes: each page handed over while the one ahead commits (write-behind).
    let committing: Promise<PageWriteResult> | undefined;
    // Generating the rows is not part of the floor: its time (this thread, busy) is taken off.
    let generatingMs = 0;
    const generator = generateBenchPages(request.rows, request.pageSize, request.seed);
    const started = sampler.begin();
    const cpuBefore = process.cpuUsage();
    for (;;) {
      const generating = performance.now();
      const next = generator.next();
      generatingMs += performance.now() - generating;
      if (next.done) break;
      const page = next.value;
      cursor = cursorAfterPage(
        { rows: page, cursor: null, hasMore: false, bare: false },
        'updated_at_id',
        cursor,
      );
      const written = warehouse.writePage({
        runId,
        resource: BENCH_RESOURCE,
        columns,
        rows: page,
        cursor,
        cursorKind: 'updated_at_id',
        history: (request.keep ?? 'none') !== 'none',
        walk: `${runId}/${BENCH_RESOURCE}`,
      });
      written.catch(() => undefined);
      if (committing) rows += (await committing).rowsWritten;
      committing = written;
      pages += 1;
    }
    if (committing) rows += (await committing).rowsWritten;
    const cpu = process.cpuUsage(cpuBefore);
    const seconds = (performance.now() - started - generatingMs) / 1000;
    sampler.end();
    await warehouse.bookkeeping.finishRun(runId, { status: 'ok', rows, pages, requests: 0 });
    await lock.release();
    return {
      rows,
      pages,
      seconds,
      cpuSeconds: (cpu.user + cpu.system) / 1e6 - generatingMs / 1000,
      excludedSeconds: generatingMs / 1000,
      requests: 0,
    };
  } finally {
    await closeTarget(warehouse, request.warehouse);
  }
}

async function baselineStage(
  request: Extract<StageRequest, { kind: 'baseline' }>,
  logger: Logger,
  sampler: RssSampler,
): Promise<Measured> {
  return withWarehouseAndSource(request, logger, 1, async (warehouse, source) => {
    const started = sampler.begin();
    const { columns, runId, finish } = await startBenchRun(warehouse, source);
    let cursor: string | null = null;
    let rows = 0;
    let pages = 0;
    // One request at a time: fetch a page, write it, then ask for the next.
    for (;;) {
      const page = await source.page(BENCH_RESOURCE, cursor, request.pageSize);
      const after = cursorAfterPage(page, 'updated_at_id', cursor);
      if (page.rows.length > 0) {
        const result = await warehouse.writePage({
          runId,
          resource: BENCH_RESOURCE,
          columns,
          rows: page.rows,
          cursor: after,
          cursorKind: 'updated_at_id',
          history: false,
        });
        rows += result.rowsWritten;
      }
      pages += 1;
      cursor = after;
      if (!hasNextPage(page, request.pageSize)) break;
    }
    await finish({ rows, pages, requests: source.requestCount });
    const seconds = (performance.now() - started) / 1000;
    sampler.end();
    return { rows, pages, seconds, requests: source.requestCount };
  });
}

async function designStage(
  request: Extract<StageRequest, { kind: 'design' }>,
  logger: Logger,
  sampler: RssSampler,
): Promise<Measured> {
  return withWarehouseAndSource(
    request,
    logger,
    request.pagesInFlight + 1,
    async (warehouse, source) => {
      const started = sampler.begin();
      const { columns, runId, finish } = await startBenchRun(warehouse, source);
      const walked = await runDesign({
        design: request.design,
        server: request.server,
        path: request.warehouse.url,
        columns,
        runId,
        pageSize: request.pageSize,
        depth: request.pagesInFlight,
        source,
        logger,
      });
      await finish(walked);
      const seconds = (performance.now() - started) / 1000;
      sampler.end();
      return { ...walked, seconds, requests: walked.requests + source.requestCount };
    },
  );
}

async function verifyStage(
  request: Extract<StageRequest, { kind: 'verify' }>,
  logger: Logger,
  sampler: RssSampler,
): Promise<Measured> {
  const warehouse = await openTarget(request.warehouse, logger);
  try {
    const started = sampler.begin();
    const snapshot = await warehouse.audit.snapshot();
    let report;
    try {
      report = await verifyAudit({ snapshot });
    } finally {
      await snapshot.close();
    }
    const seconds = (performance.now() - started) / 1000;
    sampler.end();
    if (!report.intact) {
      throw new Error(
        `audit verify found ${report.problemCount} problem(s) in the bench warehouse`,
      );
    }
    return { rows: report.versions, pages: report.entries, seconds, requests: 0 };
  } finally {
    await closeTarget(warehouse, request.warehouse);
  }
}

interface RssSampler {
  /** Starts the measured part; returns performance.now(). */
  begin(): number;
  end(): void;
  stop(): void;
  profile(): number[];
  /** CPU seconds between begin() and end(). */
  cpuSeconds(): number;
}

/** RSS every 50 ms during the measured part, to see whether memory grows along the run. */
function startRssSampler(): RssSampler {
  const samples: number[] = [];
  let timer: NodeJS.Timeout | undefined;
  let cpuAtBegin: NodeJS.CpuUsage | undefined;
  let cpu: NodeJS.CpuUsage | undefined;
  const sample = () => samples.push(process.memoryUsage.rss() / MB);
  const stop = () => {
    if (timer) clearInterval(timer);
    timer = undefined;
  };
  return {
    begin() {
      cpuAtBegin = process.cpuUsage();
      sample();
      timer = setInterval(sample, 50);
      return performance.now();
    },
    end() {
      if (cpuAtBegin) cpu = process.cpuUsage(cpuAtBegin);
      stop();
      sample();
    },
    cpuSeconds() {
      return cpu ? (cpu.user + cpu.system) / 1e6 : 0;
    },
    stop,
    profile() {
      if (samples.length === 0) return [];
      const at = (share: number) =>
        samples[Math.min(samples.length - 1, Math.round(share * (samples.length - 1)))]!;
      return [at(0.1), at(0.5), at(0.9), at(1)].map((value) => Math.round(value * 10) / 10);
    },
  };
}
