/**
 * Plumbing for the audit archive's tests: a signing key made by `keygen --signing`, the audit
 * environment, and tampering with the warehouse as a person with write access would, through the
 * `sqlite3` shell or `psql` (never through ocs-sync).
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  startFakeServer,
  type FakeServer,
  type FakeServerOptions,
} from '../src/fake-server/server.js';
import {
  CLI_FROM_SOURCE,
  createTestWarehouse,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  type CliResult,
  type TestWarehouse,
} from './support.js';

export interface AuditKeys {
  privateKeyFile: string;
  publicKeyFile: string;
  checkpointFile: string;
}

/** `ocs-sync keygen --signing --out DIR`, and the checkpoint file's place beside it. */
export async function makeAuditKeys(directory: string): Promise<AuditKeys> {
  const made = await runCli(['keygen', '--signing', '--out', directory], {});
  expect(made.stderr).toBe('');
  expect(made.code).toBe(0);
  return {
    privateKeyFile: join(directory, 'ocs-audit-signing.key'),
    publicKeyFile: join(directory, 'ocs-audit-signing.pub'),
    checkpointFile: join(directory, 'checkpoints.jsonl'),
  };
}

export function auditEnv(keys: AuditKeys): Record<string, string> {
  return {
    OCS_AUDIT: 'true',
    OCS_AUDIT_SIGNING_KEY_FILE: keys.privateKeyFile,
    OCS_AUDIT_CHECKPOINT_FILE: keys.checkpointFile,
  };
}

/**
 * Runs SQL against the warehouse with the database's own shell, as someone with write access
 * would: `sqlite3 FILE` or `psql URL` (search_path set to the test's schema). Returns its output.
 */
export function tamper(warehouse: TestWarehouse, sql: string): string {
  if (warehouse.dialect === 'sqlite') {
    return execFileSync('sqlite3', ['-bail', warehouse.env.OCS_WAREHOUSE_URL!], {
      input: sql,
      encoding: 'utf8',
    });
  }
  return execFileSync(
    'psql',
    [
      warehouse.env.OCS_WAREHOUSE_URL!,
      '-X',
      '-q',
      '-A',
      '-t',
      '-v',
      'ON_ERROR_STOP=1',
      '-c',
      `SET search_path TO "${warehouse.env.OCS_WAREHOUSE_SCHEMA}"`,
      '-f',
      '-',
    ],
    { input: sql, encoding: 'utf8' },
  );
}

/** `audit verify --json` with the public key and the checkpoint file; the parsed report. */
export async function verifyJson(
  env: Record<string, string>,
  keys: AuditKeys,
  extra: string[] = [
    '--public-key',
    keys.publicKeyFile,
    // A run killed before its end wrote no checkpoint: there may be no file yet.
    ...(existsSync(keys.checkpointFile) ? ['--checkpoints', keys.checkpointFile] : []),
  ],
): Promise<{ result: CliResult; report: VerifyJson }> {
  const result = await runCli(['audit', 'verify', '--json', ...extra], env);
  let report: VerifyJson;
  try {
    report = JSON.parse(result.stdout) as VerifyJson;
  } catch {
    throw new Error(`audit verify printed no JSON (exit ${result.code}): ${result.stderr}`);
  }
  return { result, report };
}

/** `audit verify` with the key and the file finds nothing (exit 0); its report. */
export async function expectIntact(
  env: Record<string, string>,
  keys: AuditKeys,
): Promise<VerifyJson> {
  const { result, report } = await verifyJson(env, keys);
  expect(report.problems).toEqual([]);
  expect(result.code).toBe(0);
  return report;
}

/** A change made with the database's own shell, and what verify must name first. */
export interface TamperCase {
  what: string;
  sql: () => string;
  kind: string;
  table?: string;
  row?: () => string;
  version?: number;
}

/** Makes the change and holds verify's first broken link to it (exit 3). */
export async function expectNamed(
  warehouse: TestWarehouse,
  env: Record<string, string>,
  keys: AuditKeys,
  change: TamperCase,
): Promise<void> {
  const row = change.row?.();
  tamper(warehouse, change.sql());
  const { result, report } = await verifyJson(env, keys);
  expect(result.code, result.stderr).toBe(3);
  expect(report.intact).toBe(false);
  expect(report.first?.kind, JSON.stringify(report.problems.slice(0, 3))).toBe(change.kind);
  if (change.table) expect(report.first?.table).toBe(change.table);
  if (row) expect(report.first?.row_id).toBe(row);
  if (change.version) expect(report.first?.version).toBe(change.version);
}

export interface ProblemJson {
  kind: string;
  table: string | null;
  row_id: string | null;
  version: number | null;
  version_id: string | null;
  seq: number | null;
  detail: string;
}

