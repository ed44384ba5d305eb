/**
 * A replay of the real server's captured responses (`../shared/ocs-export/real-capture/`): each
 * request gets the captured body and headers, following the captured cursors.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { SHARED_EXPORT_DIR } from './support.js';

export const CAPTURE_DIR = join(SHARED_EXPORT_DIR, 'real-capture');
export const hasCapture = existsSync(join(CAPTURE_DIR, 'manifest.body'));
if (!hasCapture) {
  console.warn(`Skipping the real-capture conformance tests: ${CAPTURE_DIR} is absent.`);
}

export const REPLAY_KEY = 'replay-admin-key';
/** The capture walked every resource with limit=1000; the replay answers that limit only. */
export const CAPTURE_LIMIT = '1000';

export interface Captured {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface Capture {
  manifest: Captured;
  team: Captured;
  /** resource -> cursor ('' for the first page) -> the page answered for it. */
  pages: Map<string, Map<string, Captured>>;
  errors: Map<string, Captured>;
  privateKeyPem: string;
}

export function readCaptured(base: string): Captured {
  const meta = JSON.parse(readFileSync(`${base}.meta.json`, 'utf8')) as {
    status: number;
    headers: Record<string, string>;
  };
  return { status: meta.status, headers: meta.headers, body: readFileSync(`${base}.body`, 'utf8') };
}

export function readCapture(): Capture {
  const pages = new Map<string, Map<string, Captured>>();
  const pageFiles = readdirSync(join(CAPTURE_DIR, 'pages'))
    .filter((name) => /^[a-z0-9_]+\.\d{3}\.body$/.test(name))
    .sort();
  for (const name of pageFiles) {
    const resource = name.slice(0, name.indexOf('.'));
    const page = readCaptured(join(CAPTURE_DIR, 'pages', name.replace(/\.body$/, '')));
    let walk = pages.get(resource);
    if (!walk) pages.set(resource, (walk = new Map()));
    // Each page answers the cursor the page before it handed out.
    const previous = [...walk.values()].pop();
    const cursor = previous ? (JSON.parse(previous.body) as { cursor: string }).cursor : '';
    walk.set(cursor, page);
  }
  const errors = new Map<string, Captured>();
  for (const name of readdirSync(join(CAPTURE_DIR, 'errors'))) {
    if (name.endsWith('.body')) {
      const base = name.replace(/\.body$/, '');
      errors.set(base, readCaptured(join(CAPTURE_DIR, 'errors', base)));
    }
  }
  return {
    manifest: readCaptured(join(CAPTURE_DIR, 'manifest')),
    team: readCaptured(join(CAPTURE_DIR, 'team')),
    pages,
    errors,
    privateKeyPem: readFileSync(join(CAPTURE_DIR, 'TEST_team_private.pem'), 'utf8'),
  };
}

export interface Replay {
  url: string;
  /** Paths asked, in order. */
  requests: string[];
  close(): Promise<void>;
}

/** Answers as the captured server did; `schema/` serves the shared openapi.json or a 404. */
export async function startReplay(capture: Capture, options: { schema: boolean }): Promise<Replay> {
  const requests: string[] = [];
  const openApiText = readFileSync(join(SHARED_EXPORT_DIR, 'openapi.json'), 'utf8');
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://replay.invalid');
    requests.push(url.pathname + url.search);
    const send = (answer: Captured) => {
      response.writeHead(answer.status, answer.headers);
      response.end(answer.body);
    };
    const match = /^\/api\/export\/([a-z0-9_]+)\/$/.exec(url.pathname);
    const endpoint = match?.[1];
    if (endpoint === 'manifest') return send(capture.manifest);
    if (endpoint === 'schema') {
      if (!options.schema) {
        response.writeHead(404, { 'Content-Type': 'text/html' });
        return response.end('<h1>Not Found</h1>');
      }
      response.writeHead(200, { 'Content-Type': 'application/vnd.oai.openapi+json' });
      return response.end(openApiText);
    }
    const key = request.headers['x-api-key'];
    if (key === undefined) return send(capture.errors.get('no-key')!);
    if (key !== REPLAY_KEY) return send(capture.errors.get('bad-key')!);
    if (endpoint === 'team') return send(capture.team);
    const walk = endpoint === undefined ? undefined : capture.pages.get(endpoint);
    if (!walk) return send(capture.errors.get('unknown-resource')!);
    const limit = url.searchParams.get('limit');
    if (limit !== CAPTURE_LIMIT) {
      response.writeHead(500, { 'Content-Type': 'text/plain' });
      return response.end(`the replay only answers limit=${CAPTURE_LIMIT}, not ${limit}`);
    }
    const cursor = url.searchParams.get('cursor') ?? '';
    const page = walk.get(cursor);
    if (page) return send(page);
    // A client resuming after the last row asks with that row's cursor: the real server answers
    // with an empty last page.
    if (isCursorAfterLastRow(capture, endpoint!, cursor)) {
      response.writeHead(200, { 'Content-Type': 'application/json' });
      return response.end('{"cursor":null,"has_more":false,"results":[]}');
    }
    send(capture.errors.get('bad-cursor')!);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Whether `cursor` (pk: an id; updated_at_id: base64 JSON) points at or past the last row. */
export function isCursorAfterLastRow(capture: Capture, resource: string, cursor: string): boolean {
  const walk = [...(capture.pages.get(resource)?.values() ?? [])];
  const last =
    walk.length === 0
      ? undefined
      : (
          JSON.parse(walk[walk.length - 1]!.body) as {
            results: Array<{ id: number; updated_at?: string }>;
          }
        ).results.at(-1);
  if (!last) return true;
  if (/^\d+$/.test(cursor)) return BigInt(cursor) >= BigInt(last.id);
  try {
    const decoded = JSON.parse(Buffer.from(cursor, 'base64').toString('utf8')) as {
      updated_at: string;
      id: number;
    };
    return (
      decoded.id === last.id && Date.parse(decoded.updated_at) === Date.parse(last.updated_at ?? '')
    );
  } catch {
    return false;
  }
}
