/** Shared test plumbing: a fake server, a fresh warehouse, the CLI with captured output. */
import { generateKeyPairSync, randomFill } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { main } from '../src/cli/main.js';
import { silentLogger } from '../src/log.js';
import { runSync, type SyncOptions, type SyncReport } from '../src/sync/engine.js';
import type { Warehouse } from '../src/interfaces.js';
import { HttpExportSource, type HttpSourceOptions } from '../src/source/http-source.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { projectRoot } from '../src/package-info.js';
import {
  connectPostgres,
  normalizeSourceRow,
  readTable,
  sqliteQuery,
  type StoredRow,
} from '../bench/warehouse-rows.js';

export { storedFormOf } from '../bench/warehouse-rows.js';

/** Node's arguments that run the CLI from source as its own process (run-cli-from-source.ts). */
export const CLI_FROM_SOURCE = [
  join(dirname(createRequire(import.meta.url).resolve('vite-node/package.json')), 'vite-node.mjs'),
  'test/run-cli-from-source.ts',
];

export const ADMIN_KEY = 'test-admin-key';
export const MEMBER_KEY = 'test-member-key';

/** `../shared/ocs-export` beside the repository, when it is there. */
export const SHARED_EXPORT_DIR = resolve(
  dirname(fileURLToPath(import.meta.url)),
  '../../shared/ocs-export',
);
export const hasSharedExport = existsSync(join(SHARED_EXPORT_DIR, 'manifest.json'));

export function temporaryDirectory(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'ocs-sync-test-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

let cachedKeys: { publicKey: string; privateKey: string } | undefined;

/** One 2048-bit team key pair per test file (generation is the slow part). */
export function teamKeys(): { publicKey: string; privateKey: string } {
  cachedKeys ??= generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return cachedKeys;
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** Log lines (JSON) the run wrote. */
  logs: string;
}

/** Run the CLI in-process with its own environment and captured output. */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  /** `terminal`: the log stream is a terminal (live progress lines are drawn on it). */
  options: { signal?: AbortSignal; terminal?: boolean } = {},
): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  let logs = '';
  const logStream = new Writable({
    write(chunk, _encoding, callback) {
      logs += chunk.toString();
      callback();
    },
  }) as Writable & { isTTY?: boolean; columns?: number };
  if (options.terminal) {
    logStream.isTTY = true;
    logStream.columns = 120;
  }
  const code = await main(argv, {
    env: { OCS_LOG_LEVEL: 'info', ...env },
    output: { out: (line) => (stdout += `${line}\n`), err: (line) => (stderr += `${line}\n`) },
    logStream,
    signal: options.signal,
  });
  return { code, stdout, stderr, logs };
}

/** A command that runs until stopped (`daemon`, `serve`), in-process, its logs kept as they come. */
export interface BackgroundCli {
  logs(): string;
  /** Resolves with its exit code once it ends. */
  readonly exit: Promise<number>;
  /** Stops it (as SIGTERM would) and resolves with its exit code. */
  stop(): Promise<number>;
  /** `http://HOST:PORT` of the health server it logged it serves on. */
  healthUrl(): Promise<string>;
}

export function startCli(argv: string[], env: Record<string, string | undefined>): BackgroundCli {
  const controller = new AbortController();
  let logs = '';
  const keep = (text: string) => (logs += text);
  const exit = main(argv, {
    env,
    output: { out: (line) => keep(`${line}\n`), err: (line) => keep(`${line}\n`) },
    logStream: new Writable({
      write(chunk, _encoding, done) {
        keep(chunk.toString());
        done();
      },
    }),
    signal: controller.signal,
  });
  return {
    logs: () => logs,
    exit,
    stop: () => {
      controller.abort();
      return exit;
    },
    healthUrl: () =>
      waitFor(() => /"listen":"([\d.]+:\d+)"/.exec(logs)?.[1], 'the health server', 120_000).then(
        (listen) => `http://${listen}`,
      ),
  };
}

/** Environment for a sync against a fake server into a SQLite file. */
export function syncEnv(
  url: string,
  warehouseEnv: Record<string, string>,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    OCS_BASE_URL: url,
    OCS_API_KEY: ADMIN_KEY,
    ...warehouseEnv,
    OCS_PRIVATE_KEY: teamKeys().privateKey,
    ...extra,
  };
}

/**
 * A fresh warehouse of one dialect for end-to-end tests: the env that points ocs-sync at it, and a
 * reader that gives tables back in the source's shape, so the same assertions run on every dialect.
 */
