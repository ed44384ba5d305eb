/**
 * The fake server's `GET /api/files/{id}/content` answers as REFERENCE.md says the real one does
 * (raw bytes, attachment, guessed type, 404 without a blob, same key and budget), and the HTTP
 * source's file requests share the page requests' retries and request count.
 */
import { createHash } from 'node:crypto';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import {
  contentDigest,
  sampleFileContent,
  SHARED_CONTENT,
} from '../src/fake-server/file-contents.js';
import {
  FILE_CONTENT_ENDPOINT,
  startFakeServer,
  type FakeServer,
} from '../src/fake-server/server.js';
import { fetchFile } from '../src/files/fetcher.js';
import { BlobStore } from '../src/files/blob-store.js';
import { createLogger } from '../src/log.js';
import { HttpExportSource } from '../src/source/http-source.js';
import { TransientFailure } from '../src/source/retry.js';
import { ADMIN_KEY, MEMBER_KEY, temporaryDirectory } from './support.js';

let server: FakeServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function get(path: string, key: string | null = ADMIN_KEY) {
  const response = await request(`${server!.url}${path}`, {
    headers: key === null ? {} : { 'x-api-key': key },
  });
  const body = Buffer.from(await response.body.arrayBuffer());
  return { status: response.statusCode, headers: response.headers, body };
}

function source(maxAttempts = 4): HttpExportSource {
  return new HttpExportSource({
    baseUrl: server!.url,
    apiKey: ADMIN_KEY,
    authScheme: 'api-key',
    requestTimeoutMs: 10_000,
    maxAttempts,
    minRetryDelayMs: 1,
    maxRetryDelayMs: 10,
    maxRequestsPerMinute: 0,
    userAgent: 'test',
    logger: createLogger({ level: 'silent' }),
  });
}

describe('fake server: file contents', () => {
  it('serves the raw bytes as an attachment with a guessed type and the rate-limit headers', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 2 });
    dataset.insert('files', [{ id: 1005, name: 'logo.png', file: 'a/logo.png' }]);
    server = await startFakeServer({ dataset, rateLimit: { limit: 50, windowSeconds: 300 } });
    const response = await get('/api/files/1005/content');
    expect(response.status).toBe(200);
    expect(response.body.equals(SHARED_CONTENT)).toBe(true);
    expect(response.headers['content-type']).toBe('image/png');
    expect(response.headers['content-disposition']).toBe('attachment; filename="logo.png"');
    expect(response.headers['content-length']).toBe(String(SHARED_CONTENT.length));
    expect(response.headers['x-ratelimit-remaining']).toBe('49');

    const row = dataset.get('files', 1005)!;
    expect(createHash('sha256').update(response.body).digest('hex')).toBe(
      contentDigest(sampleFileContent(row)!).sha256,
    );
  });

  it('answers 404 without a blob or a row, 401/403 for bad keys, 429 once the budget is spent', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 2 });
    dataset.insert('files', [{ id: 1003, name: 'gone.pdf' }]);
    server = await startFakeServer({ dataset, rateLimit: { limit: 4, windowSeconds: 300 } });
    const noBlob = await get('/api/files/1003/content');
    expect(noBlob.status).toBe(404);
    expect(JSON.parse(noBlob.body.toString())).toEqual({ detail: 'Not found.' });
    expect((await get('/api/files/999999/content')).status).toBe(404);
    expect((await get('/api/files/1003/content', null)).status).toBe(401);
    expect((await get('/api/files/1003/content', MEMBER_KEY)).status).toBe(403);
    // Nothing friendlier than the real path: no trailing-slash or id-less variants.
    expect((await get('/api/files/1003/content/')).status).toBe(404);
    await get('/api/files/1003/content');
    await get('/api/files/1003/content');
    const limited = await get('/api/files/1003/content');
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    expect(
      server.requests.filter((entry) => entry.endpoint === FILE_CONTENT_ENDPOINT),
    ).toHaveLength(7);
  });

  it('cuts a truncated body half-way after announcing its full length', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 2 });
    dataset.insert('files', [{ id: 1007, name: 'big.bin' }]);
    server = await startFakeServer({ dataset });
    server.faults.failNext(1, { kind: 'truncate' }, { fileId: '1007' });
    await expect(get('/api/files/1007/content')).rejects.toThrow();
    const whole = await get('/api/files/1007/content');
    expect(whole.body.length).toBe(3 * 1024 * 1024);
  });
});

