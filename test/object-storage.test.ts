/**
 * File contents in a bucket (`files.dir: s3://bucket/prefix`), end to end through the CLI against
 * a real S3 server (s3rver behind a recording proxy, test/s3-server.ts), on every dialect: every
 * content stored once under its digest with its checksum and a conditional PUT, a rerun uploads
 * nothing, `files verify` (and `--refetch`) works on the bucket, and a bucket that cannot be used
 * stops the run with one line before anything is written.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { contentDigest, sampleFileContent } from '../src/fake-server/file-contents.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { MIN_PART_BYTES } from '../src/storage/s3-store.js';
import { readLedger } from './files-support.js';
import { openTestBucket, startS3Server, type S3TestServer } from './s3-server.js';
import {
  closeCliTestBed,
  openCliTestBed,
  runCli,
  splitDialects,
  syncEnv,
  teamKeys,
  type TestWarehouse,
  temporaryDirectory,
} from './support.js';

const BUCKET = 'ocs-test';
const PREFIX = 'team-a/files';
const FILES_DIR = `s3://${BUCKET}/${PREFIX}`;

describe.each(splitDialects)('file contents in a bucket (%s)', (dialect) => {
  let server: FakeServer;
  let s3: S3TestServer;
  let dataset: FakeDataset;
  let directory: ReturnType<typeof temporaryDirectory>;
  let warehouse: TestWarehouse;
  let configFile: string;

  const env = (extra: Record<string, string> = {}) => ({
    ...syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '50' }),
    ...s3.env(),
    OCS_FILES_DIR: FILES_DIR,
    ...extra,
  });
  const sync = (extra: Record<string, string> = {}) =>
    runCli(['--config', configFile, 'sync'], env(extra));
  const blobKeys = () => s3.keys(BUCKET).filter((key) => key.startsWith(`${PREFIX}/sha256/`));

  beforeEach(async () => {
    ({ directory, warehouse, configFile } = await openCliTestBed(dialect));
    dataset = createSampleDataset({ rowsPerResource: 30, seed: 5 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    s3 = await startS3Server({ buckets: [BUCKET] });
  });
  afterEach(async () => {
    await s3.close();
    await closeCliTestBed({ directory, warehouse, configFile }, server);
  });

  /** Every ok ledger row's content is in the bucket under its digest, and nothing else is. */
  const expectBucketMatchesServer = async () => {
    const ledger = new Map((await readLedger(warehouse)).map((row) => [row.file_id, row]));
    const expected = new Set<string>();
    for (const row of dataset.rows('files')) {
      const content = sampleFileContent(row);
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
      expected.add(`${PREFIX}/sha256/${sha256.slice(0, 2)}/${sha256}`);
    }
    expect(blobKeys()).toEqual([...expected].sort());
    for (const key of blobKeys()) {
      const bytes = s3.objectBytes(BUCKET, key);
      expect(createHash('sha256').update(bytes).digest('hex'), key).toBe(key.split('/').pop());
    }
  };

  it('stores every content once under its digest, checksummed and written only if absent; a rerun uploads nothing', async () => {
    const result = await sync();
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(FILES_DIR);
    await expectBucketMatchesServer();
    expect(s3.unfinishedUploads(BUCKET)).toEqual([]);

    // Each upload: If-None-Match: * and the SHA-256 the store checks (whole, or per part).
    const puts = s3.requests.filter(
      (request) => request.method === 'PUT' && request.url.includes('/sha256/'),
    );
    const singles = puts.filter((request) => !request.url.includes('uploadId='));
    expect(singles.length).toBeGreaterThan(0);
    for (const put of singles) {
      expect(put.headers['if-none-match']).toBe('*');
      const digest = put.url.split('?')[0]!.split('/').pop()!;
      expect(put.headers['x-amz-checksum-sha256']).toBe(
        Buffer.from(digest, 'hex').toString('base64'),
      );
      // Signed with that digest as the payload's hash: the bytes are hashed once, not twice.
      expect(put.headers['x-amz-content-sha256']).toBe(digest);
    }
    // No credential in any log line.
    expect(result.logs).not.toContain(s3.env().AWS_SECRET_ACCESS_KEY + '"');

    s3.requests.length = 0;
    const rerun = await sync();
    expect(rerun.stderr).toBe('');
    expect(rerun.code).toBe(0);
    expect(s3.requests.filter((request) => request.method === 'PUT')).toEqual([]);
  });

  it('files verify re-hashes the bucket; --refetch has the next sync upload a damaged or lost content again', async () => {
    expect((await sync()).code).toBe(0);
    const verifyEnv = { ...warehouse.env, ...s3.env(), OCS_FILES_DIR: FILES_DIR };
    const clean = await runCli(['files', 'verify'], verifyEnv);
    expect(clean.stdout).toContain(`in ${FILES_DIR}: all intact`);
    expect(clean.code).toBe(0);

    const ledger = (await readLedger(warehouse)).filter(
      (row) => row.status === 'ok' && row.size! > 0,
    );
    const corrupt = ledger[0]!;
    const lost = ledger.find((row) => row.sha256 !== corrupt.sha256)!;
    const keyOf = (sha256: string) => `${PREFIX}/sha256/${sha256.slice(0, 2)}/${sha256}`;
    // Damaged and removed in s3rver's own folder, as someone with write access to the store would.
    const corruptPath = join(s3.directory, BUCKET, `${keyOf(corrupt.sha256!)}._S3rver_object`);
    const bytes = s3.objectBytes(BUCKET, keyOf(corrupt.sha256!));
    bytes[0] = bytes[0]! ^ 0xff;
    writeFileSync(corruptPath, bytes);
    const deleted = await runCli(['files', 'verify'], verifyEnv);
    expect(deleted.code).toBe(3);
    expect(deleted.stdout).toContain(
      `corrupt: file ${corrupt.file_id}: s3://${BUCKET}/${keyOf(corrupt.sha256!)}`,
    );

    const refetch = await runCli(['files', 'verify', '--refetch'], verifyEnv);
    expect(refetch.code).toBe(3);
    expect(blobKeys()).not.toContain(keyOf(corrupt.sha256!));
    void lost;

    expect((await sync()).code).toBe(0);
    expect((await runCli(['files', 'verify'], verifyEnv)).code).toBe(0);
    await expectBucketMatchesServer();
  });

  it('export parquet writes each table into the bucket whole, read back as the warehouse holds it', async () => {
    expect((await sync({ OCS_FILES_ENABLED: 'false' })).code).toBe(0);
    const target = `s3://${BUCKET}/team-a/parquet`;
    const exported = await runCli(
      ['export', 'parquet', target, '--resources', 'participants,chats'],
      {
        ...warehouse.env,
        ...s3.env(),
      },
    );
    expect(exported.stderr).toBe('');
    expect(exported.code).toBe(0);
    expect(exported.stdout).toContain(`${target}/participants.parquet  30 rows`);
    expect(s3.keys(BUCKET).filter((key) => key.startsWith('team-a/parquet/'))).toEqual([
      'team-a/parquet/chats.parquet',
      'team-a/parquet/participants.parquet',
    ]);
    // Read back by DuckDB from the object's bytes.
    const copy = join(directory.path, 'participants.parquet');
    writeFileSync(copy, s3.objectBytes(BUCKET, 'team-a/parquet/participants.parquet'));
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    try {
      const read = await connection.runAndReadAll(
        `SELECT count(*) AS n, min(id) AS first FROM read_parquet('${copy}')`,
      );
      const [row] = read.getRowObjectsJS();
      expect(Number(row!.n)).toBe(30);
      expect(String(row!.first)).toBe(String(dataset.rows('participants')[0]!.id));
    } finally {
      connection.closeSync();
      instance.closeSync();
    }
  });
});

