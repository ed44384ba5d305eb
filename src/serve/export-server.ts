/**
 * `serve`: the warehouse answered as the server's export API, for the server's own importer
 * (`manage.py sync_team`). Same paths, paging, cursors, error bodies and auth answers as the real
 * server (REFERENCE.md); only the rows come from the warehouse.
 */
import { djangoNotFound } from '../export-api/pages.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { ConfigError } from '../errors.js';
import { listenFailure, type ListenAddress } from '../listen-address.js';
import {
  InvalidCursorError,
  decodeCursor,
  encodePkCursor,
  encodeUpdatedAtCursor,
  formatTimestamp,
  lastParam,
  parsePythonInt,
  parseTimestamp,
} from '../export-api/cursor.js';
import {
  SELECTION_CHANGED_DETAIL,
  WHOLE_TEAM_KEY,
  compareCodePoints,
  selectionKey,
} from '../export-api/selection.js';
import type { Row, Warehouse } from '../interfaces.js';
import type { Logger } from '../log.js';
import { repeatedEvents, type RepeatedKind } from '../repeated-events.js';
import { toJsonText } from '../warehouse/values.js';
import type { ContentStore } from '../files/content-store.js';
import { TEAM_RESOURCE, type ServePlan, type ServedResource } from './plan.js';
import { renderRows, UnservableValueError, type SealingForServe } from './rows.js';
import { FailedKeyThrottle } from './failed-keys.js';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

export interface ExportServerOptions {
  warehouse: Warehouse;
  plan: ServePlan;
  /** The stored manifest and OpenAPI document, served as they were fetched. */
  manifestBody: string;
  openApiBody: string | undefined;
  apiKey: string;
  sealing: SealingForServe;
  asOf?: string;
  /** Where file blobs are (`files.dir`: a folder or a bucket); undefined: every file answers 404. */
  files?: ContentStore;
  listen: ListenAddress;
  logger: Logger;
  /** Bounds the wrong keys answered, for the whole process (default: 10 a second, 5 s at most). */
  failedKeys?: FailedKeyThrottle;
}

export interface ExportServer {
  readonly url: string;
  readonly address: ListenAddress;
  close(): Promise<void>;
}

interface Reply {
  status: number;
  headers?: Record<string, string>;
  body: string;
}

const JSON_TYPE = 'application/json';

/** Per file at debug; one line for the files of a few seconds (repeated-events.ts). */
const BLOB_NOT_IN_FILES_DIR: RepeatedKind = {
  level: 'warn',
  message: 'serve: the file ledger names a blob that is not in files.dir; answering 404',
  summary: (count) =>
    `serve: the file ledger names ${count} blobs that are not in files.dir; answered 404`,
};
/** One line for the wrong keys of a few seconds, naming the first few addresses. */
const WRONG_KEY: RepeatedKind = {
  level: 'warn',
  message: 'serve: a wrong API key',
  summary: (count) =>
    `serve: ${count} wrong API keys (each answered 401 in its turn, a few a second, or 429 when too many wait)`,
};
/** Every answer holds team data or says who may read it: no cache (a proxy's, a browser's) keeps it. */
const NO_STORE = { 'cache-control': 'no-store' };
const NOT_PROVIDED = 'Authentication credentials were not provided.';
const INVALID_TOKEN = 'Invalid token.';

function json(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return {
    status,
    headers: { 'content-type': JSON_TYPE, vary: 'Accept', ...headers },
    body: toJsonText(value),
  };
}

/** sha256 of both sides first: timingSafeEqual needs equal lengths, and the length is no secret. */
function sameKey(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

function presentedKey(request: IncomingMessage): string | undefined {
  const header = request.headers['x-api-key'];
  if (typeof header === 'string' && header !== '') return header;
  const authorization = request.headers.authorization;
  if (typeof authorization === 'string') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match) return match[1];
  }
  return undefined;
}