export interface TestWarehouse {
  dialect: 'sqlite' | 'postgres';
  env: Record<string, string>;
  /** Where file contents of this warehouse go (the default beside SQLite; set for PostgreSQL). */
  filesDir: string;
  readTable(table: string, options?: { includeDeleted?: boolean }): Promise<StoredRow[]>;
  query(sql: string): Promise<StoredRow[]>;
  dispose(): Promise<void>;
}

const postgresUrl = process.env.OCS_TEST_POSTGRES_URL;
const requestedDialects = process.env.OCS_TEST_DIALECTS?.split(',').map((name) => name.trim());

/**
 * PostgreSQL suites run when OCS_TEST_POSTGRES_URL is set. Without it they are skipped with a
 * message on a developer's machine (so `npm test` passes on a fresh clone), but in CI, or when
 * OCS_TEST_DIALECTS names postgres, they run and fail: never a silent skip there.
 */
const postgresRequired =
  Boolean(process.env.CI) || Boolean(requestedDialects?.includes('postgres'));
const postgresRuns = Boolean(postgresUrl) || postgresRequired;
if (!postgresRuns && (!requestedDialects || requestedDialects.includes('postgres'))) {
  console.warn(
    'PostgreSQL suites skipped: OCS_TEST_POSTGRES_URL is not set (source .ci/postgres.sh to start a throwaway cluster).',
  );
}

/** The dialects end-to-end suites loop over (kysely-style). */
export const testDialects: Array<'sqlite' | 'postgres'> = (['sqlite', 'postgres'] as const).filter(
  (dialect) =>
    (!requestedDialects || requestedDialects.includes(dialect)) &&
    (dialect === 'sqlite' || postgresRuns),
);
/**
 * The dialects of the end-to-end suites (`SPLIT_SUITES` in vitest.config.ts): `npm test` runs them
 * on SQLite and `npm run test:long` on PostgreSQL (`OCS_TEST_SPLIT_DIALECTS`, set by each
 * configuration unless given), so CI runs each once per dialect.
 */
const splitTo = process.env.OCS_TEST_SPLIT_DIALECTS?.split(',').map((name) => name.trim());
export const splitDialects = testDialects.filter(
  (dialect) => !splitTo || splitTo.includes(dialect),
);

export function postgresUnavailableReason(): string | undefined {
  if (postgresUrl) return undefined;
  return 'OCS_TEST_POSTGRES_URL is not set (source .ci/postgres.sh to start a throwaway cluster)';
}

export async function createTestWarehouse(dialect: 'sqlite' | 'postgres'): Promise<TestWarehouse> {
  if (dialect === 'sqlite') {
    const directory = temporaryDirectory();
    const path = join(directory.path, 'warehouse.db');
    const query = sqliteQuery(path);
    return {
      dialect,
      env: { OCS_WAREHOUSE_URL: path },
      filesDir: join(directory.path, 'warehouse-files'),
      query,
      readTable: (table, options) => readTable(query, dialect, table, options),
      dispose: async () => directory.remove(),
    };
  }
  const reason = postgresUnavailableReason();
  if (reason) throw new Error(`PostgreSQL tests cannot run: ${reason}`);
  const schema = `t_${Math.random().toString(36).slice(2, 10)}`;
  const connection = await connectPostgres(postgresUrl!, schema);
  const files = temporaryDirectory();
  return {
    dialect,
    env: {
      OCS_WAREHOUSE_URL: postgresUrl!,
      OCS_WAREHOUSE_SCHEMA: schema,
      OCS_FILES_DIR: files.path,
    },
    filesDir: files.path,
    query: connection.query,
    readTable: (table, options) => readTable(connection.query, dialect, table, options),
    dispose: async () => {
      await connection.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await connection.close();
      files.remove();
    },
  };
}

/** Every resource of the dataset is in the warehouse, row for row, field for field, once. */
export async function expectWarehouseEqualsSource(
  warehouse: TestWarehouse,
  dataset: FakeDataset,
  options: { resources?: string[]; skip?: string[] } = {},
): Promise<void> {
  for (const resource of options.resources ?? dataset.resources()) {
    if (options.skip?.includes(resource)) continue;
    const stored = await warehouse.readTable(resource);
    const source = dataset.rows(resource).map((row) => normalizeSourceRow(row));
    expect(
      stored.map((row) => row.id),
      `${resource} ids`,
    ).toEqual(source.map((row) => row.id));
    expect(stored, `${resource} rows`).toEqual(source);
  }
}

