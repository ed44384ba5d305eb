/**
 * Multipart uploads of files (src/storage/s3-multipart.ts) against a real S3 server (s3rver
 * behind the recording, fault-injecting proxy of test/s3-server.ts): parts read into buffers
 * reused from part to part, each part with its SHA-256, completed only if absent; a failed or
 * short upload aborted, nothing under its key. And the bucket blob store's reused buffer.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ObjectStoreError } from '../src/errors.js';
import { BucketBlobStore } from '../src/files/bucket-blob-store.js';
import { MIN_PART_BYTES } from '../src/storage/s3-store.js';
import {
  fileBody,
  putFile,
  type FileBody,
  type ObjectStore,
  type PutBody,
} from '../src/storage/store.js';
import { openTestBucket, startS3Server, type S3TestServer } from './s3-server.js';

const BUCKET = 'ocs-test';

let s3: S3TestServer;
let store: ObjectStore;
let folder: string;

beforeEach(async () => {
  s3 = await startS3Server({ buckets: [BUCKET] });
  store = openTestBucket(s3, `s3://${BUCKET}/parts`);
  folder = mkdtempSync(join(tmpdir(), 'ocs-sync-multipart-'));
});

afterEach(async () => {
  store.close();
  await s3.close();
  rmSync(folder, { recursive: true, force: true });
});

/** A file of three parts and a bit, and its path. */
function largeFile(): { path: string; bytes: Buffer } {
  const bytes = randomBytes(3 * MIN_PART_BYTES + 1000);
  const path = join(folder, 'large.bin');
  writeFileSync(path, bytes);
  return { path, bytes };
}

const sha256 = (bytes: Uint8Array, encoding: 'hex' | 'base64') =>
  createHash('sha256').update(bytes).digest(encoding);

