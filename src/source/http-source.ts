import pRetry from 'p-retry';
import { Agent, request, type Dispatcher } from 'undici';
import { AuthError, HttpStatusError, ProtocolError, ServerUnavailableError } from '../errors.js';
import type { ExportSource, Manifest, ManifestEntry, Page, Row } from '../interfaces.js';
import type { Logger } from '../log.js';
import { parseJsonExact } from './json.js';
import { RequestPacer, readRateLimitHeaders, systemClock, type Clock } from './pacer.js';
import {
  TransientFailure,
  classifyNetworkError,
  isRetryableStatus,
  parseRetryAfterMs,
  retryDelayMs,
} from './retry.js';

export interface HttpSourceOptions {
  baseUrl: string;
  apiKey: string;
  authScheme: 'api-key' | 'bearer';
  requestTimeoutMs: number;
  /** Attempts per request, the first included. */
  maxAttempts: number;
  minRetryDelayMs: number;
  maxRetryDelayMs: number;
  maxRequestsPerMinute: number;
  userAgent: string;
  logger: Logger;
  /** Connections kept open to the server (pages in flight need one each). */
  connections?: number;
  clock?: Clock;
  /** Called once per HTTP attempt (metrics). */
  onAttempt?: (event: RequestEvent) => void;
}

export interface RequestEvent {
  path: string;
  /** HTTP status, or 0 when no response arrived. */
  status: number;
  /** 'ok', or why the attempt will be retried / failed. */
  outcome: 'ok' | 'retry' | 'error';
  durationMs: number;
}

/** What a file content response says about its body. */
export interface FileContentInfo {
  /** Content-Length, when the server sent one. */
  contentLength: number | undefined;
  contentType: string | null;
}

interface JsonResponse {
  status: number;
  /** Parsed JSON; undefined for a `document` request whose body is not JSON. */
  body: unknown;
  text: string;
}

interface GetOptions {
  auth?: boolean;
  signal?: AbortSignal;
  /** A 200 whose body is not JSON is an answer (the schema may be YAML), not a fault to retry. */
  document?: boolean;
}

/** The real export API client: one keep-alive pool, retries, pacing. */
export class HttpExportSource implements ExportSource {
  private readonly agent: Agent;
  private readonly pacer: RequestPacer;
  private readonly clock: Clock;
  private readonly baseUrl: string;
  /** Requests sent, retries included. */
  requestCount = 0;
  retryCount = 0;

  constructor(private readonly options: HttpSourceOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.clock = options.clock ?? systemClock;
    this.pacer = new RequestPacer(options.maxRequestsPerMinute, this.clock);
    this.agent = new Agent({
      connections: options.connections ?? 4,
      keepAliveTimeout: 30_000,
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.requestTimeoutMs,
      connectTimeout: Math.min(options.requestTimeoutMs, 30_000),
    });
  }

  get pacingPausedMs(): number {
    return this.pacer.pausedMs;
  }

  async manifest(): Promise<Manifest> {
    const { body } = await this.getJson('manifest/', { auth: false });
    return parseManifest(body);
  }

  async team(): Promise<Record<string, unknown>> {
    const { body } = await this.getJson('team/');
    if (!isPlainObject(body) || body.id === undefined) {
      throw new ProtocolError('GET team/ did not answer with a team object (no `id`).');
    }
    return body;
  }

  async openApi(): Promise<unknown> {
    const unpublished = (reason: string): undefined => {
      // The schema endpoint is optional: types then come from the rows, sealed fields from the
      // shape of their values.
      this.options.logger.warn(
        { reason },
        'The server does not publish its export schema; column types come from the rows and sealed fields from their values.',
      );
      return undefined;
    };
    let response: JsonResponse;
    try {
      response = await this.getJson('schema/?format=json', { document: true });
    } catch (error) {
      if (error instanceof HttpStatusError) return unpublished(`HTTP ${error.status}`);
      if (error instanceof AuthError) return unpublished(`HTTP ${error.status}`);
      if (error instanceof ServerUnavailableError) return unpublished(error.message);
      throw error;
    }
    if (isPlainObject(response.body)) return response.body;
    // `format=json` ignored: drf-spectacular's default rendering is YAML.
    const { parse } = await import('yaml');
    try {
      const document: unknown = parse(response.text);
      if (isPlainObject(document) && isPlainObject(document.paths)) return document;
    } catch {
      // Neither JSON nor YAML.
    }
    return unpublished(`the answer is not an OpenAPI document (${response.text.length} bytes)`);
  }

