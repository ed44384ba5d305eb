/**
 * A faithful double of the Open Chat Studio team-export API (REFERENCE.md), over real HTTP: auth,
 * paging, sealing, rate limiting and error bodies as the real server answers them, plus
 * deterministic fault knobs (faults.ts: 5xx, HTML proxy pages, 429, a 503 with Retry-After,
 * dropped connections, truncated bodies, latency, headers a proxy rewrote, a file replaced under
 * its row) for tests, `ocs-sync demo`, the benchmark and the soak.
 */
import { djangoNotFound } from '../export-api/pages.js';
import { createPublicKey, type KeyObject } from 'node:crypto';
import {
  createServer,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { stringify as stringifyYaml } from 'yaml';
import type { CursorKind, Row } from '../interfaces.js';
import { sealValue } from '../sealing/seal.js';
import {
  InvalidCursorError,
  decodeCursor,
  lastParam,
  parsePythonInt,
} from '../export-api/cursor.js';
import {
  manifestFromFixture,
  openApiFromFixture,
  schemaChecksum,
  type FakeManifestDocument,
  type FakeManifestEntry,
} from './openapi.js';
import { ChatbotScopeView, scopeClassOfModel } from './chatbot-scope.js';
import { SELECTION_CHANGED_DETAIL, selectionKey } from '../export-api/selection.js';
import {
  contentChunks,
  contentSize,
  guessContentType,
  sampleFileContent,
  type FakeFileContent,
} from './file-contents.js';
import {
  JSON_TYPE,
  createFaultQueue,
  faultReply,
  jsonReply,
  proxiedHeaders,
  type FakeFault,
  type Reply,
} from './faults.js';

export type { FakeFault, FaultController, FaultMatch, RandomFaults } from './faults.js';

import {
  DEFAULT_ADMIN_API_KEY,
  DEFAULT_MEMBER_API_KEY,
  FILE_CONTENT_ENDPOINT,
  type ChoiceController,
  type FakeServer,
  type FakeServerOptions,
  type PageServedInfo,
  type RequestLogEntry,
} from './options.js';

export {
  DEFAULT_ADMIN_API_KEY,
  DEFAULT_MEMBER_API_KEY,
  FILE_CONTENT_ENDPOINT,
  type ChoiceController,
  type FakeServer,
  type FakeServerOptions,
  type FileContentProgress,
  type PageServedInfo,
  type RequestLogEntry,
} from './options.js';
import { markFloats, serializeJson } from './python-json.js';

export { serializeJson } from './python-json.js';

interface ServedDocuments {
  openApi: unknown;
  manifest: FakeManifestDocument;
  entries: Map<string, FakeManifestEntry>;
  sealedFields: Map<string, string[]>;
  /** Fields whose numbers Python writes as floats (`3.0`, not `3`). */
  floatFields: Map<string, Set<string>>;
  yaml?: string;
  json?: string;
}

const notProvided = 'Authentication credentials were not provided.';
const invalidToken = 'Invalid token.';
const forbidden = 'You do not have permission to perform this action.';
const noPublicKey = 'Team has no registered public key; secret data cannot be sealed.';
const defaultLimit = 100;
const maxLimit = 1000;

/** Django's `FileResponse(as_attachment=True)` header, named after the row. */
function attachmentDisposition(row: Row): string {
  const name =
    typeof row.name === 'string' && row.name !== ''
      ? row.name
      : String(row.file ?? 'file')
          .split('/')
          .pop()!;
  if (/^[\x20-\x7e]*$/.test(name) && !/["\\]/.test(name)) return `attachment; filename="${name}"`;
  return `attachment; filename*=utf-8''${encodeURIComponent(name)}`;
}

function asManifest(value: unknown): FakeManifestDocument {
  if (
    value === null ||
    typeof value !== 'object' ||
    !Array.isArray((value as FakeManifestDocument).entries)
  ) {
    throw new Error('The manifest option must be an object with an `entries` list.');
  }
  return value as FakeManifestDocument;
}

export async function startFakeServer(options: FakeServerOptions): Promise<FakeServer> {
  const dataset = options.dataset;
  const requests: RequestLogEntry[] = [];
  const faultQueue = createFaultQueue(() => options.randomFaults);
  const timers = new Set<NodeJS.Timeout>();
  const pageCounters = new Map<string, number>();
  /** Files replaced by a `replace_file` fault: what the server now holds for them. */
  const replacedFiles = new Map<string, FakeFileContent>();
  let window: { start: number; count: number } | undefined;
  let documents: ServedDocuments | undefined;
  let documentSources: unknown[] = [];
  let sealing:
    { pem: string; key: KeyObject; cache: WeakMap<Row, Record<string, string>> } | undefined;
  let closed = false;

  const buildDocuments = (): ServedDocuments => {
    const fixture = options.fixture ?? dataset.fixture;
    let openApi = options.openApi;
    if (openApi === undefined) {
      if (!fixture) throw new Error('startFakeServer needs a fixture (or openApi and manifest).');
      openApi = openApiFromFixture(fixture, { chatbotChoice: options.chatbotChoice !== undefined });
    }
    let manifest: FakeManifestDocument;
    if (options.manifest !== undefined) {
      const given = asManifest(options.manifest);
      // Exactly the real manifest's keys, whatever else the given document carries.
      manifest = {
        schema_checksum:
          typeof given.schema_checksum === 'string'
            ? given.schema_checksum
            : schemaChecksum(openApi),
        entries: given.entries.map(({ model, resource, cursor, secret }) => ({
          model,
          resource,
          cursor,
          secret,
        })),
      };
    } else {
      if (!fixture) throw new Error('startFakeServer needs a fixture (or openApi and manifest).');
      manifest = manifestFromFixture(fixture, openApi);
    }
    if (options.chatbotChoice) {
      // Fixed per model, with or without a choice.
      manifest.entries = manifest.entries.map((entry) => ({
        ...entry,
        scope: scopeClassOfModel(entry.model),
      }));
    }
    if (options.manifestChecksum !== undefined) manifest.schema_checksum = options.manifestChecksum;
    if (options.transformManifest) manifest = options.transformManifest(manifest);
    const entries = new Map(manifest.entries.map((entry) => [entry.resource, entry]));
    const sealedFields = new Map<string, string[]>();
    const floatFields = new Map<string, Set<string>>();
    const fixtureByResource = new Map(
      (fixture ?? []).map((resource) => [resource.resource, resource]),
    );
    for (const entry of manifest.entries) {
      const fields = fixtureByResource.get(entry.resource)?.sealedFields ?? [];
      if (entry.secret || fields.length > 0) sealedFields.set(entry.resource, fields);
      const resource = fixtureByResource.get(entry.resource);
      if (resource) {
        const floats = Object.entries(resource.fields)
          .filter(([, spec]) => spec.kind === 'number' || spec.kind === 'float_array')
          .map(([name]) => name);
        if (floats.length > 0) floatFields.set(entry.resource, new Set(floats));
      }
    }
    return { openApi, manifest, entries, sealedFields, floatFields };
  };

  const currentDocuments = (): ServedDocuments => {
    // Rebuilt when the options that shape them are replaced on `server.options`.
    const sources = [
      options.fixture,
      dataset.fixture,
      options.openApi,
      options.manifest,
      options.manifestChecksum,
      options.transformManifest,
      options.chatbotChoice,
    ];
    if (!documents || sources.some((source, index) => source !== documentSources[index])) {
      documents = buildDocuments();
      documentSources = sources;
    }
    return documents;
  };

  const faults = faultQueue.controller;
  const takeFault = faultQueue.take;

  const delay = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });

  /** Checks the key; returns an error reply, or undefined when a team admin's key was given. */
  const authenticate = (request: IncomingMessage): Reply | undefined => {
    const keys = options.apiKeys ?? {
      admin: [DEFAULT_ADMIN_API_KEY],
      nonAdmin: [DEFAULT_MEMBER_API_KEY],
    };
    let key: string | undefined;
    const apiKeyHeader = request.headers['x-api-key'];
    if (typeof apiKeyHeader === 'string' && apiKeyHeader !== '') key = apiKeyHeader;
    const authorization = request.headers.authorization;
    if (key === undefined && typeof authorization === 'string') {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (match) key = match[1];
    }
    const unauthorized = (detail: string): Reply =>
      jsonReply(401, { detail }, { 'www-authenticate': 'Api-Key' });
    if (key === undefined) return unauthorized(notProvided);
    if (keys.admin.includes(key)) return undefined;
    if (keys.nonAdmin.includes(key)) return jsonReply(403, { detail: forbidden });
    return unauthorized(invalidToken);
  };

  /** Counts a request against the team's budget; returns a 429 or the headers to add. */
  const throttle = (): { reply?: Reply; headers: OutgoingHttpHeaders } => {
    const limit = options.rateLimit;
    if (!limit) return { headers: {} };
    const now = (options.now ?? Date.now)();
    const windowMs = limit.windowSeconds * 1000;
    if (!window || now >= window.start + windowMs) window = { start: now, count: 0 };
    const secondsLeft = Math.max(1, Math.ceil((window.start + windowMs - now) / 1000));
    if (window.count >= limit.limit) {
      return {
        reply: jsonReply(
          429,
          { detail: 'Rate limit exceeded.', available_in: secondsLeft },
          { 'retry-after': String(secondsLeft) },
        ),
        headers: {},
      };
    }
    window.count += 1;
    return {
      headers: {
        'x-ratelimit-limit': String(limit.limit),
        'x-ratelimit-remaining': String(limit.limit - window.count),
        'x-ratelimit-reset': String(secondsLeft),
      },
    };
  };

  const sealRow = (row: Row, fields: string[], pem: string): Record<string, unknown> => {
    if (!sealing || sealing.pem !== pem) {
      sealing = { pem, key: createPublicKey(pem), cache: new WeakMap() };
    }
    // One RSA wrap per value per row version: the real server seals afresh on every request,
    // which only costs time here.
    let sealed = options.sealAfresh ? undefined : sealing.cache.get(row);
    if (!sealed) {
      sealed = {};
      for (const field of fields) {
        if (field in row) sealed[field] = sealValue(row[field], sealing.key);
      }
      sealing.cache.set(row, sealed);
    }
    return { ...row, ...sealed };
  };

  const team = (): Record<string, unknown> => ({
    id: 1,
    feature_flags: ['flag_chatbots', 'flag_pipelines', 'flag_evaluations'],
    has_public_key: options.teamPublicKeyPem !== undefined,
    created_at: '2025-03-04T09:15:00Z',
    updated_at: '2026-01-01T00:00:00.250000Z',
    name: 'Fake Research Team',
    slug: 'fake-research-team',
    metadata: {},
    files_export_task_id: '',
    is_migrating: false,
    created_by: 1,
    files_export: null,
    ...(options.chatbotChoice
      ? { exportable_chatbots: scopeView().chatbots, require_mfa: false }
      : {}),
    ...options.team,
  });

  /** The rows the current choice serves (a fresh view: the dataset changes between requests). */
  const scopeView = (): ChatbotScopeView =>
    new ChatbotScopeView(dataset, options.chatbotChoice?.chosen ?? []);

  const resourcePage = async (
    resource: string,
    entry: FakeManifestEntry,
    params: URLSearchParams,
    served: ServedDocuments,
    extraHeaders: OutgoingHttpHeaders,
  ): Promise<Reply> => {
    const sealedFields = served.sealedFields.get(resource);
    const pem = options.teamPublicKeyPem;
    if (sealedFields && entry.secret && pem === undefined) {
      return jsonReply(400, { detail: noPublicKey }, extraHeaders);
    }
    const limitText = lastParam(params, 'limit');
    let limit = defaultLimit;
    if (limitText !== null && limitText !== '') {
      const parsed = parsePythonInt(limitText);
      if (parsed === undefined)
        return jsonReply(400, ['`limit` must be an integer.'], extraHeaders);
      if (parsed < 1) return jsonReply(400, ['`limit` must be a positive integer.'], extraHeaders);
      limit = Math.min(parsed, maxLimit);
    }
    const cursorText = lastParam(params, 'cursor');
    const cursor = cursorText === null || cursorText === '' ? null : cursorText;
    const cursorKind: CursorKind = entry.cursor;
    const pageHeaders: OutgoingHttpHeaders = {
      'content-type': JSON_TYPE,
      vary: 'Accept',
      allow: 'GET, HEAD, OPTIONS',
      ...extraHeaders,
    };
    const kept = options.pageBodies;
    const keptKey = `${resource}\n${cursor ?? ''}\n${limit}\n${lastParam(params, 'selection') ?? ''}`;
    const keptBody = kept?.get(keptKey);
    if (keptBody) {
      return {
        status: 200,
        headers: pageHeaders,
        body: '',
        bytes: keptBody,
      };
    }
    const view = options.chatbotChoice ? scopeView() : undefined;
    // No chatbot (left) in the choice: the whole team.
    const include =
      view && view.chatbots.length > 0 ? view.includes(resource, entry.model) : undefined;
    let page: { rows: Row[]; cursor: string | null; hasMore: boolean };
    try {
      if (dataset.hasResource(resource)) {
        page = dataset.pageAfter(resource, cursorKind, cursor, limit, include);
      } else {
        // In the manifest but without rows here: an empty table, cursor still checked.
        if (cursor !== null) decodeCursor(cursorKind, cursor);
        page = { rows: [], cursor: null, hasMore: false };
      }
    } catch (error) {
      if (error instanceof InvalidCursorError) {
        return jsonReply(400, ['Invalid pagination cursor.'], extraHeaders);
      }
      throw error;
    }
    const pageIndex = cursor === null ? 0 : (pageCounters.get(resource) ?? 0) + 1;
    pageCounters.set(resource, pageIndex);
    const info: PageServedInfo = {
      resource,
      pageIndex,
      rows: page.rows,
      cursor: page.cursor,
      hasMore: page.hasMore,
    };
    await options.onPageServed?.(info);
    const floats = served.floatFields.get(resource);
    const transform = options.transformRow;
    const results = page.rows.map((row) => {
      let output: Record<string, unknown> =
        sealedFields && sealedFields.length > 0 && pem !== undefined
          ? sealRow(row, sealedFields, pem)
          : row;
      if (floats) output = markFloats(output, floats);
      if (transform) output = transform(resource, output);
      return output;
    });
    const resultsJson = serializeJson(results);
    const keys = (cursorValue: string | null, hasMore: boolean) =>
      `"cursor":${JSON.stringify(cursorValue)},"has_more":${hasMore}`;
    const truth = keys(page.cursor, page.hasMore);
    const lie = options.pageHeadLie?.(info);
    let body: string;
    if (options.bareArrayPages) body = resultsJson;
    else if (options.pageKeyOrder === 'results-first') body = `{"results":${resultsJson},${truth}}`;
    else if (lie) {
      const head = keys(lie.cursor ?? page.cursor, lie.hasMore ?? page.hasMore);
      body = `{${head},"results":${resultsJson},${truth}}`;
    } else body = `{${truth},"results":${resultsJson}}`;
    kept?.set(keptKey, Buffer.from(body, 'utf8'));
    const holdTail = options.beforePageTail;
    const rowsStart = body.indexOf('"results":[');
    return {
      status: 200,
      headers: pageHeaders,
      body,
      ...(holdTail && !options.bareArrayPages
        ? { split: { at: rowsStart + '"results":['.length, tail: () => holdTail(info) } }
        : {}),
    };
  };

  const schemaReply = (params: URLSearchParams, served: ServedDocuments): Reply => {
    // A server that does not publish its schema has no such URL: Django's own 404 page.
    if (options.serveOpenApi === false) return djangoNotFound();
    if (lastParam(params, 'format') === 'json') {
      served.json ??= JSON.stringify(served.openApi);
      return {
        status: 200,
        headers: { 'content-type': 'application/vnd.oai.openapi+json' },
        body: served.json,
      };
    }
    served.yaml ??= stringifyYaml(served.openApi, { aliasDuplicateObjects: false });
    return {
      status: 200,
      headers: { 'content-type': 'application/vnd.oai.openapi; charset=utf-8' },
      body: served.yaml,
    };
  };

  const route = async (
    request: IncomingMessage,
    endpoint: string,
    params: URLSearchParams,
  ): Promise<Reply> => {
    const served = currentDocuments();
    if (endpoint === 'manifest') return jsonReply(200, served.manifest);
    if (endpoint === 'schema') return schemaReply(params, served);
    const refused = authenticate(request);
    if (refused) return refused;
    const throttled = throttle();
    if (throttled.reply) return throttled.reply;
    if (endpoint === 'team') return jsonReply(200, team(), throttled.headers);
    const entry = served.entries.get(endpoint);
    if (!entry) return jsonReply(404, { detail: 'Unknown resource.' }, throttled.headers);
    const selection = lastParam(params, 'selection');
    if (options.chatbotChoice && selection !== null && selection !== choiceKey()) {
      return jsonReply(409, { detail: SELECTION_CHANGED_DETAIL }, throttled.headers);
    }
    if (options.pageLatencyMs && options.pageLatencyMs > 0) await delay(options.pageLatencyMs);
    return resourcePage(endpoint, entry, params, served, throttled.headers);
  };

  /** The headers of an answer as the client gets them: a proxy's rewrites (option, fault) on top. */
  const proxied = (headers: OutgoingHttpHeaders, fault: FakeFault | undefined) =>
    proxiedHeaders(
      headers,
      options.proxyHeaders,
      fault?.kind === 'proxy_headers' ? fault.headers : undefined,
    );

  const send = (
    request: IncomingMessage,
    response: ServerResponse,
    served: Reply,
    fault?: FakeFault,
  ): void => {
    if (response.destroyed) return;
    const reply = { ...served, headers: proxied(served.headers, fault) };
    const truncate = fault?.kind === 'truncate' ? fault : undefined;
    const body = reply.bytes ?? Buffer.from(reply.body, 'utf8');
    if (truncate) {
      const part = body.subarray(0, Math.max(1, Math.floor(body.length / 2)));
      if (truncate.declareLength) {
        response.writeHead(reply.status, {
          ...reply.headers,
          'content-length': String(body.length),
        });
        response.write(part, () => response.destroy());
      } else {
        response.writeHead(reply.status, reply.headers);
        response.end(part);
      }
      return;
    }
    response.writeHead(reply.status, { ...reply.headers, 'content-length': String(body.length) });
    if (reply.split && request.method !== 'HEAD') {
      const at = Buffer.byteLength(reply.body.slice(0, reply.split.at), 'utf8');
      response.write(body.subarray(0, at));
      void reply.split.tail().then(() => {
        if (!response.destroyed) response.end(body.subarray(at));
      });
      return;
    }
    response.end(request.method === 'HEAD' ? undefined : body);
  };

  /** The bytes the server holds for a `files` row now; null: none (404). */
  const contentOf = (row: Row): FakeFileContent | null =>
    replacedFiles.get(String(row.id)) ?? (options.fileContent ?? sampleFileContent)(row);

  /**
   * Replaces a file's bytes by `extraBytes` more, as a person uploading a new version: the server
   * sets the row's `content_size` from the new file and its `updated_at` moves (File.save).
   */
  const replaceFile = (row: Row, extraBytes: number): Row => {
    const id = String(row.id);
    const before = contentOf(row);
    const size = (before === null ? 0 : contentSize(before)) + Math.max(1, Math.floor(extraBytes));
    replacedFiles.set(id, { size, seed: `replaced:${id}:${dataset.now()}` });
    return dataset.edit('files', [row.id], 'content_size' in row ? { content_size: size } : {})[0]!;
  };

  /** `GET /api/files/{id}/content`: the raw bytes, as the server's FileResponse sends them. */
  const serveFileContent = async (
    request: IncomingMessage,
    response: ServerResponse,
    fileId: string,
    log: RequestLogEntry,
  ): Promise<void> => {
    const fault = takeFault(FILE_CONTENT_ENDPOINT, fileId);
    if (fault) log.fault = fault.kind;
    if (fault?.kind === 'drop') {
      request.socket.destroy();
      return;
    }
    if (fault?.kind === 'latency') await delay(fault.ms);
    const reply = (answer: Reply) => {
      log.status = answer.status;
      // An error answer here is never cut short (`truncate` cuts the bytes below).
      send(request, response, answer, fault?.kind === 'truncate' ? undefined : fault);
    };
    if (fault?.kind === 'status' || fault?.kind === 'rate_limit') return reply(faultReply(fault));
    const method = request.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') {
      return reply(
        jsonReply(
          405,
          { detail: `Method "${method}" not allowed.` },
          { allow: 'GET, HEAD, OPTIONS' },
        ),
      );
    }
    const refused = authenticate(request);
    if (refused) return reply(refused);
    const throttled = throttle();
    if (throttled.reply) return reply(throttled.reply);
    let row = dataset.hasResource('files') ? dataset.get('files', fileId) : undefined;
    if (row && fault?.kind === 'replace_file') row = replaceFile(row, fault.extraBytes ?? 1024);
    const content = row ? contentOf(row) : null;
    if (!row || !content) return reply(jsonReply(404, { detail: 'Not found.' }, throttled.headers));

    const size = contentSize(content);
    log.status = 200;
    response.writeHead(
      200,
      proxied(
        {
          'content-type': guessContentType(row.name),
          'content-disposition': attachmentDisposition(row),
          'content-length': String(size),
          ...throttled.headers,
        },
        fault,
      ),
    );
    if (method === 'HEAD') {
      response.end();
      return;
    }
    // A truncated body is cut half-way and the connection dropped: the length was announced.
    const cutAt = fault?.kind === 'truncate' ? Math.floor(size / 2) : undefined;
    let sent = 0;
    for (const chunk of contentChunks(content)) {
      if (response.destroyed) return;
      const part = cutAt !== undefined ? chunk.subarray(0, Math.max(0, cutAt - sent)) : chunk;
      if (part.length > 0 && !response.write(part)) {
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
      sent += part.length;
      await options.onFileContent?.({ fileId, sentBytes: sent, size });
      if (cutAt !== undefined && sent >= cutAt) {
        response.destroy();
        return;
      }
    }
    if (cutAt !== undefined) {
      response.destroy();
      return;
    }
    response.end();
  };

  const choiceKey = (): string =>
    selectionKey(scopeView().chatbots.map((chatbot) => chatbot.public_id));
  const pendingChoices: Array<{ after: number; chosen: string[] }> = [];
  const choice: ChoiceController | undefined = options.chatbotChoice
    ? {
        current: () => [...(options.chatbotChoice?.chosen ?? [])],
        set: (chosen) => {
          options.chatbotChoice = { chosen: [...chosen] };
        },
        changeAfter: (requests, chosen) => {
          pendingChoices.push({ after: Math.max(0, Math.floor(requests)), chosen: [...chosen] });
        },
        key: choiceKey,
        exportable: () => scopeView().chatbots,
      }
    : undefined;
  /** Applies the changes due before this request is answered. */
  const applyDueChoices = () => {
    for (let index = 0; index < pendingChoices.length;) {
      const pending = pendingChoices[index]!;
      if (pending.after <= 0) {
        options.chatbotChoice = { chosen: pending.chosen };
        pendingChoices.splice(index, 1);
      } else {
        pending.after -= 1;
        index += 1;
      }
    }
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? '/', 'http://fake.invalid');
    if (choice) applyDueChoices();
    const method = request.method ?? 'GET';
    const log: RequestLogEntry = {
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      status: 0,
    };
    requests.push(log);
    const fileMatch = /^\/api\/files\/(\d+)\/content$/.exec(url.pathname);
    if (fileMatch) {
      log.endpoint = FILE_CONTENT_ENDPOINT;
      await serveFileContent(request, response, fileMatch[1] as string, log);
      return;
    }
    const match = /^\/api\/export\/([^/]+)(\/?)$/.exec(url.pathname);
    const endpoint = match ? decodeURIComponent(match[1] as string) : undefined;
    log.endpoint = endpoint;
    if (
      endpoint !== undefined &&
      endpoint !== 'manifest' &&
      endpoint !== 'team' &&
      endpoint !== 'schema'
    ) {
      try {
        if (currentDocuments().entries.has(endpoint)) log.resource = endpoint;
      } catch {
        // Reported by route() below.
      }
    }
    const fault = takeFault(endpoint);
    if (fault) log.fault = fault.kind;
    if (fault?.kind === 'drop') {
      request.socket.destroy();
      return;
    }
    if (fault?.kind === 'latency') await delay(fault.ms);
    let reply: Reply;
    if (fault?.kind === 'status' || fault?.kind === 'rate_limit') {
      reply = faultReply(fault);
    } else if (method !== 'GET' && method !== 'HEAD') {
      reply = jsonReply(
        405,
        { detail: `Method "${method}" not allowed.` },
        { allow: 'GET, HEAD, OPTIONS' },
      );
    } else if (!match || endpoint === undefined) {
      reply = djangoNotFound();
    } else if (match[2] !== '/') {
      // Django's APPEND_SLASH.
      reply = {
        status: 301,
        headers: {
          location: `${url.pathname}/${url.search}`,
          'content-type': 'text/html; charset=utf-8',
        },
        body: '',
      };
    } else {
      try {
        reply = await route(request, endpoint, url.searchParams);
      } catch (error) {
        reply = jsonReply(500, { detail: 'A server error occurred.' });
        process.emitWarning(
          `fake export server: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
    log.status = reply.status;
    send(request, response, reply, fault);
  };

  const server: Server = createServer({ keepAlive: true }, (request, response) => {
    // The body of a GET is ignored, but must be drained for keep-alive to work.
    request.resume();
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent && !response.destroyed) {
        response.writeHead(500, { 'content-type': JSON_TYPE });
        response.end(JSON.stringify({ detail: 'A server error occurred.' }));
      }
      process.emitWarning(
        `fake export server: ${error instanceof Error ? error.message : String(error)}`,
      );
    });
  });
  server.keepAliveTimeout = 60_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Fail at start, not at the first request, when the documents cannot be built.
  currentDocuments();
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  return {
    url: `http://${host}:${address.port}`,
    dataset,
    options,
    faults,
    requests,
    fileContent: contentOf,
    ...(choice ? { choice } : {}),
    manifest: () => currentDocuments().manifest,
    openApi: () => currentDocuments().openApi,
    setSchema(next) {
      if ('fixture' in next) {
        options.fixture = next.fixture;
        options.openApi = undefined;
        options.manifest = undefined;
      } else {
        options.openApi = next.openApi;
        options.manifest = next.manifest;
      }
      documents = undefined;
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
