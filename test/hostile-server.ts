/**
 * A hostile export server for tests: the export surface's shape (manifest, team, resource pages,
 * file contents), with each resource answered by a behaviour that may misbehave the ways a broken
 * or hostile server can: a page that never ends, a body that trickles, cursors that lead back,
 * JSON nested thousands deep, error details full of terminal escapes, files longer than their
 * row says. It counts what it sent and whether the client hung up, so tests assert on bytes and
 * outcomes, never on time.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ADMIN_KEY } from './support.js';

/** One request to a resource, as its behaviour sees it. */
export interface PageRequest {
  cursor: string | null;
  limit: number;
  /** 0 for the first request to this resource, then 1, 2, … */
  index: number;
}

export type PageBehaviour = (
  request: PageRequest,
  response: ServerResponse,
  stream: StreamLog,
) => void | Promise<void>;

export type FileBehaviour = (
  fileId: string,
  response: ServerResponse,
  stream: StreamLog,
) => void | Promise<void>;

export interface HostileResource {
  name: string;
  cursor?: 'pk' | 'updated_at_id';
  pages: PageBehaviour;
}

export interface HostileServerOptions {
  resources: HostileResource[];
  files?: FileBehaviour;
  /** Answers `team/` instead of the team object (e.g. a hostile 401). */
  team?: (response: ServerResponse) => void;
  /** More names the manifest lists (never served), by how many times it was fetched before. */
  manifestNames?: (fetches: number) => string[];
}

/** What one streamed answer did: bytes written, and whether the client closed it before the end. */
export interface StreamLog {
  path: string;
  bytes: number;
  closedByClient: boolean;
  finished: boolean;
}

export interface HostileServer {
  url: string;
  /** Requests per path (without query), in arrival order. */
  readonly requests: string[];
  readonly streams: StreamLog[];
  close(): Promise<void>;
}

export function sendJson(
  response: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  const body = Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(body.length),
    ...headers,
  });
  response.end(body);
}

/** Writes `chunk` and waits for the socket to take it; false once the client has gone. */
export async function write(
  response: ServerResponse,
  stream: StreamLog,
  chunk: string | Buffer,
): Promise<boolean> {
  if (response.destroyed || stream.closedByClient) return false;
  const bytes = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
  const drained = response.write(chunk);
  stream.bytes += bytes;
  if (!drained) {
    await new Promise<void>((resolve) => {
      const done = () => {
        response.off('drain', done);
        response.off('close', done);
        resolve();
      };
      response.on('drain', done);
      response.on('close', done);
    });
  }
  return !response.destroyed && !stream.closedByClient;
}

/** Pages of `count` rows `{id, name}` by id, as the real server pages a `pk` resource. */
export function rowsByPk(count: number, extra: (id: number) => object = () => ({})): PageBehaviour {
  return ({ cursor, limit }, response) => {
    const after = cursor === null ? 0 : Number(cursor);
    const ids = Array.from({ length: count }, (_, index) => index + 1).filter((id) => id > after);
    const page = ids.slice(0, limit);
    const hasMore = ids.length > limit;
    sendJson(response, 200, {
      cursor: hasMore ? String(page[page.length - 1]) : null,
      has_more: hasMore,
      results: page.map((id) => ({ id, name: `row ${id}`, ...extra(id) })),
    });
  };
}

/**
 * A 200 page that never ends, without a Content-Length: one row whose `text` grows by `chunk`
 * bytes at a time for as long as the client reads.
 */
export function endlessPage(chunkBytes = 64 * 1024): PageBehaviour {
  return async (_request, response, stream) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    if (
      !(await write(
        response,
        stream,
        '{"cursor":null,"has_more":false,"results":[{"id":1,"text":"',
      ))
    ) {
      return;
    }
    const chunk = 'x'.repeat(chunkBytes);
    while (await write(response, stream, chunk)) {
      // Until the client hangs up.
    }
  };
}

/** A 200 page that sends one byte every `intervalMs`, forever: never idle long, never done. */
export function tricklingPage(intervalMs = 100): PageBehaviour {
  return async (_request, response, stream) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    if (!(await write(response, stream, '{"cursor":null,"has_more":false,"results":['))) return;
    while (await write(response, stream, ' ')) {
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  };
}

export async function startHostileServer(options: HostileServerOptions): Promise<HostileServer> {
  const requests: string[] = [];
  const streams: StreamLog[] = [];
  const counts = new Map<string, number>();
  let manifestFetches = 0;
  const byName = new Map(options.resources.map((resource) => [resource.name, resource]));

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://hostile.invalid');
    requests.push(url.pathname);
    const stream: StreamLog = {
      path: url.pathname,
      bytes: 0,
      closedByClient: false,
      finished: false,
    };
    streams.push(stream);
    response.on('close', () => {
      if (!response.writableFinished) stream.closedByClient = true;
    });
    response.on('finish', () => (stream.finished = true));
    const authorized = request.headers['x-api-key'] === ADMIN_KEY;

    if (url.pathname === '/api/export/manifest/') {
      const listed = options.manifestNames?.(manifestFetches++) ?? [];
      sendJson(response, 200, {
        schema_checksum: 'hostile',
        entries: [
          ...options.resources.map((resource) => ({
            name: resource.name,
            cursor: resource.cursor,
          })),
          ...listed.map((name) => ({ name, cursor: undefined })),
        ].map(({ name, cursor }) => ({
          model: `hostile.${name}`,
          resource: name,
          cursor: cursor ?? 'pk',
          secret: false,
        })),
      });
      return;
    }
    if (url.pathname === '/api/export/schema/') {
      sendJson(response, 404, { detail: 'Not found.' });
      return;
    }
    if (!authorized) {
      sendJson(response, 401, { detail: 'Invalid token.' }, { 'www-authenticate': 'Api-Key' });
      return;
    }
    if (url.pathname === '/api/export/team/') {
      if (options.team) options.team(response);
      else
        sendJson(response, 200, {
          id: 1,
          name: 'Hostile team',
          slug: 'hostile',
          has_public_key: false,
        });
      return;
    }
    const file = /^\/api\/files\/(\d+)\/content$/.exec(url.pathname);
    if (file && options.files) {
      await options.files(file[1]!, response, stream);
      return;
    }
    const page = /^\/api\/export\/([^/]+)\/$/.exec(url.pathname);
    const resource = page ? byName.get(decodeURIComponent(page[1]!)) : undefined;
    if (!resource) {
      sendJson(response, 404, { detail: 'Unknown resource.' });
      return;
    }
    const index = counts.get(resource.name) ?? 0;
    counts.set(resource.name, index + 1);
    await resource.pages(
      {
        cursor: url.searchParams.get('cursor'),
        limit: Number(url.searchParams.get('limit') ?? '100'),
        index,
      },
      response,
      stream,
    );
  };

  const server = createServer((request, response) => {
    handle(request, response).catch(() => response.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    streams,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
