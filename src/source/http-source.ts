import pRetry from 'p-retry';
import { Agent, request, type Dispatcher } from 'undici';
import {
  AuthError,
  BodyNotJsonError,
  HttpStatusError,
  JsonTooDeepError,
  ProtocolError,
  ResponseTooLargeError,
  ServerUnavailableError,
} from '../errors.js';
import type {
  ExportSource,
  Manifest,
  ManifestEntry,
  Page,
  PageBodyOptions,
  PageHead,
} from '../interfaces.js';
import type { Logger } from '../log.js';
import { PRINTABLE_LENGTH, printable, quotedName } from '../printable.js';
import { repeatedEvents, type RepeatedKind } from '../repeated-events.js';
import { RequestDeadline } from './deadline.js';
import { MAX_JSON_DEPTH, parseJsonExact } from '../json.js';
import { dropBody } from './drop-body.js';
import { describeSeen, formatByteCount, readLimitedBytes } from './limited-body.js';
import { PageHeadReader } from './page-head.js';
import { bodyJson, decodePageBody } from './page-body.js';
import {
  RequestPacer,
  readRateLimitHeaders,
  systemClock,
  type Clock,
  type RateLimitReading,
} from './pacer.js';
import {
  TransientFailure,
  classifyNetworkError,
  isRetryableStatus,
  parseRetryAfterMs,
  retryDelayMs,
} from './retry.js';

/** Each retry at debug; one line per resource retried (repeated-events.ts). */
const REQUEST_RETRIED: RepeatedKind = {
  level: 'warn',
  message: 'Request failed; retrying',
  summary: (count, group) => `Request failed; retrying: ${count} retries of ${group ?? 'requests'}`,
};

export interface HttpSourceOptions {
  baseUrl: string;
  apiKey: string;
  authScheme: 'api-key' | 'bearer';
  /** Deadline of one request to the export API, headers and body together. */
  requestTimeoutMs: number;
  /** Deadline of one file content download (default one hour). */
  fileTimeoutMs?: number;
  /** Largest export API answer read (a page, the manifest, the schema); default 64 MiB. */
  maxPageBytes?: number;
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

/** The settings that raise the limits, as errors name them. */
export const PAGE_LIMIT_SETTING = 'http.max_page_mib (OCS_MAX_PAGE_MIB)';
export const FILE_TIMEOUT_SETTING =
  'files.request_timeout_seconds (OCS_FILES_REQUEST_TIMEOUT_SECONDS)';
export const REQUEST_TIMEOUT_SETTING = 'http.request_timeout_seconds';
export const DEFAULT_MAX_PAGE_BYTES = 64 * 1024 * 1024;
const DEFAULT_FILE_TIMEOUT_MS = 3600 * 1000;
/** Error answers are read up to this much: enough for any `detail`, never a flood. */
const ERROR_BODY_BYTES = 64 * 1024;

interface JsonResponse {
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

/** How one attempt reads a 2xx body. */
interface BodyReading<T> {
  auth: boolean;
  signal?: AbortSignal;
  /** Told the head of the body as soon as it has arrived (page-head.ts). */
  onHead?: (head: PageHead) => void;
  /** Turns the bytes into the answer; BodyNotJsonError is a fault worth another attempt. */
  decode(body: Uint8Array): T | Promise<T>;
}

export { parsePage } from './page-body.js';

/** The real export API client: one keep-alive pool, retries, pacing. */
export class HttpExportSource implements ExportSource {
  private readonly agent: Agent;
  private readonly pacer: RequestPacer;
  private readonly clock: Clock;
  private readonly baseUrl: string;
  /** Requests sent, retries included. */
  requestCount = 0;
  retryCount = 0;
  /** Whether unusable rate-limit headers were reported (once per source, so once per run). */
  private unusableRateLimitSaid = false;

  constructor(private readonly options: HttpSourceOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.clock = options.clock ?? systemClock;
    this.pacer = new RequestPacer(options.maxRequestsPerMinute, this.clock);
    this.agent = new Agent({
      connections: options.connections ?? 4,
      keepAliveTimeout: 30_000,
      // Idle timeouts (between bytes); each request also has its deadline (RequestDeadline).
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.requestTimeoutMs,
      connectTimeout: Math.min(options.requestTimeoutMs, 30_000),
    });
  }

  get pacingPausedMs(): number {
    return this.pacer.pausedMs;
  }

