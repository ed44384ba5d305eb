/**
 * What the fake server can be told to do instead of (or on top of) answering as the real server
 * does: the faults a real deployment meets (5xx, a proxy's HTML page, 429, a 503 asking to come
 * back later, resets, cut bodies, latency, headers a proxy rewrote, a file replaced between its
 * row and its bytes). Nothing here applies unless a test, the demo or the soak asks for it: by
 * default the server answers exactly as REFERENCE.md says. Faults are queued (`failNext`, in
 * order, per endpoint or file) or drawn at a seeded random rate, and compose with every option.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { SeededRandom } from './random.js';

export type FakeFault =
  /**
   * An error status. 5xx bodies are JSON `{"detail"}`, or a proxy's HTML page with `html`.
   * `retryAfterSeconds` adds `Retry-After` (a 503 during maintenance asks to come back later).
   */
  | { kind: 'status'; status: number; html?: boolean; body?: unknown; retryAfterSeconds?: number }
  /** A 429 with `Retry-After` and the real body, whatever the budget says. */
  | { kind: 'rate_limit'; retryAfterSeconds: number }
  /** The socket is destroyed without an answer. */
  | { kind: 'drop' }
  /**
   * The real answer is computed, then only part of its body is sent: by default chunked and
   * ended cleanly (a 200 whose JSON does not parse); with `declareLength` the full
   * Content-Length is announced and the socket is destroyed mid-body.
   */
  | { kind: 'truncate'; declareLength?: boolean }
  /** The answer is delayed by `ms`, then served normally. */
  | { kind: 'latency'; ms: number }
  /**
   * The answer is served normally with these headers set, as a proxy in front of the server may
   * rewrite them: `{'x-ratelimit-limit': ''}` is the empty limit of REFERENCE.md's rate limits.
   */
  | { kind: 'proxy_headers'; headers: Record<string, string> }
  /**
   * File contents only (elsewhere the answer is normal): the file is replaced on the server just
   * before its bytes are sent, by one `extraBytes` (default 1024) longer. The server updates the
   * row's `content_size` and `updated_at`, but `files` pages by id, so a client that read the row
   * before holds a stale `content_size` until a full refresh (REFERENCE.md, File contents).
   */
  | { kind: 'replace_file'; extraBytes?: number };

export interface FaultMatch {
  /**
   * Endpoint name: a resource, or `manifest`, `team`, `schema`, or `file_content`
   * (`/api/files/{id}/content`). Absent: any request.
   */
  resource?: string;
  /** Only file content requests for this file id. */
  fileId?: string;
}

export interface FaultController {
  /** The next `count` requests matching `match` get `fault`; queued faults apply in order. */
  failNext(count: number, fault: FakeFault, match?: FaultMatch): void;
  /** Forget every queued fault. */
  clear(): void;
  /** How many queued faults are left. */
  pending(): number;
}

/** Faults at a seeded random rate (the demo, the soak). */
export interface RandomFaults {
  seed: number;
  rate: number;
  kinds: FakeFault[];
  /** Only requests to these endpoints (names as in FaultMatch); absent: any. */
  resources?: string[];
}