export interface VerifyJson {
  intact: boolean;
  entries: number;
  versions: number;
  live_rows: number;
  records: number;
  head: { seq: number; hash: string };
  checkpoints: { stored: number; checked: number; signatures_checked: boolean };
  problem_count: number;
  first: ProblemJson | null;
  problems: ProblemJson[];
  warnings: string[];
}

/** What an audit test starts from: a fake server, a fresh warehouse, a signing key, the env. */
export interface AuditBed {
  server: FakeServer;
  dataset: FakeDataset;
  warehouse: TestWarehouse;
  directory: ReturnType<typeof temporaryDirectory>;
  keys: AuditKeys;
  /** A sync with audit on and a checkpoint at the end, of `resources` only. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function openAuditBed(
  dialect: 'sqlite' | 'postgres',
  options: {
    dataset: Parameters<typeof createSampleDataset>[0];
    resources: readonly string[];
    pageSize?: number;
    server?: Partial<FakeServerOptions>;
  },
): Promise<AuditBed> {
  const dataset = createSampleDataset(options.dataset);
  const server = await startFakeServer({
    dataset,
    teamPublicKeyPem: teamKeys().publicKey,
    ...options.server,
  });
  const warehouse = await createTestWarehouse(dialect);
  const directory = temporaryDirectory();
  const keys = await makeAuditKeys(directory.path);
  const bed: AuditBed = {
    server,
    dataset,
    warehouse,
    directory,
    keys,
    env: {
      ...syncEnv(server.url, warehouse.env),
      ...auditEnv(keys),
      OCS_RESOURCES: options.resources.join(','),
      ...(options.pageSize ? { OCS_PAGE_SIZE: String(options.pageSize) } : {}),
    },
    async close() {
      await bed.server.close();
      await warehouse.dispose();
      directory.remove();
    },
  };
  return bed;
}

/**
 * An archive built once and given to each test that only reads or tampers with it: on SQLite the
 * first test builds it (several syncs) and keeps a copy of its warehouse folder and its key
 * folder, and each later test gets that copy in its own bed's folders, the same files at the same
 * names. On PostgreSQL every test builds its own (the copy would be a schema's). `dispose()` (in
 * an `afterAll`) removes the copy.
 */
export function archiveBuiltOnce(build: (bed: AuditBed) => Promise<void>): {
  give(bed: AuditBed): Promise<void>;
  dispose(): void;
} {
  let copy:
    | {
        warehouse: ReturnType<typeof temporaryDirectory>;
        keys: ReturnType<typeof temporaryDirectory>;
      }
    | undefined;
  const warehouseFolder = (bed: AuditBed) => dirname(bed.warehouse.env.OCS_WAREHOUSE_URL!);
  return {
    async give(bed) {
      if (bed.warehouse.dialect !== 'sqlite') return build(bed);
      if (copy) {
        cpSync(copy.warehouse.path, warehouseFolder(bed), { recursive: true });
        cpSync(copy.keys.path, bed.directory.path, { recursive: true });
        return;
      }
      await build(bed);
      copy = { warehouse: temporaryDirectory(), keys: temporaryDirectory() };
      cpSync(warehouseFolder(bed), copy.warehouse.path, { recursive: true });
      cpSync(bed.directory.path, copy.keys.path, { recursive: true });
    },
    dispose() {
      copy?.warehouse.remove();
      copy?.keys.remove();
      copy = undefined;
    },
  };
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** When to kill a sync: at a page of a resource served, or at the n-th file content. */
export type KillAt = { resource: string; page: number } | { file: number };

/** `sync` as its own process, SIGKILLed when `killAt` says so. */
export async function killSyncWhen(
  bed: AuditBed,
  env: Record<string, string>,
  killAt: KillAt,
  extra: Record<string, string> = {},
  args: string[] = [],
): Promise<void> {
  const { server } = bed;
  let killed = false;
  const child = spawn(process.execPath, [...CLI_FROM_SOURCE, 'sync', ...args], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env, ...extra },
    stdio: 'ignore',
  });
  const kill = async () => {
    if (killed) return;
    killed = true;
    child.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 100));
  };
  if ('file' in killAt) {
    let files = 0;
    server.options.onFileContent = async () => {
      files += 1;
      if (files >= killAt.file) await kill();
    };
  } else {
    server.options.onPageServed = async ({ resource, pageIndex }) => {
      if (resource === killAt.resource && pageIndex >= killAt.page) await kill();
    };
  }
  await new Promise((resolve) => child.on('exit', resolve));
  server.options.onPageServed = undefined;
  server.options.onFileContent = undefined;
  expect(killed, 'the process was still working when it was killed').toBe(true);
}
