/** Plumbing for the `serve` tests: a warehouse served over HTTP, and plain GETs against it. */
import { generateKeyPairSync } from 'node:crypto';
import { request } from 'undici';
import { BlobStore } from '../src/files/blob-store.js';
import { createLogger } from '../src/log.js';
import { startExportServer, type ExportServer } from '../src/serve/export-server.js';
import { prepareServe, type PrepareServeOptions } from '../src/serve/prepare.js';
import type { SealingForServe } from '../src/serve/rows.js';
import type { FailedKeyThrottle } from '../src/serve/failed-keys.js';
import { parseJsonExact } from '../src/json.js';
import { openWarehouse } from '../src/warehouse/open.js';
import type { TestWarehouse } from './support.js';

/** As long as serve asks (32 characters at least). */
export const SERVE_KEY = 'serve-test-key-0123456789abcdef-0123';

let restoreKeys: { publicKey: string; privateKey: string } | undefined;

/** The restore key pair (what `ocs-sync keygen` makes), once per test file. */
export function restoreKeyPair(): { publicKey: string; privateKey: string } {
  restoreKeys ??= generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return restoreKeys;
}

export interface ServedWarehouse {
  url: string;
  close(): Promise<void>;
}

/** Serves a test warehouse through the public API, as `ocs-sync serve` does. */
export async function serveWarehouse(
  warehouse: TestWarehouse,
  options: Partial<PrepareServeOptions> & {
    sealing?: SealingForServe;
    filesDir?: string;
    failedKeys?: FailedKeyThrottle;
  } = {},
): Promise<ServedWarehouse> {
  const opened = await openWarehouse({
    url: warehouse.env.OCS_WAREHOUSE_URL!,
    schema: warehouse.env.OCS_WAREHOUSE_SCHEMA,
  });
  let server: ExportServer | undefined;
  try {
    const sealing = options.sealing ?? {};
    const prepared = await prepareServe(opened, {
      policyFor: options.policyFor ?? (() => 'plaintext'),
      excludedFields: options.excludedFields,
      asOf: options.asOf,
      allowIncomplete: options.allowIncomplete ?? false,
      hasPublicKey: options.hasPublicKey ?? sealing.publicKey !== undefined,
      hasArchiveKey: options.hasArchiveKey ?? sealing.archiveSecretKey !== undefined,
    });
    server = await startExportServer({
      warehouse: opened,
      plan: prepared.plan,
      manifestBody: prepared.manifestBody,
      openApiBody: prepared.openApiBody,
      apiKey: SERVE_KEY,
      sealing,
      asOf: options.asOf,
      files: new BlobStore(options.filesDir ?? warehouse.filesDir),
      listen: { host: '127.0.0.1', port: 0 },
      logger: createLogger({ level: 'silent' }),
      failedKeys: options.failedKeys,
    });
  } catch (error) {
    await opened.close();
    throw error;
  }
  const running = server;
  return {
    url: running.url,
    close: async () => {
      await running.close();
      await opened.close();
    },
  };
}

export interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  bytes: Buffer;
  /** The body parsed with 64-bit integers kept exact. */
  json(): unknown;
}

export async function get(
  url: string,
  headers: Record<string, string> = { 'x-api-key': SERVE_KEY },
): Promise<Response> {
  // A fresh connection per request: a test paused by a busy machine never reuses one the server
  // has just closed.
  const response = await request(url, { headers, reset: true });
  const bytes = Buffer.from(await response.body.arrayBuffer());
  const text = bytes.toString('utf8');
  return {
    status: response.statusCode,
    headers: response.headers,
    text,
    bytes,
    json: () => parseJsonExact(text),
  };
}

interface PageBody {
  cursor: string | null;
  has_more: boolean;
  results: Array<Record<string, unknown>>;
}

/** Walks one resource as the importer does; returns every page body. */
export async function walk(
  base: string,
  resource: string,
  limit: number,
  headers: Record<string, string> = { 'x-api-key': SERVE_KEY },
): Promise<PageBody[]> {
  const pages: PageBody[] = [];
  let cursor: string | null = null;
  for (;;) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor !== null) query.set('cursor', cursor);
    const response = await get(`${base}/api/export/${resource}/?${query.toString()}`, headers);
    if (response.status !== 200) {
      throw new Error(
        `GET ${resource}/ answered ${response.status}: ${response.text.slice(0, 200)}`,
      );
    }
    const page = response.json() as PageBody;
    pages.push(page);
    if (!page.has_more) return pages;
    cursor = page.cursor;
  }
}
