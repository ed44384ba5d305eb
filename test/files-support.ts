/** Helpers for file-content tests: the ledger, the blob store on disk, and the served bytes. */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import {
  contentDigest,
  sampleFileContent,
  type FakeFileContent,
} from '../src/fake-server/file-contents.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { blobPath } from '../src/files/blob-store.js';
import type { Row } from '../src/interfaces.js';
import type { TestWarehouse } from './support.js';

interface LedgerRow {
  file_id: string;
  sha256: string | null;
  size: number | null;
  status: string;
  error: string | null;
  attempts: number;
}

export function sha256OfFile(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** Every file under `<dir>/sha256/`, partial ones included. */
export function storedFiles(dir: string): string[] {
  const root = join(dir, 'sha256');
  if (!existsSync(root)) return [];
  const found: string[] = [];
  for (const name of readdirSync(root)) {
    const path = join(root, name);
    if (statSync(path).isDirectory()) {
      for (const blob of readdirSync(path)) found.push(join(path, blob));
    } else {
      found.push(path);
    }
  }
  return found.sort();
}

export async function readLedger(warehouse: TestWarehouse): Promise<LedgerRow[]> {
  const rows = await warehouse.query(
    'SELECT CAST(file_id AS TEXT) AS file_id, sha256, size, status, error, attempts FROM _ocs_files ORDER BY file_id',
  );
  return rows.map((row) => ({
    file_id: String(row.file_id),
    sha256: row.sha256 as string | null,
    size: row.size === null ? null : Number(row.size),
    status: String(row.status),
    error: row.error as string | null,
    attempts: Number(row.attempts),
  }));
}

/**
 * Every live `files` row of the dataset is in the ledger: `ok` with the digest of the bytes the
 * server serves and a blob on disk that hashes to it, or `missing` where the server has none.
 * Every blob on disk is one of those contents, and each content is there once.
 */
export async function expectBlobsMatchServer(
  warehouse: TestWarehouse,
  dataset: FakeDataset,
  contentOf: (row: Row) => FakeFileContent | null = sampleFileContent,
  /** Earlier contents of changed rows stay in the store (it is an archive). */
  options: { earlierContents?: number } = {},
): Promise<void> {
  const ledger = new Map((await readLedger(warehouse)).map((row) => [row.file_id, row]));
  const expectedDigests = new Set<string>();
  for (const row of dataset.rows('files')) {
    const id = String(row.id);
    const content = contentOf(row);
    const record = ledger.get(id);
    if (content === null) {
      expect(record?.status, `file ${id}`).toBe('missing');
      continue;
    }
    const { sha256, size } = contentDigest(content);
    expectedDigests.add(sha256);
    expect({ id, status: record?.status, sha256: record?.sha256, size: record?.size }).toEqual({
      id,
      status: 'ok',
      sha256,
      size,
    });
    expect(sha256OfFile(blobPath(warehouse.filesDir, sha256)), `blob of file ${id}`).toBe(sha256);
  }
  expect(ledger.size, 'one ledger row per live files row').toBe(dataset.count('files'));
  const onDisk = storedFiles(warehouse.filesDir);
  for (const path of onDisk) {
    expect(sha256OfFile(path), `${path} holds what its name says`).toBe(path.split('/').pop());
  }
  const names = onDisk.map((path) => path.split('/').pop()!);
  expect(names.filter((name) => !expectedDigests.has(name)).length, 'stray blobs').toBe(
    options.earlierContents ?? 0,
  );
  expect(
    [...expectedDigests].filter((digest) => !names.includes(digest)),
    'absent',
  ).toEqual([]);
}