  async manifest(signal?: AbortSignal): Promise<Manifest> {
    const { body } = await this.getJson('manifest/', { auth: false, signal });
    return parseManifest(body);
  }

  async team(signal?: AbortSignal): Promise<Record<string, unknown>> {
    const { body } = await this.getJson('team/', { signal });
    if (!isPlainObject(body) || body.id === undefined) {
      throw new ProtocolError('GET team/ did not answer with a team object (no `id`).');
    }
    return body;
  }

  async openApi(signal?: AbortSignal): Promise<unknown> {
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
      response = await this.getJson('schema/?format=json', { document: true, signal });
    } catch (error) {
      if (error instanceof HttpStatusError) return unpublished(`HTTP ${error.status}`);
      if (error instanceof AuthError) return unpublished(`HTTP ${error.status}`);
      if (error instanceof ServerUnavailableError) return unpublished(error.message);
      // Too large or nested too deep: read like a schema that is not published.
      if (error instanceof ResponseTooLargeError || error instanceof ProtocolError) {
        return unpublished(error.message);
      }
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
    onHead?: (head: PageHead) => void,
  ): Promise<Page> {
    const { value, head } = await this.pageBody(resource, cursor, limit, {
      signal,
      selection,
      onHead,
      decode: (bytes) => decodePageBody(bytes, resource, limit).page,
    });
    return head === undefined ? value : { ...value, head };
  }

  /**
   * A page's body as bytes, handed to `decode` inside the attempt (it may run elsewhere: the
   * sync's page thread parses it), so a body that is not JSON is asked for again like any fault.
   */
  pageBody<T>(
    resource: string,
    cursor: string | null,
    limit: number,
    options: PageBodyOptions<T>,
  ): Promise<{ value: T; head?: PageHead }> {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor !== null) query.set('cursor', cursor);
    if (options.selection !== undefined) query.set('selection', options.selection);
    const path = `${resource}/?${query.toString()}`;
    return this.withRetries(
      path,
      () => this.attempt(path, { auth: true, ...options }),
      options.signal,
    );
  }

  async close(): Promise<void> {
    repeatedEvents(this.options.logger).flush();
    await this.agent.close();
  }

