/**
 * File contents end to end, on every dialect: a sync stores every `files` row's bytes once in the
 * blob store (checked by hash against what the fake server serves), records 404s as missing,
 * fetches only what is new or changed, rides out faults, and `files verify` catches damage.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { contentSize, sampleFileContent } from '../src/fake-server/file-contents.js';
import {
  FILE_CONTENT_ENDPOINT,
  startFakeServer,
  type FakeServer,
} from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { blobPath, BlobStore } from '../src/files/blob-store.js';
import { SyncMetrics } from '../src/daemon/metrics.js';
import { fetchReason, nextAttemptAt, planFetches } from '../src/files/plan.js';
import { canonicalTimestamp } from '../src/timestamps.js';
import type { FileCandidate, FileRecord } from '../src/interfaces.js';
import {
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  type TestWarehouse,
  closeCliTestBed,
  openCliTestBed,
} from './support.js';

import { expectBlobsMatchServer, readLedger, storedFiles } from './files-support.js';

describe.each(splitDialects)('file contents (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let directory: ReturnType<typeof temporaryDirectory>;
  let warehouse: TestWarehouse;
  let configFile: string;

  const start = async (options: Partial<Parameters<typeof startFakeServer>[0]> = {}) => {
    dataset = createSampleDataset({ rowsPerResource: 30, seed: 5 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey, ...options });
  };
  const env = (extra: Record<string, string> = {}) =>
    syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '50', ...extra });
  const sync = (args: string[] = [], extra: Record<string, string> = {}) =>
    runCli(['--config', configFile, 'sync', ...args], env(extra));
  const fileRequests = () =>
    server.requests.filter((request) => request.endpoint === FILE_CONTENT_ENDPOINT);
  const requestedIds = () => fileRequests().map((request) => request.path.split('/')[3]);

  beforeEach(async () => {
    ({ directory, warehouse, configFile } = await openCliTestBed(dialect));
  });
  afterEach(() => closeCliTestBed({ directory, warehouse, configFile }, server));

  it('stores every file once by hash, records 404s as missing and still exits 0', async () => {
    await start();
    const result = await sync();
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    await expectBlobsMatchServer(warehouse, dataset);

    const rows = dataset.rows('files');
    const missing = rows.filter((row) => sampleFileContent(row) === null);
    const empty = rows.filter((row) => BigInt(row.id) % 10n === 0n);
    const shared = rows.filter((row) => BigInt(row.id) % 10n === 5n);
    expect(missing.length).toBeGreaterThan(0);
    expect(empty.length).toBeGreaterThan(0);
    expect(shared.length).toBeGreaterThan(1);
    expect(
      rows.some((row) => BigInt(row.id) % 25n === 7n),
      'a several-MB file',
    ).toBe(true);
    // One request per file: nothing fetched twice.
    expect(requestedIds().sort()).toEqual(rows.map((row) => String(row.id)).sort());

    const ok = rows.length - missing.length;
    expect(result.stdout).toContain(`Files: ${ok} fetched`);
    expect(result.stdout).toContain(`${missing.length} missing (404)`);

    const status = await runCli(['status'], warehouse.env);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(
      new RegExp(`Files: ${ok} ok, ${missing.length} missing \\(404\\), 0 failed`),
    );
  });

  it('a file still coming holds its own slot only: the files after it, past the first 500, go on', async () => {
    // More files than one batch of the ledger (500).
    dataset = createSampleDataset({ rowsPerResource: 520, seed: 5 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const ids = dataset.rows('files').map((row) => String(row.id));
    const held = dataset.rows('files').find((row) => {
      const content = sampleFileContent(row);
      return content !== null && contentSize(content) > 0;
    })!;
    const laterBatch = new Set(ids.slice(500));
    // The first file with content is held half-sent until a file of the next batch is asked
    // for (or 30 s pass: then the run waited on it, which the assertion below catches).
    let release!: (byLaterFile: boolean) => void;
    const released = new Promise<boolean>((resolve) => (release = resolve));
    const timer = setTimeout(() => release(false), 30_000);
    server.options.onFileContent = async ({ fileId }) => {
      if (laterBatch.has(fileId)) release(true);
      if (fileId === String(held.id)) await released;
    };
    try {
      const result = await sync([], { OCS_RESOURCES: 'files' });
      expect(result.code, result.stdout).toBe(0);
      expect(await released, 'a file past the first 500 was fetched while one was held').toBe(true);
      await expectBlobsMatchServer(warehouse, dataset);
    } finally {
      clearTimeout(timer);
      server.options.onFileContent = undefined;
    }
  });

  it('an unchanged rerun fetches no file; new rows are fetched; a changed row is fetched again', async () => {
    await start();
    expect((await sync()).code).toBe(0);

    server.requests.length = 0;
    const unchanged = await sync();
    expect(unchanged.code).toBe(0);
    expect(fileRequests()).toEqual([]);
    expect(unchanged.stdout).toContain('Files: 0 fetched');

    const added = dataset.insert('files', 3);
    server.requests.length = 0;
    expect((await sync()).code).toBe(0);
    expect(requestedIds()).toEqual(added.map((row) => String(row.id)));
    await expectBlobsMatchServer(warehouse, dataset);

    // `files` pages by id, so an edit shows up in a full refresh of it.
    const target = dataset.rows('files').find((row) => sampleFileContent(row) !== null)!;
    const before = (await readLedger(warehouse)).find((row) => row.file_id === String(target.id));
    dataset.edit('files', [target.id], { file: 'moved/elsewhere.pdf' });
    server.requests.length = 0;
    expect((await sync(['--full-refresh', 'files'])).code).toBe(0);
    expect(requestedIds()).toEqual([String(target.id)]);
    const after = (await readLedger(warehouse)).find((row) => row.file_id === String(target.id));
    expect(after?.sha256).not.toBe(before?.sha256);
    await expectBlobsMatchServer(warehouse, dataset, sampleFileContent, { earlierContents: 1 });
  });

  it('retries cut-off bodies, resets, 5xx and 429 (Retry-After) on file contents', async () => {
    await start();
    const large = dataset.rows('files').find((row) => BigInt(row.id) % 25n === 7n)!;
    server.faults.failNext(1, { kind: 'truncate' }, { fileId: String(large.id) });
    server.faults.failNext(1, { kind: 'drop' }, { resource: FILE_CONTENT_ENDPOINT });
    server.faults.failNext(
      1,
      { kind: 'status', status: 502, html: true },
      { resource: FILE_CONTENT_ENDPOINT },
    );
    server.faults.failNext(
      1,
      { kind: 'rate_limit', retryAfterSeconds: 1 },
      { resource: FILE_CONTENT_ENDPOINT },
    );
    const result = await sync();
    expect(result.code).toBe(0);
    expect(server.faults.pending()).toBe(0);
    expect(result.logs).toMatch(/"path":"files\/\d+\/content".*Request failed; retrying/);
    expect(result.logs).toContain('HTTP 429 (rate limited)');
    await expectBlobsMatchServer(warehouse, dataset);
    const run = await warehouse.query('SELECT requests FROM _ocs_runs');
    // Every file attempt counts against the run's requests (one budget).
    expect(Number(run[0]!.requests)).toBeGreaterThanOrEqual(fileRequests().length);
  });

  it('a file the server keeps refusing is recorded failed (exit 3) and fetched by the next run', async () => {
    await start();
    const [first, second] = dataset.rows('files').filter((row) => sampleFileContent(row) !== null);
    server.faults.failNext(1, { kind: 'status', status: 410 }, { fileId: String(first!.id) });
    const refused = await sync();
    expect(refused.code).toBe(3);
    expect(refused.stdout).toContain(
      `failed: file ${first!.id}: GET files/${first!.id}/content answered HTTP 410`,
    );
    const ledger = await readLedger(warehouse);
    expect(ledger.find((row) => row.file_id === String(first!.id))).toMatchObject({
      status: 'failed',
      sha256: null,
      attempts: 1,
    });
    expect(ledger.filter((row) => row.status === 'ok').length).toBeGreaterThan(10);

    // A server that stays down for one file stops the files step; the run is partial.
    server.faults.failNext(100, { kind: 'status', status: 500 }, { fileId: String(first!.id) });
    const down = await sync();
    expect(down.code).toBe(3);
    expect(down.stdout).toMatch(
      /problem: The files step stopped early: at file \d+: GET files\/\d+\/content failed after 4 attempts: HTTP 500/,
    );
    expect(
      (await readLedger(warehouse)).find((row) => row.file_id === String(first!.id))?.attempts,
    ).toBe(2);

    server.faults.clear();
    server.requests.length = 0;
    expect((await sync()).code).toBe(0);
    expect(requestedIds()).toEqual([String(first!.id)]);
    await expectBlobsMatchServer(warehouse, dataset);
    expect(second).toBeDefined();
  });

  it('a 404 waits for its back-off before it is asked again', async () => {
    await start();
    expect((await sync()).code).toBe(0);
    const missing = dataset.rows('files').filter((row) => sampleFileContent(row) === null);
    server.requests.length = 0;
    expect((await sync()).code).toBe(0);
    expect(fileRequests()).toEqual([]);

    await warehouse.query(
      dialect === 'sqlite'
        ? "UPDATE _ocs_files SET next_attempt_at = '2000-01-01T00:00:00.000Z' WHERE status = 'missing'"
        : "UPDATE _ocs_files SET next_attempt_at = '2000-01-01T00:00:00Z' WHERE status = 'missing'",
    );
    expect((await sync()).code).toBe(0);
    expect(requestedIds().sort()).toEqual(missing.map((row) => String(row.id)).sort());
    const ledger = await readLedger(warehouse);
    expect(ledger.filter((row) => row.status === 'missing').map((row) => row.attempts)).toEqual(
      missing.map(() => 2),
    );
  });

  it('files verify catches corrupt and missing blobs; --refetch makes the next sync repair them', async () => {
    await start();
    expect((await sync()).code).toBe(0);
    const clean = await runCli(['files', 'verify'], warehouse.env);
    expect(clean.code).toBe(0);
    expect(clean.stdout).toContain('all intact');

    const ledger = (await readLedger(warehouse)).filter(
      (row) => row.status === 'ok' && row.size! > 0,
    );
    const corrupt = ledger[0]!;
    const lost = ledger.find((row) => row.sha256 !== corrupt.sha256)!;
    const corruptPath = blobPath(warehouse.filesDir, corrupt.sha256!);
    const bytes = readFileSync(corruptPath);
    bytes[0] = bytes[0]! ^ 0xff;
    writeFileSync(corruptPath, bytes);
    rmSync(blobPath(warehouse.filesDir, lost.sha256!));

    const damaged = await runCli(['files', 'verify'], warehouse.env);
    expect(damaged.code).toBe(3);
    expect(damaged.stdout).toContain(`corrupt: file ${corrupt.file_id}: ${corruptPath}`);
    expect(damaged.stdout).toContain(`missing: file ${lost.file_id}:`);

    const json = await runCli(['files', 'verify', '--json', '--refetch'], warehouse.env);
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout).problems.length).toBeGreaterThanOrEqual(2);

    server.requests.length = 0;
    expect((await sync()).code).toBe(0);
    expect(requestedIds().length).toBeGreaterThanOrEqual(2);
    expect((await runCli(['files', 'verify'], warehouse.env)).code).toBe(0);
    await expectBlobsMatchServer(warehouse, dataset);
  });

  it('keeps 64-bit file ids exact', async () => {
    dataset = createSampleDataset({ rowsPerResource: 12, seed: 5, firstIds: { files: 2n ** 60n } });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    expect((await sync()).code).toBe(0);
    expect((await readLedger(warehouse)).map((row) => row.file_id)).toEqual(
      dataset.rows('files').map((row) => String(row.id)),
    );
    await expectBlobsMatchServer(warehouse, dataset);
    server.requests.length = 0;
    expect((await sync()).code).toBe(0);
    expect(fileRequests()).toEqual([]);
  });

  it('files.enabled false backs up metadata only', async () => {
    await start();
    const result = await sync([], { OCS_FILES_ENABLED: 'false' });
    expect(result.code).toBe(0);
    expect(fileRequests()).toEqual([]);
    expect(result.stdout).not.toContain('Files:');
    expect(await readLedger(warehouse)).toEqual([]);
  });
});

describe('file contents configuration', () => {
  it('refuses a PostgreSQL warehouse without files.dir, naming the fix', async () => {
    const result = await runCli(['sync'], {
      OCS_BASE_URL: 'http://127.0.0.1:9',
      OCS_API_KEY: 'key',
      OCS_WAREHOUSE_URL: 'postgres://user@127.0.0.1:9/db',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'files.dir (OCS_FILES_DIR) must be set with a PostgreSQL warehouse',
    );
    expect(result.stderr).toContain('files.enabled: false');
  });

  it('keeps the blob store beside a SQLite warehouse by default', async () => {
    const { resolveConfig } = await import('../src/config/load.js');
    const config = resolveConfig(
      { env: { OCS_WAREHOUSE_URL: '/data/team.db' }, version: '0' },
      { server: false },
    );
    expect(config.files).toEqual({
      enabled: true,
      dir: '/data/team-files',
      concurrency: 2,
      maxFileMib: 1024,
      requestTimeoutSeconds: 3600,
    });
  });
});

describe('what to fetch (pure)', () => {
  const record = (changes: Partial<FileRecord> = {}): FileRecord => ({
    fileId: '1',
    sha256: 'a'.repeat(64),
    size: 3,
    contentType: 'text/plain',
    status: 'ok',
    error: null,
    updatedAt: '2026-01-01T00:00:00.000000Z',
    file: 'a.txt',
    fetchedAt: '2026-01-01T00:00:01.000Z',
    attempts: 0,
    nextAttemptAt: null,
    ...changes,
  });
  const candidate = (stored: FileRecord | undefined, changes: Partial<FileCandidate> = {}) => ({
    fileId: '1',
    file: 'a.txt',
    updatedAt: '2026-01-01T00:00:00.000000Z',
    contentSize: null,
    record: stored,
    ...changes,
  });
  const now = Date.parse('2026-06-01T00:00:00Z');

  it('fetches new, changed and failed rows; 404s after their back-off; nothing else', () => {
    expect(fetchReason(candidate(undefined), now)).toBe('new');
    expect(fetchReason(candidate(record()), now)).toBeUndefined();
    expect(fetchReason(candidate(record(), { file: 'b.txt' }), now)).toBe('changed');
    expect(
      fetchReason(candidate(record(), { updatedAt: '2026-01-02T00:00:00.000000Z' }), now),
    ).toBe('changed');
    expect(fetchReason(candidate(record({ status: 'failed' })), now)).toBe('retry_failed');
    const later = new Date(now + 1000).toISOString();
    const earlier = new Date(now - 1000).toISOString();
    expect(
      fetchReason(candidate(record({ status: 'missing', nextAttemptAt: later })), now),
    ).toBeUndefined();
    expect(fetchReason(candidate(record({ status: 'missing', nextAttemptAt: earlier })), now)).toBe(
      'retry_missing',
    );
    expect(planFetches([candidate(undefined), candidate(record())], now)).toHaveLength(1);
  });

  it('backs off a 404 an hour, doubling, up to a week; failures wait for nothing', () => {
    const hours = (attempts: number) =>
      (Date.parse(nextAttemptAt('missing', attempts, now)!) - now) / 3_600_000;
    expect([1, 2, 3, 4].map(hours)).toEqual([1, 2, 4, 8]);
    expect(hours(30)).toBe(7 * 24);
    expect(nextAttemptAt('failed', 3, now)).toBeNull();
  });

  it('reads every form a stored updated_at takes as one instant', () => {
    const expected = '2026-11-20T10:00:00.123456Z';
    for (const text of [
      '2026-11-20T10:00:00.123456Z',
      '2026-11-20T10:00:00.123456+00:00',
      '2026-11-20 10:00:00.123456+00',
      '2026-11-20T12:00:00.123456+02:00',
      '2026-11-20T11:30:00.123456+0130',
    ]) {
      expect(canonicalTimestamp(text), text).toBe(expected);
    }
    expect(canonicalTimestamp('2026-11-20T10:00:00Z')).toBe('2026-11-20T10:00:00.000000Z');
    expect(canonicalTimestamp('not a time')).toBe('not a time');
  });
});

describe('blob store', () => {
  it('streams: each chunk is on disk before the next is asked for, so memory stays flat', async () => {
    const directory = temporaryDirectory();
    try {
      const store = new BlobStore(directory.path);
      await store.prepare();
      const chunk = 256 * 1024;
      const chunks = 64;
      const partialSize = () => {
        const partial = readdirSync(join(directory.path, 'sha256')).find((name) =>
          name.startsWith('.partial-'),
        );
        return partial === undefined ? 0 : statSync(join(directory.path, 'sha256', partial)).size;
      };
      const hash = createHash('sha256');
      async function* body() {
        for (let index = 0; index < chunks; index += 1) {
          // The store pulls a chunk only after writing the previous one: nothing piles up.
          expect(partialSize()).toBe(index * chunk);
          const bytes = Buffer.alloc(chunk, index);
          hash.update(bytes);
          yield bytes;
        }
      }
      const blob = await store.write(body());
      expect(blob).toEqual({ sha256: hash.digest('hex'), size: chunk * chunks, created: true });
      expect(storedFiles(directory.path)).toEqual([blobPath(directory.path, blob.sha256)]);
      expect(await store.check(blob.sha256, blob.size)).toEqual({ status: 'ok' });
    } finally {
      directory.remove();
    }
  });

  it('a body that fails mid-way or fails its check leaves nothing behind', async () => {
    const directory = temporaryDirectory();
    try {
      const store = new BlobStore(directory.path);
      await store.prepare();
      async function* broken() {
        yield Buffer.from('half of it');
        throw new Error('connection reset');
      }
      await expect(store.write(broken())).rejects.toThrow('connection reset');
      await expect(
        store.write(
          (async function* () {
            yield Buffer.from('short');
          })(),
          () => {
            throw new Error('size mismatch');
          },
        ),
      ).rejects.toThrow('size mismatch');
      expect(storedFiles(directory.path)).toEqual([]);
      expect(() => blobPath(directory.path, '../etc/passwd')).toThrow('Not a SHA-256');
    } finally {
      directory.remove();
    }
  });
});

describe('file metrics', () => {
  it('exports files by status and bytes stored after a run', async () => {
    const metrics = new SyncMetrics();
    metrics.syncEvents().onFilesDone?.({
      dir: '/x',
      rows: 10,
      fetched: 7,
      bytesFetched: 4096,
      missing: 2,
      failed: 1,
      unchanged: 0,
      failures: [],
      totals: { ok: 7, missing: 2, failed: 1, blobs: 6, bytes: 4000 },
    });
    const { body } = await metrics.render();
    expect(body).toContain('ocs_sync_files{status="ok"} 7');
    expect(body).toContain('ocs_sync_files{status="missing"} 2');
    expect(body).toContain('ocs_sync_files{status="failed"} 1');
    expect(body).toContain('ocs_sync_file_bytes_stored 4000');
    expect(body).toContain('ocs_sync_files_fetched_total 7');
    expect(body).toContain('ocs_sync_file_bytes_fetched_total 4096');
  });
});