export async function startExportServer(options: ExportServerOptions): Promise<ExportServer> {
  const { logger } = options;
  const handler = new ExportHandler(options);
  const server = createServer({ keepAlive: true }, (request, response) => {
    handler.handle(request, response).catch((error: unknown) => {
      const reason =
        error instanceof UnservableValueError
          ? error.message
          : error instanceof Error
            ? error.message
            : String(error);
      logger.error({ path: pathOf(request), reason }, 'serve: cannot answer');
      if (!response.headersSent) {
        sendReply(request, response, json(500, { detail: 'A server error occurred.' }));
      } else {
        response.destroy();
      }
    });
  });
  // The importer keeps its connection between pages, which can take a while to import: close an
  // idle one well after any client would, so a reused connection is not cut under a request.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => reject(listenError(options.listen, error));
    server.once('error', onError);
    server.listen(options.listen.port, options.listen.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const host = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${bound.port}`,
    address: { host: bound.address, port: bound.port },
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => {
          repeatedEvents(logger).flush();
          resolve();
        });
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 1_000).unref();
      })),
  };
}

function pathOf(request: IncomingMessage): string {
  return new URL(request.url ?? '/', 'http://serve.invalid').pathname;
}

function sendReply(request: IncomingMessage, response: ServerResponse, reply: Reply): void {
  const body = Buffer.from(reply.body, 'utf8');
  response.writeHead(reply.status, {
    ...reply.headers,
    ...NO_STORE,
    'content-length': String(body.length),
  });
  response.end(request.method === 'HEAD' ? undefined : body);
}

/** The chatbot choice `serve` presents: `all`, or the chatbots it serves. */
interface ServedChoice {
  key: string;
  chatbots: Array<{ public_id: string; name: string }>;
}

class ExportHandler {
  private yaml?: string;
  private readonly failedKeys: FailedKeyThrottle;
  private choice?: Promise<ServedChoice | undefined>;

  constructor(private readonly options: ExportServerOptions) {
    this.failedKeys = options.failedKeys ?? new FailedKeyThrottle();
  }

  /**
   * Only when the server spoke the scoped protocol. When its team had a chatbot choice, `serve`
   * says which chatbots it serves: every working version it holds (rows that left the choice are
   * still served, so what it serves points only at what it serves); otherwise the whole team.
   */
  private servedChoice(): Promise<ServedChoice | undefined> {
    this.choice ??= (async () => {
      const { plan } = this.options;
      if (!plan.scoped) return undefined;
      const [team] = await this.read(plan.team, null, 1);
      const chose =
        team !== undefined && Array.isArray(team.exportable_chatbots)
          ? team.exportable_chatbots.length > 0
          : false;
      const chatbotsResource = plan.resources.get('chatbots');
      if (!chose || !chatbotsResource) return { key: WHOLE_TEAM_KEY, chatbots: [] };
      const chatbots: ServedChoice['chatbots'] = [];
      for (let after: { id: bigint } | null = null; ;) {
        const rows = await this.read(chatbotsResource, after, MAX_LIMIT);
        for (const row of rows) {
          const working = row.working_version === null || row.working_version === undefined;
          if (working && typeof row.public_id === 'string') {
            chatbots.push({ public_id: row.public_id, name: String(row.name ?? '') });
          }
        }
        if (rows.length < MAX_LIMIT) break;
        after = { id: BigInt(rows[rows.length - 1]!.id) };
      }
      chatbots.sort((left, right) => compareCodePoints(left.public_id, right.public_id));
      return { key: selectionKey(chatbots.map((chatbot) => chatbot.public_id)), chatbots };
    })();
    return this.choice;
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://serve.invalid');
    const method = request.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') {
      sendReply(
        request,
        response,
        json(405, { detail: `Method "${method}" not allowed.` }, { allow: 'GET, HEAD, OPTIONS' }),
      );
      return;
    }
    const file = /^\/api\/files\/(\d{1,19})\/content\/?$/.exec(url.pathname);
    if (file) {
      const refused = await this.authenticate(request);
      if (refused) sendReply(request, response, refused);
      else await this.sendFile(request, response, BigInt(file[1]!));
      return;
    }
    const match = /^\/api\/export\/([^/]+)(\/?)$/.exec(url.pathname);
    if (!match) {
      sendReply(request, response, djangoNotFound());
      return;
    }
    if (match[2] !== '/') {
      // Django's APPEND_SLASH.
      sendReply(request, response, {
        status: 301,
        headers: {
          location: `${url.pathname}/${url.search}`,
          'content-type': 'text/html; charset=utf-8',
        },
        body: '',
      });
      return;
    }
    let endpoint: string;
    try {
      endpoint = decodeURIComponent(match[1]!);
    } catch {
      // A malformed percent-escape (`%E0`): the client's fault, nothing to log.
      sendReply(request, response, json(400, { detail: 'Malformed percent-escape in the path.' }));
      return;
    }
    sendReply(request, response, await this.route(request, endpoint, url.searchParams));
  }

  private async route(
    request: IncomingMessage,
    endpoint: string,
    params: URLSearchParams,
  ): Promise<Reply> {
    if (endpoint === 'manifest') {
      return {
        status: 200,
        headers: { 'content-type': JSON_TYPE, vary: 'Accept' },
        body: this.options.manifestBody,
      };
    }
    if (endpoint === 'schema') return this.schema(params);
    const refused = await this.authenticate(request);
    if (refused) return refused;
    if (endpoint === TEAM_RESOURCE) return this.team();
    const resource = this.options.plan.resources.get(endpoint);
    if (!resource) return json(404, { detail: 'Unknown resource.' });
    return this.page(resource, params);
  }

  private async authenticate(request: IncomingMessage): Promise<Reply | undefined> {
    const key = presentedKey(request);
    const unauthorized = (detail: string) =>
      json(401, { detail }, { 'www-authenticate': 'Api-Key' });
    if (key === undefined) return unauthorized(NOT_PROVIDED);
    // Checked first: the right key never waits for wrong ones, whoever sent them.
    if (sameKey(key, this.options.apiKey)) return undefined;
    const address = request.socket.remoteAddress ?? 'unknown';
    repeatedEvents(this.options.logger).add(WRONG_KEY, { id: address, fields: { address } });
    if (!(await this.failedKeys.failed())) {
      return json(
        429,
        { detail: 'Too many wrong API keys; try again later.' },
        { 'retry-after': String(this.failedKeys.retryAfterSeconds()) },
      );
    }
    return unauthorized(INVALID_TOKEN);
  }

  private schema(params: URLSearchParams): Reply {
    const body = this.options.openApiBody;
    if (body === undefined) return json(404, { detail: 'Not found.' });
    if (lastParam(params, 'format') === 'json') {
      return { status: 200, headers: { 'content-type': 'application/vnd.oai.openapi+json' }, body };
    }
    this.yaml ??= stringifyYaml(JSON.parse(body), { aliasDuplicateObjects: false });
    return {
      status: 200,
      headers: { 'content-type': 'application/vnd.oai.openapi; charset=utf-8' },
      body: this.yaml,
    };
  }

  private async team(): Promise<Reply> {
    const { team } = this.options.plan;
    const [row] = await this.read(team, null, 1);
    if (!row) return json(404, { detail: 'Not found.' });
    const [rendered] = await this.render(team, [row]);
    const choice = await this.servedChoice();
    // The importer refuses a source team that is not migrating or has no public key.
    return json(200, {
      ...rendered,
      is_migrating: true,
      has_public_key: true,
      ...(choice ? { exportable_chatbots: choice.chatbots } : {}),
    });
  }

  private async page(resource: ServedResource, params: URLSearchParams): Promise<Reply> {
    const limitText = lastParam(params, 'limit');
    let limit = DEFAULT_LIMIT;
    if (limitText !== null && limitText !== '') {
      const parsed = parsePythonInt(limitText);
      if (parsed === undefined) return json(400, ['`limit` must be an integer.']);
      if (parsed < 1) return json(400, ['`limit` must be a positive integer.']);
      limit = Math.min(parsed, MAX_LIMIT);
    }
    const choice = await this.servedChoice();
    const selection = lastParam(params, 'selection');
    if (choice && selection !== null && selection !== choice.key) {
      return json(409, { detail: SELECTION_CHANGED_DETAIL });
    }
    const cursorText = lastParam(params, 'cursor');
    let after: { id: bigint; updatedAt?: string } | null = null;
    if (cursorText !== null && cursorText !== '') {
      try {
        const decoded = decodeCursor(resource.cursor, cursorText);
        after =
          decoded.kind === 'pk'
            ? { id: BigInt(decoded.id) }
            : { id: BigInt(decoded.id), updatedAt: formatTimestamp(decoded.updatedAtMicros) };
      } catch (error) {
        if (error instanceof InvalidCursorError) return json(400, ['Invalid pagination cursor.']);
        throw error;
      }
    }
    // Under a chatbot choice the server serves its excluded resources empty; so does `serve`.
    const excluded =
      choice !== undefined && choice.key !== WHOLE_TEAM_KEY && resource.excludedUnderChoice;
    // One row more than asked says whether another page follows.
    const rows = excluded ? [] : await this.read(resource, after, limit + 1);
    const hasMore = rows.length > limit;
    const pageRows = hasMore ? rows.slice(0, limit) : rows;
    const results = await this.render(resource, pageRows);
    const last = results[results.length - 1];
    const cursor = hasMore && last ? cursorAfter(resource, last) : null;
    return {
      status: 200,
      headers: { 'content-type': JSON_TYPE, vary: 'Accept', allow: 'GET, HEAD, OPTIONS' },
      body: `{"cursor":${JSON.stringify(cursor)},"has_more":${hasMore},"results":${toJsonText(results)}}`,
    };
  }

  private async read(
    resource: ServedResource,
    after: { id: bigint; updatedAt?: string } | null,
    limit: number,
  ): Promise<Row[]> {
    if (resource.source === 'empty') return [];
    return this.options.warehouse.archive.readRows({
      table: resource.resource,
      columns: resource.columns,
      order: resource.cursor,
      after,
      limit,
      asOf: resource.source === 'history' ? this.options.asOf : undefined,
    });
  }

  private async render(resource: ServedResource, rows: Row[]): Promise<Record<string, unknown>[]> {
    const originals =
      rows.length === 0
        ? []
        : await this.options.warehouse.archive.originalValues(
            resource.resource,
            rows.map((row) => String(row.id)),
          );
    return renderRows(resource, rows, originals, this.options.sealing);
  }

  private async sendFile(
    request: IncomingMessage,
    response: ServerResponse,
    fileId: bigint,
  ): Promise<void> {
    const notFound = json(404, { detail: 'Not found.' });
    const { files, warehouse } = this.options;
    const stored =
      files === undefined ? undefined : await warehouse.fileLedger().get(fileId.toString());
    // The ledger's digest becomes a path: only a real hex digest may.
    if (
      files === undefined ||
      stored?.status !== 'ok' ||
      stored.sha256 === null ||
      !/^[0-9a-f]{64}$/.test(stored.sha256)
    ) {
      sendReply(request, response, notFound);
      return;
    }
    const blob = await files.read(stored.sha256);
    if (blob === undefined) {
      repeatedEvents(this.options.logger).add(BLOB_NOT_IN_FILES_DIR, {
        id: fileId.toString(),
        fields: { fileId: fileId.toString(), sha256: stored.sha256 },
      });
      sendReply(request, response, notFound);
      return;
    }
    response.writeHead(200, {
      ...NO_STORE,
      'content-type': headerSafe(stored.contentType) ?? 'application/octet-stream',
      'content-length': String(blob.size),
      'content-disposition': attachmentHeader(basename(stored.file ?? `file-${fileId}`)),
    });
    if (request.method === 'HEAD') {
      discard(blob.body);
      response.end();
      return;
    }
    try {
      // pipeline, not pipe: when the importer hangs up mid-file, the blob's read ends with it.
      await pipeline(blob.body, response);
    } catch (error) {
      // The client went away: nothing to answer, nothing left open. A read error stays one.
      if (response.destroyed && !response.writableFinished && isPrematureClose(error)) return;
      throw error;
    }
  }
}

/** Lets go of a body not read (a file's stream, a bucket's response). */
function discard(body: AsyncIterable<Uint8Array>): void {
  const closable = body as Partial<Readable> & Partial<AsyncGenerator>;
  if (typeof closable.destroy === 'function') closable.destroy();
  else void closable.return?.(undefined);
}

function isPrematureClose(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ECONNRESET' || code === 'EPIPE';
}

/** A header value as it came when HTTP can carry it (visible ASCII and spaces only). */
function headerSafe(value: string | null): string | undefined {
  return value && /^[\x20-\x7e]+$/.test(value) ? value : undefined;
}

/** `attachment` with the name, non-ASCII names in RFC 5987 form (as Django's FileResponse). */
function attachmentHeader(name: string): string {
  if (/^[\x20-\x7e]+$/.test(name)) {
    return `attachment; filename="${name.replace(/["\\]/g, '\\$&')}"`;
  }
  return `attachment; filename*=utf-8''${encodeURIComponent(name)}`;
}

/** The cursor the server hands out after a page: the last row's position. */
function cursorAfter(resource: ServedResource, last: Record<string, unknown>): string {
  const id = last.id as number | bigint;
  if (resource.cursor === 'pk') return encodePkCursor(id);
  const micros = typeof last.updated_at === 'string' ? parseTimestamp(last.updated_at) : undefined;
  if (micros === undefined) {
    throw new UnservableValueError(
      `${resource.resource} row ${String(id)} has no updated_at to build the next cursor from`,
    );
  }
  return encodeUpdatedAtCursor(micros, id);
}

function listenError(listen: ListenAddress, error: NodeJS.ErrnoException): ConfigError {
  return new ConfigError([
    `serve --listen ${listenFailure(listen, error)}; pick another HOST:PORT`,
  ]);
}