describe('fake server: a file replaced under its row (replace_file)', () => {
  it('serves the new, longer bytes; the row says the new size and moves; later requests get them too', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 2 });
    server = await startFakeServer({ dataset });
    const row = dataset.rows('files').find((candidate) => sampleFileContent(candidate) !== null)!;
    const before = { ...row };
    const oldSize = contentDigest(sampleFileContent(row)!).size;
    server.faults.failNext(
      1,
      { kind: 'replace_file', extraBytes: 100 },
      { fileId: String(row.id) },
    );
    const replaced = await get(`/api/files/${String(row.id)}/content`);
    expect(replaced.status).toBe(200);
    expect(replaced.body.length).toBe(oldSize + 100);
    expect(replaced.headers['content-length']).toBe(String(oldSize + 100));
    const after = dataset.get('files', row.id)!;
    expect(after.content_size).toBe(oldSize + 100);
    expect(after.updated_at).not.toBe(before.updated_at);
    expect(after.id).toBe(before.id);
    const again = await get(`/api/files/${String(row.id)}/content`);
    expect(again.body.equals(replaced.body)).toBe(true);
    expect(contentDigest(server.fileContent(after)!).sha256).toBe(
      createHash('sha256').update(replaced.body).digest('hex'),
    );
    // On any other request the fault is no fault: the answer is the server's own.
    server.faults.failNext(1, { kind: 'replace_file' });
    expect((await get('/api/export/users/')).status).toBe(200);
  });
});

describe('HTTP source: file contents', () => {
  it('retries resets, cut-off bodies, 5xx and 429 within one request count, then stores the bytes', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 2 });
    dataset.insert('files', [{ id: 1007, name: 'big.bin' }]);
    server = await startFakeServer({ dataset });
    for (const fault of [
      { kind: 'drop' },
      { kind: 'truncate' },
      { kind: 'status', status: 503 },
      { kind: 'rate_limit', retryAfterSeconds: 0 },
    ] as const) {
      server.faults.failNext(1, fault, { fileId: '1007' });
    }
    const directory = temporaryDirectory();
    const http = source(6);
    try {
      const store = new BlobStore(directory.path);
      await store.prepare();
      const fetched = await fetchFile(http, store, '1007');
      const expected = contentDigest(sampleFileContent(dataset.get('files', 1007)!)!);
      expect(fetched).toMatchObject({
        status: 'ok',
        blob: { sha256: expected.sha256, size: expected.size },
        contentType: 'application/octet-stream',
      });
      expect(http.requestCount).toBe(5);
      expect(http.retryCount).toBe(4);
      expect(await fetchFile(http, store, '999999')).toEqual({ status: 'missing' });
    } finally {
      await http.close();
      directory.remove();
    }
  });

  it('a body shorter or longer than its Content-Length is a transient failure, and nothing is stored', async () => {
    const directory = temporaryDirectory();
    try {
      const store = new BlobStore(directory.path);
      await store.prepare();
      const lying = {
        fileContent: async <T>(
          _fileId: string,
          consume: (
            body: AsyncIterable<Uint8Array>,
            info: { contentLength: number | undefined; contentType: string | null },
          ) => Promise<T>,
        ) => {
          const body = (async function* () {
            yield Buffer.from('twelve bytes');
          })();
          return {
            status: 'ok' as const,
            value: await consume(body, { contentLength: 20, contentType: null }),
          };
        },
      };
      const failure = await fetchFile(lying, store, '1').catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(TransientFailure);
      expect((failure as TransientFailure).message).toBe(
        'file 1: received 12 bytes, Content-Length said 20',
      );
      expect(await store.prepare()).toBe(0);
    } finally {
      directory.remove();
    }
  });
});