  async page(
    resource: string,
    cursor: string | null,
    limit: number,
    signal?: AbortSignal,
    selection?: string,
  ): Promise<Page> {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor !== null) query.set('cursor', cursor);
    if (selection !== undefined) query.set('selection', selection);
    const { body } = await this.getJson(`${resource}/?${query.toString()}`, { signal });
    return parsePage(body, resource, limit);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  /** GET one path under /api/export/ with retries; non-retryable statuses become typed errors. */
  private getJson(
    path: string,
    { auth = true, signal, document = false }: GetOptions = {},
  ): Promise<JsonResponse> {
    return this.withRetries(path, () => this.attempt(path, auth, document, signal), signal);
  }

  /**
   * GET `/api/files/{id}/content` through the same pacer, retries and request count as pages.
   * `consume` receives each 200 body and must read it to the end; it is called again on a retry
   * (a reset mid-body, or a TransientFailure it throws, such as a size mismatch). A 404 (the row
   * has no blob) resolves to `missing`.
   */
  fileContent<T>(
    fileId: string,
    consume: (body: AsyncIterable<Uint8Array>, info: FileContentInfo) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<{ status: 'ok'; value: T } | { status: 'missing' }> {
    const path = `files/${encodeURIComponent(fileId)}/content`;
    return this.withRetries(path, () => this.fileAttempt(path, consume, signal), signal);
  }

  /** Runs `attempt` until it succeeds, fails for good, or attempts run out. */
  private async withRetries<T>(
    path: string,
    attempt: () => Promise<T>,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    const settings = {
      minDelayMs: this.options.minRetryDelayMs,
      maxDelayMs: this.options.maxRetryDelayMs,
    };
    let lastFailure: TransientFailure | undefined;
    try {
      return await pRetry(attempt, {
        retries: Math.max(0, this.options.maxAttempts - 1),
        minTimeout: 0,
        maxTimeout: 0,
        signal,
        shouldRetry: ({ error }) => error instanceof TransientFailure,
        onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
          if (!(error instanceof TransientFailure)) return;
          lastFailure = error;
          if (retriesLeft <= 0) return;
          this.retryCount += 1;
          const delay = retryDelayMs(attemptNumber, settings, error.retryAfterMs);
          this.options.logger.warn(
            {
              path: stripQuery(path),
              attempt: attemptNumber,
              reason: error.message,
              retryInMs: delay,
            },
            'Request failed; retrying',
          );
          await this.clock.sleep(delay, signal);
        },
      });
    } catch (error) {
      if (error instanceof TransientFailure) {
        throw new ServerUnavailableError(
          stripQuery(path),
          this.options.maxAttempts,
          (lastFailure ?? error).message,
        );
      }
      throw error;
    }
  }