  /** GET one path under /api/export/ with retries; non-retryable statuses become typed errors. */
  private async getJson(
    path: string,
    { auth = true, signal, document = false }: GetOptions = {},
  ): Promise<JsonResponse> {
    const { value } = await this.withRetries(
      path,
      () => this.attempt(path, { auth, signal, decode: (bytes) => bodyJson(bytes, document) }),
      signal,
    );
    return value;
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
          const resource = stripQuery(path);
          repeatedEvents(this.options.logger).add(REQUEST_RETRIED, {
            // What went wrong, summed per resource (all file contents as one).
            id: error.message,
            group: path.startsWith('files/') ? 'file contents' : resource,
            message: `${REQUEST_RETRIED.message} (${resource})`,
            fields: {
              path: resource,
              attempt: attemptNumber,
              reason: error.message,
              retryInMs: delay,
            },
          });
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
   * `onAttempt`, under its own deadline (headers and body: `read` runs inside it); a failed
   * connection or a passed deadline becomes a TransientFailure when another attempt may fix it.
   */
  private async send<T>(
    url: string,
    path: string,
    requestHeaders: Record<string, string>,
    signal: AbortSignal | undefined,
    timeout: { ms: number; setting: string },
    read: (answer: {
      response: Dispatcher.ResponseData;
      headers: Record<string, string | string[] | undefined>;
      report: (status: number, outcome: RequestEvent['outcome']) => void;
    }) => Promise<T>,
  ): Promise<T> {
    const ticket = await this.pacer.beforeRequest(signal);
    const started = performance.now();
    this.requestCount += 1;
    let status = 0;
    let reported = false;
    const report = (answered: number, outcome: RequestEvent['outcome']) => {
      reported = true;
      this.options.onAttempt?.({
        path: stripQuery(path),
        status: answered,
        outcome,
        durationMs: performance.now() - started,
      });
    };
    const deadline = new RequestDeadline(timeout.ms, signal);
    try {
      const response = await request(url, {
        method: 'GET',
        dispatcher: this.agent,
        headers: requestHeaders,
        signal: deadline.signal,
      });
      status = response.statusCode;
      const headers = response.headers as Record<string, string | string[] | undefined>;
      this.pacer.observe(this.rateLimitReading(headers), ticket);
      try {
        return await read({ response, headers, report });
      } catch (error) {
        // Whatever `read` left unread (a limit passed, a consumer that failed before or while
        // reading) is let go of here, once, for every kind of request.
        dropBody(response.body);
        throw error;
      }
    } catch (error) {
      if (deadline.expired && !signal?.aborted) {
        if (!reported) report(status, 'retry');
        throw new TransientFailure(
          'timeout',
          `no complete answer within ${timeout.ms / 1000} s (${timeout.setting})`,
          undefined,
          status || undefined,
        );
      }
      if (reported || error instanceof TransientFailure || error instanceof ResponseTooLargeError) {
        throw error;
      }
      const transient = classifyNetworkError(error);
      report(status, transient ? 'retry' : 'error');
      throw transient ?? error;
    } finally {
      deadline.release();
      this.pacer.settled(ticket);
    }
  }

  private fileAttempt<T>(
    path: string,
    consume: (body: AsyncIterable<Uint8Array>, info: FileContentInfo) => Promise<T>,
    signal: AbortSignal | undefined,
  ): Promise<{ status: 'ok'; value: T } | { status: 'missing' }> {
    const timeout = {
      ms: this.options.fileTimeoutMs ?? DEFAULT_FILE_TIMEOUT_MS,
      setting: FILE_TIMEOUT_SETTING,
    };
    return this.send(
      `${this.baseUrl}/api/${path}`,
      path,
      { ...this.headers(true), accept: '*/*' },
      signal,
      timeout,
      async ({ response, headers, report }) => {
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
            if (error instanceof ResponseTooLargeError) {
              report(statusCode, 'error');
              throw error;
            }
            const transient =
              error instanceof TransientFailure ? error : classifyNetworkError(error);
            if (transient) report(statusCode, 'retry');
            throw transient ?? error;
          }
        }
        const { body, text } = await readErrorBody(response);
        if (statusCode === 404) {
          report(statusCode, 'ok');
          return { status: 'missing' };
        }
        report(statusCode, isRetryableStatus(statusCode) ? 'retry' : 'error');
        throw this.statusError(statusCode, headers, body, text, path);
      },
    );
  }

