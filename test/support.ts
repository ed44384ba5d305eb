/** Shared test plumbing: a fake server, a fresh warehouse, the CLI with captured output. */
import Database from 'better-sqlite3';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { main } from '../src/cli/main.js';
import { RESERVED_COLUMNS } from '../src/names.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';

export const ADMIN_KEY = 'test-admin-key';
export const MEMBER_KEY = 'test-member-key';

/** `../shared/ocs-export` beside the repository, when it is there. */
export const SHARED_EXPORT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../shared/ocs-export');
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
  options: { signal?: AbortSignal } = {},
): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  let logs = '';
  const logStream = new Writable({
    write(chunk, _encoding, callback) {
      logs += chunk.toString();
      callback();
    },
  });
  const code = await main(argv, {
    env: { OCS_LOG_LEVEL: 'info', ...env },
    output: { out: (line) => (stdout += `${line}\n`), err: (line) => (stderr += `${line}\n`) },
    logStream,
    signal: options.signal,
  });
  return { code, stdout, stderr, logs };
}

/** Environment for a sync against a fake server into a SQLite file. */
export function syncEnv(url: string, database: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    OCS_BASE_URL: url,
    OCS_API_KEY: ADMIN_KEY,
    OCS_WAREHOUSE_URL: database,
    OCS_PRIVATE_KEY: teamKeys().privateKey,
    ...extra,
  };
}

interface ColumnRow {
  table_name: string;
  column_name: string;
  column_type: string;
}

/** Read a SQLite table back into source-shaped rows, decoding by the stored logical types. */
export function readTable(database: string, table: string, options: { includeDeleted?: boolean } = {}): Array<Record<string, unknown>> {
  const db = new Database(database, { readonly: true });
  try {
    db.defaultSafeIntegers(true);
    const types = new Map(
      (db.prepare('SELECT table_name, column_name, column_type FROM _ocs_columns WHERE table_name = ?').all(table) as ColumnRow[]).map(
        (row) => [row.column_name, row.column_type],
      ),
    );
    const where = options.includeDeleted ? '' : 'WHERE "_deleted_at" IS NULL';
    const rows = db.prepare(`SELECT * FROM "${table}" ${where} ORDER BY id`).all() as Array<Record<string, unknown>>;
    return rows.map((row) => {
      const decoded: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(row)) {
        if (RESERVED_COLUMNS.has(key)) continue;
        decoded[key] = decode(value, key === 'id' ? 'integer' : types.get(key));
      }
      return decoded;
    });
  } finally {
    db.close();
  }
}

function decode(value: unknown, type: string | undefined): unknown {
  if (value === null) return null;
  if (typeof value === 'bigint') {
    const asNumber = Number(value);
    value = Number.isSafeInteger(asNumber) ? asNumber : value;
  }
  switch (type) {
    case 'boolean':
      return value === 1 || value === 1n;
    case 'json':
      return JSON.parse(String(value), (_key, inner: unknown) => inner);
    default:
      return value;
  }
}

/** Every resource of the dataset is in the warehouse, row for row, field for field, once. */
export function expectWarehouseEqualsSource(
  database: string,
  dataset: FakeDataset,
  options: { resources?: string[]; skip?: string[] } = {},
): void {
  for (const resource of options.resources ?? dataset.resources()) {
    if (options.skip?.includes(resource)) continue;
    const stored = readTable(database, resource);
    const source = dataset.rows(resource).map((row) => normalizeSourceRow(row));
    expect(stored.map((row) => row.id), `${resource} ids`).toEqual(source.map((row) => row.id));
    expect(stored, `${resource} rows`).toEqual(source);
  }
}

/** The source row as the warehouse should hold it (big ids stay bigint, the rest as JSON has them). */
function normalizeSourceRow(row: Record<string, unknown>): Record<string, unknown> {
  const normalized: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    normalized[key] = value === undefined ? null : JSON.parse(JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)));
    if (typeof value === 'bigint') normalized[key] = Number.isSafeInteger(Number(value)) ? Number(value) : value;
  }
  return normalized;
}