  /**
   * One request through the team's budget, for pages and files alike: paced, counted, reported to
   * `onAttempt`; a failed connection becomes a TransientFailure when another attempt may fix it.
   * The caller reads the body.
   */
  private async send(
    url: string,
    path: string,
    requestHeaders: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<{
    response: Dispatcher.ResponseData;
    headers: Record<string, string | string[] | undefined>;
    report: (status: number, outcome: RequestEvent['outcome']) => void;
  }> {
    await this.pacer.beforeRequest(signal);
    const started = performance.now();
    this.requestCount += 1;
    const report = (status: number, outcome: RequestEvent['outcome']) =>
      this.options.onAttempt?.({
        path: stripQuery(path),
        status,
        outcome,
        durationMs: performance.now() - started,
      });
    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: 'GET',
        dispatcher: this.agent,
        headers: requestHeaders,
        signal,
      });
    } catch (error) {
      const transient = classifyNetworkError(error);
      report(0, transient ? 'retry' : 'error');
      throw transient ?? error;
    }
    const headers = response.headers as Record<string, string | string[] | undefined>;
    this.pacer.observe(readRateLimitHeaders(headers));
    return { response, headers, report };
  }

  private async fileAttempt<T>(
    path: string,
    consume: (body: AsyncIterable<Uint8Array>, info: FileContentInfo) => Promise<T>,
    signal: AbortSignal | undefined,
  ): Promise<{ status: 'ok'; value: T } | { status: 'missing' }> {
    const { response, headers, report } = await this.send(
      `${this.baseUrl}/api/${path}`,
      path,
      { ...this.headers(true), accept: '*/*' },
      signal,
    );
    const { statusCode } = response;
    if (statusCode === 200) {
      const declared = Number(firstHeader(headers['content-length']));
      const info: FileContentInfo = {
        contentLength: Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined,
        contentType: firstHeader(headers['content-type']) ?? null,
      };
      try {
        const value = await consume(response.body, info);
        report(statusCode, 'ok');
        return { status: 'ok', value };
      } catch (error) {
        response.body.destroy();
        const transient = error instanceof TransientFailure ? error : classifyNetworkError(error);
        report(statusCode, transient ? 'retry' : 'error');
        throw transient ?? error;
      }
    }
    // Error bodies are small; read them to keep the connection reusable and to quote them.
    let text = '';
    try {
      text = await response.body.text();
    } catch {
      // A body cut short does not change what the status says.
    }
    let body: unknown;
    try {
      body = text === '' ? undefined : parseJsonExact(text);
    } catch {
      body = undefined;
    }
    if (statusCode === 404) {
      report(statusCode, 'ok');
      return { status: 'missing' };
    }
    report(statusCode, isRetryableStatus(statusCode) ? 'retry' : 'error');
    throw this.statusError(statusCode, headers, body, text, path);
  }

  private async attempt(
    path: string,
    auth: boolean,
    document: boolean,
    signal?: AbortSignal,
  ): Promise<JsonResponse> {
    const { response, headers, report } = await this.send(
      `${this.baseUrl}/api/export/${path}`,
      path,
      this.headers(auth),
      signal,
    );
    let text: string;
    try {
      text = await response.body.text();
    } catch (error) {
      const transient = classifyNetworkError(error);
      report(0, transient ? 'retry' : 'error');
      throw transient ?? error;
    }
    const { statusCode } = response;

    let body: unknown;
    let bodyError: unknown;
    try {
      body = text === '' ? undefined : parseJsonExact(text);
    } catch (error) {
      bodyError = error;
    }

    if (statusCode >= 200 && statusCode < 300) {
      if (document) {
        report(statusCode, 'ok');
        return { status: statusCode, body: bodyError === undefined ? body : undefined, text };
      }
      if (bodyError !== undefined || body === undefined) {
        // A 200 whose body is cut short or is an HTML page from a proxy: try again.
        report(statusCode, 'retry');
        throw new TransientFailure(
          'bad_body',
          `HTTP ${statusCode} with a body that is not complete JSON (${text.length} bytes)`,
          undefined,
          statusCode,
        );
      }
      report(statusCode, 'ok');
      return { status: statusCode, body, text };
    }

    report(statusCode, isRetryableStatus(statusCode) ? 'retry' : 'error');
    throw this.statusError(statusCode, headers, body, text, path);
  }

  /** What an error answer becomes: retryable ones a TransientFailure, the rest typed errors. */
  private statusError(
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    body: unknown,
    text: string,
    path: string,
  ): Error {
    if (isRetryableStatus(statusCode)) {
      const retryAfter = parseRetryAfterMs(
        firstHeader(headers['retry-after']),
        isPlainObject(body) ? body.available_in : undefined,
        this.clock.now(),
      );
      return new TransientFailure(
        statusCode === 429 ? 'rate_limited' : 'server_error',
        `HTTP ${statusCode}${statusCode === 429 ? ' (rate limited)' : ''}`,
        retryAfter,
        statusCode,
      );
    }
    const detail = describeErrorBody(body, text);
    if (statusCode === 401 || statusCode === 403) return new AuthError(statusCode, detail);
    return new HttpStatusError(statusCode, stripQuery(path), detail);
  }

  private headers(auth: boolean): Record<string, string> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': this.options.userAgent,
    };
    if (auth) {
      if (this.options.authScheme === 'bearer') {
        headers.authorization = `Bearer ${this.options.apiKey}`;
      } else {
        headers['x-api-key'] = this.options.apiKey;
      }
    }
    return headers;
  }
}

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function stripQuery(path: string): string {
  const index = path.indexOf('?');
  return index === -1 ? path : path.slice(0, index);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The server's `detail`, a DRF list of messages, or a short safe excerpt of anything else. */
export function describeErrorBody(body: unknown, text: string): string {
  if (isPlainObject(body) && typeof body.detail === 'string') return body.detail;
  if (Array.isArray(body) && body.every((item) => typeof item === 'string')) return body.join(' ');
  if (body !== undefined) return JSON.stringify(body).slice(0, 200);
  const plain = text
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return plain === '' ? '(empty body)' : plain.slice(0, 200);
}

/** Validate and normalise a manifest body. Names are checked later, by the engine. */
export function parseManifest(body: unknown): Manifest {
  if (!isPlainObject(body) || !Array.isArray(body.entries)) {
    throw new ProtocolError('GET manifest/ did not answer with a manifest (no `entries` list).');
  }
  const entries: ManifestEntry[] = body.entries.map((raw, index) => {
    if (!isPlainObject(raw) || typeof raw.resource !== 'string') {
      throw new ProtocolError(`Manifest entry ${index} has no \`resource\` name.`);
    }
    const cursor = raw.cursor === 'updated_at_id' ? 'updated_at_id' : 'pk';
    if (raw.cursor !== 'pk' && raw.cursor !== 'updated_at_id') {
      throw new ProtocolError(
        `Manifest entry ${JSON.stringify(raw.resource)} has an unknown cursor kind ${JSON.stringify(raw.cursor)}.`,
      );
    }
    return {
      model: typeof raw.model === 'string' ? raw.model : raw.resource,
      resource: raw.resource,
      cursor,
      secret: raw.secret === true,
      // Kept as sent, whatever its value: chatbot-choice.ts decides what an unknown one means.
      ...(typeof raw.scope === 'string' ? { scope: raw.scope } : {}),
    };
  });
  return {
    schemaChecksum: typeof body.schema_checksum === 'string' ? body.schema_checksum : '',
    entries,
  };
}

/** Accept `{cursor, has_more, results}` or, as the interface document allows, a bare array. */
export function parsePage(body: unknown, resource: string, limit: number): Page {
  if (Array.isArray(body)) {
    return {
      rows: checkRows(body, resource),
      cursor: null,
      hasMore: body.length >= limit,
      bare: true,
    };
  }
  if (!isPlainObject(body) || !Array.isArray(body.results)) {
    throw new ProtocolError(`GET ${resource}/ did not answer with a page (no \`results\` list).`);
  }
  const cursor = typeof body.cursor === 'string' && body.cursor !== '' ? body.cursor : null;
  return {
    rows: checkRows(body.results, resource),
    cursor,
    hasMore: body.has_more === true,
    bare: false,
  };
}

function checkRows(rows: unknown[], resource: string): Row[] {
  for (const row of rows) {
    const id = isPlainObject(row) ? row.id : undefined;
    if (!(typeof id === 'bigint' || (typeof id === 'number' && Number.isInteger(id)))) {
      throw new ProtocolError(
        `A row of ${resource} has no integer \`id\`; the page was not stored.`,
      );
    }
  }
  return rows as Row[];
}