  private attempt<T>(
    path: string,
    { auth, signal, onHead, decode }: BodyReading<T>,
  ): Promise<{ value: T; head?: PageHead }> {
    const timeout = { ms: this.options.requestTimeoutMs, setting: REQUEST_TIMEOUT_SETTING };
    return this.send(
      `${this.baseUrl}/api/export/${path}`,
      path,
      this.headers(auth),
      signal,
      timeout,
      async ({ response, headers, report }) => {
        const { statusCode } = response;
        if (statusCode < 200 || statusCode >= 300) {
          const { body, text } = await readErrorBody(response);
          report(statusCode, isRetryableStatus(statusCode) ? 'retry' : 'error');
          throw this.statusError(statusCode, headers, body, text, path);
        }
        const limit = this.options.maxPageBytes ?? DEFAULT_MAX_PAGE_BYTES;
        let bytes: Uint8Array;
        let head: PageHead | undefined;
        try {
          const declared = Number(firstHeader(headers['content-length']));
          const headReader = onHead === undefined ? undefined : new PageHeadReader();
          bytes = await readLimitedBytes(
            response.body,
            limit,
            (seen) => pageTooLarge(path, limit, seen),
            Number.isSafeInteger(declared) ? declared : undefined,
            headReader &&
              ((chunk) => {
                const answer = headReader.push(chunk);
                if (answer === undefined) return true;
                if (answer !== 'not-a-head') {
                  head = answer;
                  onHead!(answer);
                }
                return false;
              }),
          );
        } catch (error) {
          if (error instanceof ResponseTooLargeError) report(statusCode, 'error');
          throw error;
        }

        let value: T;
        try {
          value = await decode(bytes);
        } catch (error) {
          if (error instanceof BodyNotJsonError) {
            // A 200 whose body is cut short or is an HTML page from a proxy: try again.
            report(statusCode, 'retry');
            throw new TransientFailure(
              'bad_body',
              `HTTP ${statusCode} with ${error.message}`,
              undefined,
              statusCode,
            );
          }
          if (error instanceof JsonTooDeepError) {
            // Complete, and beyond what any real page holds: asking again would bring the same.
            report(statusCode, 'error');
            throw new ProtocolError(
              `GET ${stripQuery(path)} answered JSON nested more than ${MAX_JSON_DEPTH} levels deep, which no real page does (the server's own encoder stops there); nothing of it was stored.`,
              { hint: 'A broken or hostile server sent it; the rest of the run goes on.' },
            );
          }
          // The answer came whole; what it holds is no page (or the work on it failed).
          report(statusCode, 'ok');
          throw error;
        }
        report(statusCode, 'ok');
        return { value, ...(head === undefined ? {} : { head }) };
      },
    );
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

  /** The answer's rate-limit reading; headers no budget can have are said once, then ignored. */
  private rateLimitReading(
    headers: Record<string, string | string[] | undefined>,
  ): RateLimitReading {
    const { reading, unusable } = readRateLimitHeaders(headers);
    if (unusable.length > 0 && !this.unusableRateLimitSaid) {
      this.unusableRateLimitSaid = true;
      const sent = unusable.map(({ name, value }) => `${name}: ${quotedName(value, 40)}`);
      this.options.logger.warn(
        { headers: sent },
        `The server's rate-limit headers cannot be used (${sent.join(', ')}): such answers are no reading, and pacing relies on http.max_requests_per_minute and the server's 429 answers (a proxy may be rewriting them; said once a run).`,
      );
    }
    return reading;
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

/**
 * The server's `detail`, a DRF list of messages, or an excerpt of anything else: control
 * characters escaped and cut short (printable), as everything the server says that we show.
 */
export function describeErrorBody(body: unknown, text: string): string {
  if (isPlainObject(body) && typeof body.detail === 'string') return printable(body.detail);
  if (Array.isArray(body) && body.every((item) => typeof item === 'string')) {
    return printable(body.join(' '));
  }
  if (body !== undefined) {
    // Ids past 2^53 arrive as bigint, which JSON.stringify refuses.
    const json = JSON.stringify(body, (_key, value: unknown) =>
      typeof value === 'bigint' ? value.toString() : value,
    );
    return printable(json, { max: 200 });
  }
  const plain = text
    .slice(0, PRINTABLE_LENGTH * 4)
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return plain === '' ? '(empty body)' : printable(plain, { max: 200 });
}

/** An error answer's body, read up to ERROR_BODY_BYTES (the rest is dropped with the connection). */
async function readErrorBody(
  response: Dispatcher.ResponseData,
): Promise<{ body: unknown; text: string }> {
  let text = '';
  try {
    const chunks: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= ERROR_BODY_BYTES) break;
    }
    text = Buffer.concat(chunks, size).subarray(0, ERROR_BODY_BYTES).toString('utf8');
  } catch {
    // A body cut short does not change what the status says.
  } finally {
    // The rest of a long error page is not wanted.
    dropBody(response.body);
  }
  let body: unknown;
  try {
    body = text === '' ? undefined : parseJsonExact(text);
  } catch {
    body = undefined;
  }
  return { body, text };
}

function pageTooLarge(
  path: string,
  limit: number,
  seen: { bytes: number; declared?: number },
): ResponseTooLargeError {
  return new ResponseTooLargeError(
    `GET ${stripQuery(path)} answered more than the ${formatByteCount(limit)} a page may hold (${PAGE_LIMIT_SETTING}): ${describeSeen(seen)}. Nothing of this page was stored; the pages before it are kept.`,
    {
      hint: `If the server's pages really are that large, raise ${PAGE_LIMIT_SETTING}; else the server is broken or hostile.`,
    },
  );
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
    // Names end up in summaries, `status`, errors and logs. One that printable() would change
    // (a line break, an escape sequence) can never be a table either (isSafeResourceName), so
    // from here on it is kept escaped: no server text reaches any output raw through a name.
    const resource = printableName(raw.resource);
    if (raw.cursor !== 'pk' && raw.cursor !== 'updated_at_id') {
      throw new ProtocolError(
        `Manifest entry ${quotedName(resource)} has an unknown cursor kind ${printable(String(JSON.stringify(raw.cursor)), { max: 80 })}.`,
      );
    }
    return {
      model: typeof raw.model === 'string' ? printableName(raw.model) : resource,
      resource,
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

/** A name from the manifest as it is when it is printable, else escaped (and cut). */
function printableName(name: string): string {
  return printable(name, { max: 200 });
}
