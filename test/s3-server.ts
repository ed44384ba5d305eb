/**
 * A real S3-compatible server for tests: s3rver (the S3 REST protocol over a folder, with SigV4
 * signatures checked) on 127.0.0.1, on a free port, in a temporary folder of its own, behind a
 * proxy that records each request's method, path and headers and can inject faults (an S3 error
 * answer, a connection reset mid-request, a response cut short).
 *
 * s3rver does not implement a few requests ocs-sync makes (docs/development.md lists them). The
 * proxy answers three of them from s3rver's own folder, as a store that has them would, so the
 * code paths run against real state: ListMultipartUploads and AbortMultipartUpload (s3rver keeps
 * unfinished uploads in `<bucket>/._S3rver_uploads/<id>/`), and `If-None-Match: *` on a PUT or a
 * multipart completion (412 when the key holds an object). GetObjectLockConfiguration is answered
 * only when a test says what the bucket has (`objectLock`); otherwise s3rver's 501 passes through.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openObjectStore } from '../src/storage/open.js';
import { MIN_PART_BYTES } from '../src/storage/s3-store.js';
import type { ObjectStore } from '../src/storage/store.js';

// The SDK never looks for an instance role here (it would ask 169.254.169.254), nor at a
// developer's own profile, and it does not warn about Node 20 in test output.
process.env.AWS_EC2_METADATA_DISABLED = 'true';
process.env.AWS_SHARED_CREDENTIALS_FILE = '/nonexistent/ocs-sync-test-credentials';
process.env.AWS_CONFIG_FILE = '/nonexistent/ocs-sync-test-config';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
for (const name of [
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_PROFILE',
]) {
  delete process.env[name];
}

export const S3_ACCESS_KEY = 'S3RVER';
export const S3_SECRET_KEY = 'S3RVER';

export interface RecordedRequest {
  method: string;
  /** Path and query, as sent (`/bucket/key?uploadId=…`). */
  url: string;
  headers: Record<string, string>;
}

/** What the proxy does to one request instead of passing it on as it is. */
export type Fault =
  | { status: number; code: string }
  /** Reads this many bytes of the request's body, then resets the connection. */
  | { resetAfterBytes: number }
  /** Passes the request on, then cuts the response's body after this many bytes. */
  | { cutResponseAfterBytes: number }
  /** Passes the request on once this settles (the client waits for its answer meanwhile). */
  | { hold: Promise<void> };

export interface S3TestServer {
  /** The proxy's URL: what ocs-sync is pointed at. */
  endpoint: string;
  /** s3rver's folder. */
  directory: string;
  requests: RecordedRequest[];
  /** A rule consulted for every request; return a fault to inject it. */
  fault: ((request: RecordedRequest) => Fault | undefined) | undefined;
  /** What GetObjectLockConfiguration answers for a bucket (undefined: s3rver's 501). */
  objectLock: Map<string, 'enabled' | 'absent'>;
  /** OCS_S3_ENDPOINT, path style and the test credentials. */
  env(): Record<string, string>;
  /** Every object key in a bucket, sorted. */
  keys(bucket: string): string[];
  /** An object's bytes, read from s3rver's folder. */
  objectBytes(bucket: string, key: string): Buffer;
  /** Unfinished multipart uploads in a bucket: their keys. */
  unfinishedUploads(bucket: string): string[];
  close(): Promise<void>;
}

/** A fault rule that injects `fault` into the first request `matches` (once per method and key). */
export function faultOnce(
  matches: (item: RecordedRequest) => boolean,
  fault: () => Fault,
): (item: RecordedRequest) => Fault | undefined {
  const seen = new Set<string>();
  return (item) => {
    const key = `${item.method} ${item.url.split('?')[0]}`;
    if (!matches(item) || seen.has(key)) return undefined;
    seen.add(key);
    return fault();
  };
}

const OBJECT_SUFFIX = '._S3rver_object';
const UPLOADS = '._S3rver_uploads';

