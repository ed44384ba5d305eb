/**
 * Which failures are worth another attempt, and how long to wait before it. Pure: the HTTP source
 * classifies what happened into a TransientFailure and asks here for the delay.
 */

/** Something went wrong that another attempt may fix. */
export class TransientFailure extends Error {
  constructor(
    readonly kind: TransientKind,
    message: string,
    /** Server-requested wait (Retry-After / available_in), in milliseconds. */
    readonly retryAfterMs?: number,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'TransientFailure';
  }
}

export type TransientKind = 'connection' | 'timeout' | 'server_error' | 'rate_limited' | 'bad_body';

/** Network error codes (Node and undici) that mean "the connection failed, try again". */
const RETRYABLE_ERROR_CODES: Record<string, TransientKind> = {
  ECONNRESET: 'connection',
  ECONNREFUSED: 'connection',
  ECONNABORTED: 'connection',
  EPIPE: 'connection',
  ENOTFOUND: 'connection',
  EAI_AGAIN: 'connection',
  EHOSTUNREACH: 'connection',
  ENETUNREACH: 'connection',
  ETIMEDOUT: 'timeout',
  UND_ERR_SOCKET: 'connection',
  UND_ERR_CLOSED: 'connection',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: 'bad_body',
  UND_ERR_REQ_CONTENT_LENGTH_MISMATCH: 'connection',
};

/** Classify a thrown network error; undefined when it is not one we retry. */
export function classifyNetworkError(error: unknown): TransientFailure | undefined {
  let current: unknown = error;
  // undici wraps the socket error in `cause`; look a few levels down.
  for (let depth = 0; depth < 4 && current instanceof Error; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && Object.hasOwn(RETRYABLE_ERROR_CODES, code)) {
      return new TransientFailure(RETRYABLE_ERROR_CODES[code]!, `${code}: ${current.message}`);
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** HTTP statuses worth retrying: every 5xx, 429, and 408 (request timeout at a proxy). */
export function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 429 || status === 408;
}

/**
 * The longest wait a server may ask for (Retry-After, available_in, X-RateLimit-Reset): twice the
 * real server's 5-minute budget window. A longer one is a broken or hostile server holding the
 * run; waiting this long and asking again is enough.
 */
export const MAX_SERVER_WAIT_MS = 10 * 60 * 1000;

/**
 * Parse `Retry-After` (seconds or an HTTP date) or the body's `available_in` into milliseconds,
 * at most MAX_SERVER_WAIT_MS.
 */
export function parseRetryAfterMs(
  header: string | undefined,
  availableIn: unknown,
  now: number,
): number | undefined {
  const capped = (ms: number) => Math.min(ms, MAX_SERVER_WAIT_MS);
  if (header !== undefined && header.trim() !== '') {
    const seconds = Number(header);
    if (Number.isFinite(seconds) && seconds >= 0) return capped(seconds * 1000);
    const date = Date.parse(header);
    if (!Number.isNaN(date)) return capped(Math.max(0, date - now));
  }
  if (typeof availableIn === 'number' && Number.isFinite(availableIn) && availableIn >= 0) {
    return capped(availableIn * 1000);
  }
  return undefined;
}

export interface BackoffSettings {
  minDelayMs: number;
  maxDelayMs: number;
}

/**
 * Delay before retry number `attempt` (1 = the first retry): exponential with "equal jitter"
 * (half fixed, half random) so many clients do not retry in step. A server-requested wait wins
 * when longer, plus a little jitter so a fleet does not return at the same instant.
 */
export function retryDelayMs(
  attempt: number,
  settings: BackoffSettings,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(settings.maxDelayMs, settings.minDelayMs * 2 ** (attempt - 1));
  const backoff = exponential / 2 + (random() * exponential) / 2;
  if (retryAfterMs === undefined) return Math.round(backoff);
  return Math.round(Math.max(backoff, retryAfterMs + random() * Math.min(1000, retryAfterMs / 10)));
}