describe('a bucket store signs each upload with the SHA-256 it already has', () => {
  it('takes the checksum it sends (ours for a content, the SDK’s for a part) as the payload hash, instead of hashing the bytes again', async () => {
    const s3 = await startS3Server({ buckets: [BUCKET] });
    const store = openTestBucket(s3, `s3://${BUCKET}/signed`);
    try {
      // A digest that is not these bytes' (s3rver does not check it; AWS would refuse the PUT):
      // the hash that signs the request is the one given, so the SDK did not compute its own.
      const bytes = Buffer.from('signed once\n');
      const given = createHash('sha256').update('other bytes').digest('hex');
      await store.put('small', bytes, { sha256: given });
      const small = s3.requests.find((request) => request.url.includes('/signed/small'))!;
      expect(small.headers['x-amz-content-sha256']).toBe(given);

      const large = Buffer.alloc(MIN_PART_BYTES + 1024, 7);
      await store.put('large', large);
      const parts = s3.requests.filter((request) => request.url.includes('partNumber='));
      expect(parts.length).toBe(2);
      for (const part of parts) {
        expect(part.headers['x-amz-content-sha256']).toBe(
          Buffer.from(part.headers['x-amz-checksum-sha256']!, 'base64').toString('hex'),
        );
      }
      expect(s3.objectBytes(BUCKET, 'signed/large').equals(large)).toBe(true);
    } finally {
      store.close();
      await s3.close();
    }
  });
});
