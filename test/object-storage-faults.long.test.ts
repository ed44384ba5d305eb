/**
 * Object storage's faults, through the CLI against a real S3 server (s3rver behind a
 * fault-injecting proxy, test/s3-server.ts), on both dialects: multipart uploads with a reset
 * mid-part, 503 SlowDown and 500 retried; reads cut short resumed (files verify, serve), never
 * taken for corruption; no credentials, expired ones, a missing bucket or AccessDenied stopping
 * the run with one line before anything is fetched; a full store failing the file (exit 3) and the
 * next run resuming; and a real process killed mid-upload leaving nothing under the final key,
 * its unfinished upload aborted by the next run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import {
  contentDigest,
  sampleFileContent,
  type FakeFileContentFor,
} from '../src/fake-server/file-contents.js';
import {
  FILE_CONTENT_ENDPOINT,
  startFakeServer,
  type FakeServer,
} from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { readLedger } from './files-support.js';
import { faultOnce, startS3Server, type S3TestServer } from './s3-server.js';
import {
  CLI_FROM_SOURCE,
  createTestWarehouse,
  runCli,
  startCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  testDialects,
  waitFor,
  type TestWarehouse,
} from './support.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const BUCKET = 'ocs-files';
const PREFIX = 'team-a';
const FILES_DIR = `s3://${BUCKET}/${PREFIX}`;
const MIB = 1024 * 1024;
const BIG = 12 * MIB;
const SERVE_KEY = 'object-storage-serve-key-0123456789abcdef';

/** Every 25th file is 12 MiB: three 5 MiB parts (part_size_mib: 5). */
const contentOf: FakeFileContentFor = (row) =>
  BigInt(row.id) % 25n === 7n
    ? { size: BIG, seed: `big:${String(row.id)}` }
    : sampleFileContent(row);