/** The faults queued and drawn for one server; `random` is read at each request (live options). */
export function createFaultQueue(random: () => RandomFaults | undefined): {
  controller: FaultController;
  /** The fault the next request to `endpoint` (and file `fileId`) gets, if any. */
  take(endpoint: string | undefined, fileId?: string): FakeFault | undefined;
} {
  const queue: Array<{ remaining: number; fault: FakeFault; match: FaultMatch }> = [];
  let drawn: { seed: number; source: SeededRandom } | undefined;
  return {
    controller: {
      failNext(count, fault, match = {}) {
        if (count > 0) queue.push({ remaining: Math.floor(count), fault, match });
      },
      clear() {
        queue.length = 0;
      },
      pending() {
        return queue.reduce((total, item) => total + item.remaining, 0);
      },
    },
    take(endpoint, fileId) {
      for (let index = 0; index < queue.length; index += 1) {
        const item = queue[index]!;
        if (item.match.resource !== undefined && item.match.resource !== endpoint) continue;
        if (item.match.fileId !== undefined && item.match.fileId !== fileId) continue;
        item.remaining -= 1;
        if (item.remaining <= 0) queue.splice(index, 1);
        return item.fault;
      }
      const rates = random();
      if (!rates || rates.kinds.length === 0) return undefined;
      if (rates.resources && (endpoint === undefined || !rates.resources.includes(endpoint))) {
        return undefined;
      }
      if (drawn?.seed !== rates.seed)
        drawn = { seed: rates.seed, source: new SeededRandom(rates.seed) };
      return drawn.source.chance(rates.rate) ? drawn.source.pick(rates.kinds) : undefined;
    },
  };
}

/** One answer, before it is sent. */
export interface Reply {
  status: number;
  headers: OutgoingHttpHeaders;
  body: string;
  /** The body as bytes already (a page kept in pageBodies); `body` is then unused. */
  bytes?: Buffer;
  /** Send the body's first `at` characters, await `tail`, then the rest (beforePageTail). */
  split?: { at: number; tail: () => Promise<void> };
}

export const JSON_TYPE = 'application/json';

export function jsonReply(
  status: number,
  value: unknown,
  headers: OutgoingHttpHeaders = {},
): Reply {
  return {
    status,
    headers: { 'content-type': JSON_TYPE, vary: 'Accept', ...headers },
    body: JSON.stringify(value),
  };
}

const reasonPhrases: Record<number, string> = {
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Temporarily Unavailable',
  504: 'Gateway Time-out',
};

function proxyErrorPage(status: number, headers: OutgoingHttpHeaders): Reply {
  const title = `${status} ${reasonPhrases[status] ?? 'Error'}`;
  return {
    status,
    headers: { 'content-type': 'text/html', ...headers },
    body: `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`,
  };
}

function defaultErrorBody(status: number): unknown {
  switch (status) {
    case 400:
      return ['Invalid pagination cursor.'];
    case 401:
      return { detail: 'Invalid token.' };
    case 403:
      return { detail: 'You do not have permission to perform this action.' };
    case 404:
      return { detail: 'Unknown resource.' };
    case 429:
      return { detail: 'Rate limit exceeded.', available_in: 1 };
    default:
      return { detail: status >= 500 ? 'A server error occurred.' : `HTTP ${status}` };
  }
}

/** The answer of a fault that replaces the server's own. */
export function faultReply(fault: Extract<FakeFault, { kind: 'status' | 'rate_limit' }>): Reply {
  const seconds =
    fault.retryAfterSeconds === undefined
      ? undefined
      : Math.max(0, Math.ceil(fault.retryAfterSeconds));
  const retryAfter: OutgoingHttpHeaders =
    seconds === undefined ? {} : { 'retry-after': String(seconds) };
  if (fault.kind === 'rate_limit') {
    return jsonReply(429, { detail: 'Rate limit exceeded.', available_in: seconds }, retryAfter);
  }
  if (fault.html) return proxyErrorPage(fault.status, retryAfter);
  const headers: OutgoingHttpHeaders =
    fault.status === 401 ? { 'www-authenticate': 'Api-Key', ...retryAfter } : retryAfter;
  return jsonReply(fault.status, fault.body ?? defaultErrorBody(fault.status), headers);
}

/** Headers a proxy set on top of the server's own (the `proxyHeaders` option, then the fault's). */
export function proxiedHeaders(
  headers: OutgoingHttpHeaders,
  ...rewrites: Array<Record<string, string> | undefined>
): OutgoingHttpHeaders {
  let result = headers;
  for (const rewrite of rewrites) {
    if (rewrite !== undefined) result = { ...result, ...lowerCaseKeys(rewrite) };
  }
  return result;
}

function lowerCaseKeys(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]),
  );
}