/** The dataset's rows of one resource as the warehouse should hold them, for custom comparisons. */
export function sourceRowsAsStored(
  dataset: FakeDataset,
  resource: string,
): Array<Record<string, unknown>> {
  return dataset.rows(resource).map((row) => normalizeSourceRow(row));
}

/** The threads this process runs now (Linux: `/proc/self/task`). */
export const threadsOfThisProcess = (): number => readdirSync('/proc/self/task').length;

/**
 * The threads this process runs once Node's own are up, to count a run's threads against: libuv
 * starts its thread pool (4 threads) at its first use, which Node 20 makes long before a test's
 * run and Node 22 may first make in the middle of it.
 */
export async function settledThreads(): Promise<number> {
  // An asynchronous random fill always runs on the pool.
  await promisify(randomFill)(Buffer.alloc(1));
  return threadsOfThisProcess();
}

/** Poll `condition` (no fixed sleeps): resolves with its first truthy value. */
export async function waitFor<T>(
  condition: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The HTTP source for engine-level tests against the fake server: quick retries, no pacing. */
export function testSource(
  baseUrl: string,
  options: Partial<HttpSourceOptions> = {},
): HttpExportSource {
  return new HttpExportSource({
    baseUrl,
    apiKey: ADMIN_KEY,
    authScheme: 'api-key',
    requestTimeoutMs: 10_000,
    maxAttempts: 3,
    minRetryDelayMs: 10,
    maxRetryDelayMs: 1_000,
    maxRequestsPerMinute: 0,
    userAgent: 'ocs-sync-test',
    logger: silentLogger(),
    ...options,
  });
}

/**
 * One run through the engine against the fake server at `serverUrl` into `warehouse`: five rows a
 * page, sealed values kept sealed, one walk at a time, unless `overrides` says otherwise.
 */
export async function syncFrom(
  serverUrl: string,
  warehouse: Warehouse,
  overrides: Partial<SyncOptions> = {},
): Promise<SyncReport> {
  const source = testSource(serverUrl);
  try {
    return await runSync({
      source,
      warehouse,
      logger: silentLogger(),
      pageSize: 5,
      secrets: { keys: {}, policyFor: () => 'sealed' },
      onSchemaChange: 'evolve',
      history: false,
      deletes: 'mark',
      pagesInFlight: 2,
      concurrency: 1,
      lockWaitMs: 0,
      ...overrides,
    });
  } finally {
    await source.close();
  }
}

/** Quick retries so fault tests do not wait long. */
export const FAST_RETRIES_YAML =
  'http:\n  min_retry_delay_ms: 5\n  max_retry_delay_seconds: 1\n  max_attempts: 4\n';

/** What a CLI test starts from: a fresh warehouse, a temporary folder, a config file in it. */
export interface CliTestBed {
  directory: ReturnType<typeof temporaryDirectory>;
  warehouse: TestWarehouse;
  configFile: string;
}

export async function openCliTestBed(
  dialect: 'sqlite' | 'postgres',
  configText = FAST_RETRIES_YAML,
): Promise<CliTestBed> {
  const directory = temporaryDirectory();
  const warehouse = await createTestWarehouse(dialect);
  const configFile = join(directory.path, 'config.yaml');
  writeFileSync(configFile, configText);
  return { directory, warehouse, configFile };
}

/** Stops the test's server (when it started one) and removes what openCliTestBed made. */
export async function closeCliTestBed(
  bed: CliTestBed,
  server: { close(): Promise<void> } | undefined,
): Promise<void> {
  await server?.close();
  await bed.warehouse.dispose();
  bed.directory.remove();
}

/** The README and every page under docs/, by path from the project root. */
export function documentationPages(): Array<{ path: string; text: string }> {
  const root = projectRoot();
  const pages = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...pages].map((path) => ({
    path,
    text: readFileSync(join(root, path), 'utf8'),
  }));
}

/**
 * The ```sql blocks between `<!-- NAME:start -->` and `<!-- NAME:end -->`, on whichever page of
 * the README or docs/ holds them.
 */
export function docsSqlBlocks(name: string): string[] {
  // A marker on a line of its own: a page may name one in its text.
  const page = documentationPages().find(({ text }) => text.includes(`\n<!-- ${name}:start -->\n`));
  expect(page, `no page has <!-- ${name}:start -->`).toBeDefined();
  const { text } = page!;
  const start = text.indexOf(`\n<!-- ${name}:start -->\n`);
  const end = text.indexOf(`\n<!-- ${name}:end -->\n`);
  expect(end).toBeGreaterThan(start);
  return [...text.slice(start, end).matchAll(/```sql\n([\s\S]*?)```/g)].map((match) =>
    match[1]!.trim(),
  );
}