describe.each(testDialects)('object storage faults (%s)', (dialect) => {
  let server: FakeServer;
  let s3: S3TestServer;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let directory: ReturnType<typeof temporaryDirectory>;
  let configFile: string;
  let child: ChildProcess | undefined;

  const env = (extra: Record<string, string> = {}) => ({
    ...syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '50' }),
    ...s3.env(),
    OCS_CONFIG: configFile,
    OCS_FILES_DIR: FILES_DIR,
    ...extra,
  });
  const sync = (extra: Record<string, string> = {}) => runCli(['sync'], env(extra));
  const blobKeys = () => s3.keys(BUCKET).filter((key) => key.startsWith(`${PREFIX}/sha256/`));
  const keyOf = (sha256: string) => `${PREFIX}/sha256/${sha256.slice(0, 2)}/${sha256}`;
  const pageRequests = () =>
    server.requests.filter((item) => item.endpoint !== FILE_CONTENT_ENDPOINT);

  /** Each content of the server in the bucket under its digest, the ledger saying so. */
  const expectExact = async () => {
    const ledger = new Map((await readLedger(warehouse)).map((row) => [row.file_id, row]));
    const expected = new Set<string>();
    for (const row of dataset.rows('files')) {
      const content = contentOf(row);
      const record = ledger.get(String(row.id));
      if (content === null) {
        expect(record?.status).toBe('missing');
        continue;
      }
      const { sha256, size } = contentDigest(content);
      expect({ status: record?.status, sha256: record?.sha256, size: record?.size }).toEqual({
        status: 'ok',
        sha256,
        size,
      });
      expected.add(keyOf(sha256));
    }
    expect(blobKeys()).toEqual([...expected].sort());
    for (const key of blobKeys()) {
      const digest = createHash('sha256').update(s3.objectBytes(BUCKET, key)).digest('hex');
      expect(digest, key).toBe(key.split('/').pop());
    }
    expect(s3.unfinishedUploads(BUCKET)).toEqual([]);
  };

  beforeEach(async () => {
    dataset = createSampleDataset({ rowsPerResource: 30, seed: 7 });
    server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      fileContent: contentOf,
    });
    s3 = await startS3Server({ buckets: [BUCKET] });
    warehouse = await createTestWarehouse(dialect);
    directory = temporaryDirectory();
    configFile = join(directory.path, 'config.yaml');
    writeFileSync(configFile, 'object_storage:\n  part_size_mib: 5\n  max_attempts: 4\n');
  });
  afterEach(async () => {
    child?.kill('SIGKILL');
    child = undefined;
    await s3.close();
    await server.close();
    await warehouse.dispose();
    directory.remove();
  });

  it('multipart uploads carry each part’s SHA-256; a reset mid-part, 503 SlowDown and 500 are retried, and the run is exact', async () => {
    let puts = 0;
    const resetPart = faultOnce(
      (item) => item.method === 'PUT' && item.url.includes('partNumber=2'),
      () => ({ resetAfterBytes: MIB }),
    );
    s3.fault = (item) => {
      const reset = resetPart(item);
      if (reset) return reset;
      if (item.method !== 'PUT' || item.url.includes('uploadId=')) return undefined;
      puts += 1;
      if (puts === 3) return { status: 503, code: 'SlowDown' };
      if (puts === 6) return { status: 500, code: 'InternalError' };
      return undefined;
    };
    const result = await sync();
    expect(result.stderr).toBe('');
    expect(result.code, result.stdout).toBe(0);
    await expectExact();

    const create = s3.requests.filter(
      (item) => item.method === 'POST' && /\?uploads/.test(item.url),
    );
    expect(create.length).toBeGreaterThan(0);
    for (const item of create) expect(item.headers['x-amz-checksum-algorithm']).toBe('SHA256');
    const parts = s3.requests.filter(
      (item) => item.method === 'PUT' && item.url.includes('partNumber='),
    );
    for (const part of parts) {
      expect(part.headers['x-amz-checksum-sha256']).toMatch(/=$/);
      // The part's SHA-256 signs it too (hashed once).
      expect(part.headers['x-amz-content-sha256']).toBe(
        Buffer.from(part.headers['x-amz-checksum-sha256']!, 'base64').toString('hex'),
      );
    }
    // Part 2 was sent again after the reset, and only it.
    const partTwos = parts.filter((item) => item.url.includes('partNumber=2'));
    expect(partTwos.length).toBe(create.length + 1);
    const complete = s3.requests.filter(
      (item) => item.method === 'POST' && item.url.includes('uploadId='),
    );
    for (const item of complete) expect(item.headers['if-none-match']).toBe('*');
  });

  it('reads cut short are resumed by files verify and serve, never reported as corruption', async () => {
    expect((await sync()).code).toBe(0);
    const ledger = (await readLedger(warehouse)).filter((row) => row.size === BIG);
    expect(ledger.length).toBeGreaterThan(0);
    s3.fault = faultOnce(
      (item) => item.method === 'GET' && item.url.includes('/sha256/') && !item.headers.range,
      () => ({ cutResponseAfterBytes: 100_000 }),
    );
    const verify = await runCli(['files', 'verify'], env());
    expect(verify.stdout).toContain('all intact');
    expect(verify.code).toBe(0);
    expect(s3.requests.some((item) => item.headers.range?.startsWith('bytes=100000-'))).toBe(true);

    // serve hands the importer whole files, however the store cuts its reads.
    s3.fault = faultOnce(
      (item) => item.method === 'GET' && item.url.includes('/sha256/') && !item.headers.range,
      () => ({ cutResponseAfterBytes: 3 * MIB }),
    );
    const publicKeyFile = join(directory.path, 'restore.pub');
    writeFileSync(publicKeyFile, teamKeys().publicKey);
    const serve = startCli(['serve', '--listen', '127.0.0.1:0', '--public-key', publicKeyFile], {
      ...env(),
      OCS_SERVE_API_KEY: SERVE_KEY,
    });
    try {
      const url = await waitFor(
        () => /at (http:\/\/127\.0\.0\.1:\d+)/.exec(serve.logs())?.[1],
        'serve to listen',
        60_000,
      );
      for (const row of ledger.slice(0, 2)) {
        const response = await request(`${url}/api/files/${row.file_id}/content`, {
          headers: { 'x-api-key': SERVE_KEY },
        });
        expect(response.statusCode).toBe(200);
        const hash = createHash('sha256');
        let bytes = 0;
        for await (const chunk of response.body) {
          hash.update(chunk as Buffer);
          bytes += (chunk as Buffer).length;
        }
        expect({ bytes, sha256: hash.digest('hex') }).toEqual({ bytes: BIG, sha256: row.sha256 });
      }
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  });

  it('no credentials, expired ones, a missing bucket or AccessDenied: one line naming the fix, exit 1, nothing fetched', async () => {
    const cases: Array<{
      extra: Record<string, string>;
      fault?: S3TestServer['fault'];
      says: RegExp;
    }> = [
      {
        extra: { AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' },
        says: /Cannot list s3:\/\/ocs-files\/team-a: no AWS credentials were found\.\n {2}hint: .*AWS_ACCESS_KEY_ID/,
      },
      {
        extra: {},
        fault: () => ({ status: 400, code: 'ExpiredToken' }),
        says: /the AWS credentials have expired \(ExpiredToken, HTTP 400\)/,
      },
      {
        extra: { OCS_FILES_DIR: 's3://no-such-bucket/team-a' },
        says: /the bucket no-such-bucket does not exist at http:\/\/127\.0\.0\.1:\d+\.\n {2}hint: Create the bucket/,
      },
      {
        extra: {},
        fault: () => ({ status: 403, code: 'AccessDenied' }),
        says: /Cannot list s3:\/\/ocs-files\/team-a: access denied \(AccessDenied, HTTP 403\)\.\n {2}hint: Grant these credentials/,
      },
      {
        // s3rver checks the key id only, not SigV4 signatures (docs/development.md).
        extra: { AWS_ACCESS_KEY_ID: 'AKIAUNKNOWN', AWS_SECRET_ACCESS_KEY: 'not-the-secret' },
        says: /rejected the credentials \(InvalidAccessKeyId, HTTP 403\)/,
      },
    ];
    for (const { extra, fault, says } of cases) {
      server.requests.length = 0;
      s3.fault = fault;
      const result = await sync(extra);
      expect(result.code, `${String(says)}: ${result.stderr}${result.stdout}`).toBe(1);
      expect(result.stderr).toMatch(says);
      // One line and its hint: no stack, no secret.
      expect(result.stderr.trim().split('\n')).toHaveLength(2);
      expect(result.stderr + result.logs).not.toContain('not-the-secret');
      expect(pageRequests().filter((item) => item.endpoint !== 'manifest')).toEqual([]);
    }
    s3.fault = undefined;
    // check says the same, as a ✗ with the fix.
    const check = await runCli(['check'], env({ OCS_FILES_DIR: 's3://no-such-bucket/x' }));
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(
      /✗ file contents\s+Cannot list s3:\/\/no-such-bucket\/x: the bucket no-such-bucket does not exist/,
    );
  });

  it('a full store fails the file (exit 3) and the next run stores what it could not', async () => {
    let refused = 0;
    s3.fault = (item) => {
      if (item.method !== 'PUT' || !item.url.includes('/sha256/') || refused >= 1) return undefined;
      refused += 1;
      return { status: 403, code: 'QuotaExceeded' };
    };
    const full = await sync();
    expect(full.code).toBe(3);
    expect(full.stdout + full.logs).toMatch(
      /the store is full or over its quota \(QuotaExceeded, HTTP 403\)/,
    );
    const failed = (await readLedger(warehouse)).filter((row) => row.status === 'failed');
    expect(failed.length).toBeGreaterThan(0);
    // Nothing half-written is counted as stored: every ok row's object is there and whole.
    for (const row of (await readLedger(warehouse)).filter((item) => item.status === 'ok')) {
      expect(blobKeys()).toContain(keyOf(row.sha256!));
    }

    s3.fault = undefined;
    const next = await sync();
    expect(next.code).toBe(0);
    await expectExact();
  });

  it('SIGKILL mid-upload leaves nothing under the final key; the next run aborts the unfinished upload and is exact', async () => {
    let sent = false;
    s3.fault = (item) => {
      if (!sent && item.method === 'PUT' && item.url.includes('partNumber=2')) {
        sent = true;
        child?.kill('SIGKILL');
        return { resetAfterBytes: 64 * 1024 };
      }
      return undefined;
    };
    child = spawn(process.execPath, [...CLI_FROM_SOURCE, 'sync'], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...env(),
        AWS_EC2_METADATA_DISABLED: 'true',
      },
      stdio: 'ignore',
    });
    const code = await new Promise<number | null>((resolve) => child!.on('exit', resolve));
    expect(code).toBeNull();
    expect(sent, 'the process was uploading a part when it was killed').toBe(true);
    s3.fault = undefined;

    // The killed upload is unfinished: no object under its key, and no ledger row says ok for it.
    const left = s3.unfinishedUploads(BUCKET);
    expect(left.length).toBeGreaterThan(0);
    for (const key of left) expect(blobKeys()).not.toContain(key);
    const ok = new Set(
      (await readLedger(warehouse)).filter((row) => row.status === 'ok').map((row) => row.sha256),
    );
    for (const key of left) expect(ok.has(key.split('/').pop()!)).toBe(false);

    const next = await sync();
    expect(next.code).toBe(0);
    expect(next.logs).toContain(
      `Aborted ${left.length} unfinished uploads an interrupted run left in ${FILES_DIR}`,
    );
    await expectExact();
  });

  it('SIGINT while a fetched file waits for its turn to be stored: exit 130, that file neither stored nor recorded, the next run exact', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    // The first single PUT of a content waits: with files.concurrency 1 it holds the one turn to
    // store, and the next file, once fetched, waits for it.
    s3.fault = (item) => {
      if (holding || item.method !== 'PUT' || !item.url.includes('/sha256/')) return undefined;
      if (item.url.includes('uploadId=')) return undefined;
      holding = true;
      return { hold: held };
    };
    child = spawn(process.execPath, [...CLI_FROM_SOURCE, 'sync'], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...env({ OCS_FILES_CONCURRENCY: '1' }),
        AWS_EC2_METADATA_DISABLED: 'true',
      },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child!.on('exit', resolve));
    const fileRequests = () =>
      server.requests.filter((item) => item.endpoint === FILE_CONTENT_ENDPOINT);
    // Two files in hand: one storing (held), the last fetched answered and waiting; no file is
    // asked for after it (a 404 is recorded at once, and the next one fetched).
    const last = () => fileRequests().at(-1);
    await waitFor(
      () => holding && fileRequests().length >= 2 && last()?.status === 200,
      'a file fetched while another is stored',
    );
    const count = fileRequests().length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(fileRequests()).toHaveLength(count);
    child.kill('SIGINT');
    await new Promise((resolve) => setTimeout(resolve, 300));
    release();
    expect(await exited).toBe(130);
    s3.fault = undefined;

    const waiting = /\/api\/files\/(\d+)\/content$/.exec(last()!.path)![1]!;
    const row = dataset.rows('files').find((item) => String(item.id) === waiting)!;
    const { sha256 } = contentDigest(contentOf(row)!);
    expect(blobKeys()).not.toContain(keyOf(sha256));
    const ledger = await readLedger(warehouse);
    expect(ledger.find((item) => item.file_id === waiting)?.status).not.toBe('ok');
    const runs = await warehouse.query('SELECT status FROM "_ocs_runs"');
    expect(runs.map((run) => run.status)).toEqual(['interrupted']);

    const next = await sync();
    expect(next.code).toBe(0);
    await expectExact();
  });
});