describe('a multipart upload of a file', () => {
  it('reads its parts into one buffer per part in flight, sends each with its SHA-256, and completes only if absent', async () => {
    const { path, bytes } = largeFile();
    const handle = await open(path, 'r');
    const buffersReadInto = new Set<ArrayBufferLike>();
    try {
      const body = fileBody(handle, bytes.length);
      const watched: FileBody = {
        ...body,
        read: (into, position) => {
          buffersReadInto.add(into.buffer);
          return body.read(into, position);
        },
      };
      expect(await store.put('large', watched, { ifAbsent: true })).toEqual({
        created: true,
      });
    } finally {
      await handle.close();
    }
    // Four parts, two in flight: two buffers, each used twice.
    expect(buffersReadInto.size).toBe(2);
    expect(s3.objectBytes(BUCKET, 'parts/large').equals(bytes)).toBe(true);

    const create = s3.requests.find((r) => r.method === 'POST' && r.url.includes('?uploads'))!;
    expect(create.headers['x-amz-checksum-algorithm']).toBe('SHA256');
    const parts = s3.requests.filter((r) => r.method === 'PUT' && r.url.includes('partNumber='));
    expect(parts).toHaveLength(4);
    for (const part of parts) {
      const number = Number(new URL(part.url, 'http://x').searchParams.get('partNumber'));
      const start = (number - 1) * MIN_PART_BYTES;
      const expected = sha256(bytes.subarray(start, start + MIN_PART_BYTES), 'base64');
      expect(part.headers['x-amz-checksum-sha256']).toBe(expected);
    }
    const complete = s3.requests.find((r) => r.method === 'POST' && r.url.includes('uploadId='))!;
    expect(complete.headers['if-none-match']).toBe('*');
  });

  it('a part the store refuses aborts the upload: one clear error naming the object, nothing under its key, no upload left', async () => {
    const { path } = largeFile();
    s3.fault = (request) =>
      request.method === 'PUT' && request.url.includes('partNumber=3')
        ? { status: 403, code: 'AccessDenied' }
        : undefined;
    const failure = await putFile(store, 'refused', path).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ObjectStoreError);
    expect((failure as Error).message).toContain(`s3://${BUCKET}/parts/refused`);
    expect(s3.requests.some((r) => r.method === 'DELETE' && r.url.includes('uploadId='))).toBe(
      true,
    );
    expect(s3.keys(BUCKET)).not.toContain('parts/refused');
    expect(s3.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('a file shorter than its size says fails and is aborted, never completed short', async () => {
    const { path, bytes } = largeFile();
    const handle = await open(path, 'r');
    try {
      const failure = await store
        .put('short', fileBody(handle, bytes.length + MIN_PART_BYTES))
        .catch((error: unknown) => error);
      expect((failure as Error).message).toContain('ended at');
    } finally {
      await handle.close();
    }
    expect(s3.requests.some((r) => r.method === 'DELETE' && r.url.includes('uploadId='))).toBe(
      true,
    );
    expect(s3.keys(BUCKET)).not.toContain('parts/short');
    expect(s3.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('a file of at most a part goes up in one PUT with its SHA-256', async () => {
    const bytes = randomBytes(1000);
    const path = join(folder, 'small.bin');
    writeFileSync(path, bytes);
    await putFile(store, 'small', path, { ifAbsent: true });
    const puts = s3.requests.filter((r) => r.method === 'PUT' && r.url.includes('/parts/small'));
    expect(puts).toHaveLength(1);
    expect(puts[0]!.headers['x-amz-checksum-sha256']).toBe(sha256(bytes, 'base64'));
    expect(puts[0]!.headers['if-none-match']).toBe('*');
    expect(s3.objectBytes(BUCKET, 'parts/small').equals(bytes)).toBe(true);
  });
});

describe('the bucket blob store', () => {
  /** An object store double that keeps what each put was given (and a copy of its bytes). */
  function recordingStore(failPut: () => boolean) {
    const puts: { buffer: ArrayBufferLike; bytes: Buffer }[] = [];
    const double: ObjectStore = {
      location: 's3://double/prefix',
      kind: 's3',
      where: (key) => `s3://double/prefix/${key}`,
      probe: async () => undefined,
      put: async (_key: string, body: PutBody) => {
        if (!(body instanceof Uint8Array)) throw new Error('expected bytes in memory');
        puts.push({ buffer: body.buffer, bytes: Buffer.from(body) });
        if (failPut()) throw new Error('the store failed');
        return { created: true };
      },
      get: async () => undefined,
      head: async () => undefined,
      list: async function* () {},
      delete: async () => undefined,
      clearUnfinished: async () => 0,
      objectLock: async () => ({ status: 'disabled' }),
      close: () => undefined,
    };
    return { double, puts };
  }

  async function* chunks(...parts: string[]): AsyncGenerator<Uint8Array> {
    for (const part of parts) yield Buffer.from(part);
  }

  it('gathers each content in the buffer of the one before, and never reuses one a failed upload was given', async () => {
    let fail = false;
    const { double, puts } = recordingStore(() => fail);
    const blobs = new BucketBlobStore(double, { partSizeBytes: MIN_PART_BYTES });
    const first = await blobs.write(chunks('first ', 'content'));
    const second = await blobs.write(chunks('second'));
    expect(first.sha256).toBe(sha256(Buffer.from('first content'), 'hex'));
    expect(second.sha256).toBe(sha256(Buffer.from('second'), 'hex'));
    expect(puts.map((put) => put.bytes.toString())).toEqual(['first content', 'second']);
    expect(puts[1]!.buffer).toBe(puts[0]!.buffer);

    fail = true;
    await expect(blobs.write(chunks('third'))).rejects.toThrow('the store failed');
    fail = false;
    await blobs.write(chunks('fourth'));
    expect(puts[2]!.buffer).toBe(puts[0]!.buffer);
    // The failed upload's buffer was dropped: the next content has a new one.
    expect(puts[3]!.buffer).not.toBe(puts[2]!.buffer);
    expect(puts[3]!.bytes.toString()).toBe('fourth');
  });
});