export async function startS3Server(options: { buckets?: string[] } = {}): Promise<S3TestServer> {
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-s3-'));
  const { default: S3rver } = await import('s3rver');
  const s3rver = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: (options.buckets ?? ['ocs-test']).map((name) => ({ name, configs: [] })),
  });
  const upstream = await s3rver.run();

  const requests: RecordedRequest[] = [];
  const state: Pick<S3TestServer, 'fault' | 'objectLock'> = {
    fault: undefined,
    objectLock: new Map(),
  };
  const objectPath = (bucket: string, key: string) =>
    join(directory, bucket, `${key}${OBJECT_SUFFIX}`);

  const proxy: Server = createServer((incoming, outgoing) => {
    const url = incoming.url ?? '/';
    const recorded: RecordedRequest = {
      method: incoming.method ?? 'GET',
      url,
      headers: Object.fromEntries(
        Object.entries(incoming.headers).map(([name, value]) => [name, String(value)]),
      ),
    };
    requests.push(recorded);
    const parsed = new URL(url, 'http://proxy');
    const [, bucket = '', ...keyParts] = parsed.pathname.split('/');
    const key = decodeURIComponent(keyParts.join('/'));
    const reply = (status: number, body = '') => {
      incoming.resume();
      outgoing.writeHead(status, {
        'content-type': 'application/xml',
        'content-length': Buffer.byteLength(body),
      });
      outgoing.end(body);
    };
    const s3Error = (status: number, code: string) =>
      reply(
        status,
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message></Error>`,
      );

    const fault = state.fault?.(recorded);
    if (fault && 'status' in fault) return s3Error(fault.status, fault.code);
    if (fault && 'resetAfterBytes' in fault) {
      let seen = 0;
      incoming.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen >= fault.resetAfterBytes) incoming.socket.destroy();
      });
      incoming.on('end', () => incoming.socket.destroy());
      return;
    }

    // The requests s3rver lacks, answered from its folder.
    if (recorded.method === 'GET' && parsed.searchParams.has('uploads') && key === '') {
      return reply(200, listUploads(directory, bucket, parsed.searchParams.get('prefix') ?? ''));
    }
    if (recorded.method === 'DELETE' && parsed.searchParams.has('uploadId')) {
      const folder = join(directory, bucket, UPLOADS, parsed.searchParams.get('uploadId')!);
      if (!existsSync(folder)) return s3Error(404, 'NoSuchUpload');
      rmSync(folder, { recursive: true, force: true });
      return reply(204);
    }
    if (recorded.method === 'GET' && parsed.searchParams.has('object-lock') && key === '') {
      const lock = state.objectLock.get(bucket);
      if (lock === 'absent') return s3Error(404, 'ObjectLockConfigurationNotFoundError');
      if (lock === 'enabled') {
        return reply(
          200,
          '<?xml version="1.0" encoding="UTF-8"?><ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>',
        );
      }
    }
    const conditional = recorded.headers['if-none-match'] === '*';
    const writesObject =
      (recorded.method === 'PUT' && !parsed.searchParams.has('uploadId')) ||
      (recorded.method === 'POST' && parsed.searchParams.has('uploadId'));
    if (conditional && writesObject && key !== '' && existsSync(objectPath(bucket, key))) {
      return s3Error(412, 'PreconditionFailed');
    }

    const pass = () => {
      const forwarded = httpRequest(
        {
          host: '127.0.0.1',
          port: upstream.port,
          method: incoming.method,
          path: url,
          headers: incoming.headers,
          agent: false,
        },
        (answer: IncomingMessage) => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          if (fault && 'cutResponseAfterBytes' in fault) {
            let sent = 0;
            answer.on('data', (chunk: Buffer) => {
              const room = fault.cutResponseAfterBytes - sent;
              if (room <= 0) return;
              outgoing.write(chunk.subarray(0, room));
              sent += Math.min(room, chunk.length);
              if (sent >= fault.cutResponseAfterBytes) {
                answer.destroy();
                // Give the bytes written a moment to leave, then cut the connection.
                setTimeout(() => outgoing.socket?.destroy(), 20);
              }
            });
            answer.on('end', () => outgoing.end());
            return;
          }
          answer.pipe(outgoing);
        },
      );
      forwarded.on('error', () => outgoing.socket?.destroy());
      // A client gone mid-request (a killed process) ends the forwarded request too, or s3rver
      // would wait for the rest of its body for ever.
      incoming.on('close', () => {
        if (!incoming.complete) forwarded.destroy();
      });
      outgoing.on('close', () => {
        if (!outgoing.writableFinished) forwarded.destroy();
      });
      incoming.pipe(forwarded);
    };
    if (fault && 'hold' in fault) {
      void fault.hold.then(pass);
      return;
    }
    pass();
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;

  const server: S3TestServer = {
    endpoint,
    directory,
    requests,
    get fault() {
      return state.fault;
    },
    set fault(rule) {
      state.fault = rule;
    },
    objectLock: state.objectLock,
    env: () => ({
      OCS_S3_ENDPOINT: endpoint,
      OCS_S3_FORCE_PATH_STYLE: 'true',
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: S3_ACCESS_KEY,
      AWS_SECRET_ACCESS_KEY: S3_SECRET_KEY,
    }),
    keys: (bucket) => objectKeys(join(directory, bucket)),
    objectBytes: (bucket, key) => readFileSync(objectPath(bucket, key)),
    unfinishedUploads: (bucket) => {
      const root = join(directory, bucket, UPLOADS);
      if (!existsSync(root)) return [];
      return readdirSync(root).map((id) => readFileSync(join(root, id, 'key'), 'utf8'));
    },
    close: async () => {
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      await s3rver.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
  return server;
}

function objectKeys(root: string, prefix = ''): string[] {
  if (!existsSync(root)) return [];
  const keys: string[] = [];
  for (const name of readdirSync(root)) {
    if (name === UPLOADS) continue;
    const path = join(root, name);
    if (statSync(path).isDirectory()) keys.push(...objectKeys(path, `${prefix}${name}/`));
    else if (name.endsWith(OBJECT_SUFFIX))
      keys.push(`${prefix}${name.slice(0, -OBJECT_SUFFIX.length)}`);
  }
  return keys.sort();
}

function listUploads(directory: string, bucket: string, prefix: string): string {
  const root = join(directory, bucket, UPLOADS);
  const uploads = existsSync(root)
    ? readdirSync(root)
        .map((id) => ({
          id,
          key: readFileSync(join(root, id, 'key'), 'utf8'),
          initiated: statSync(join(root, id)).birthtime,
        }))
        .filter((upload) => upload.key.startsWith(prefix))
    : [];
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  return (
    '<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult>' +
    `<Bucket>${bucket}</Bucket><Prefix>${escape(prefix)}</Prefix><IsTruncated>false</IsTruncated>` +
    uploads
      .map(
        (upload) =>
          `<Upload><Key>${escape(upload.key)}</Key><UploadId>${upload.id}</UploadId><Initiated>${upload.initiated.toISOString()}</Initiated></Upload>`,
      )
      .join('') +
    '</ListMultipartUploadsResult>'
  );
}

/** The store of `location` (`s3://bucket/prefix`) on this server: 5 MiB parts, 2 in flight. */
export function openTestBucket(s3: S3TestServer, location: string): ObjectStore {
  const env = s3.env();
  return openObjectStore(location, {
    s3: {
      endpoint: env.OCS_S3_ENDPOINT,
      region: 'us-east-1',
      forcePathStyle: true,
      partSizeBytes: MIN_PART_BYTES,
      partsInFlight: 2,
      maxAttempts: 2,
      env,
    },
  });
}
