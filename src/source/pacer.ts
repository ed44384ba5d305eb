/**
 * Request pacing. The team's API budget (default 2000 requests per 5 minutes, fixed window) is
 * shared with the team's other clients, so we slow down before the server has to say 429:
 * once less than half the window's budget is left, the remaining requests are spread evenly over
 * the rest of the window. `max_requests_per_minute` is a hard cap on top of that.
 */

import { MAX_SERVER_WAIT_MS } from './retry.js';

export interface RateLimitReading {
  limit?: number;
  remaining?: number;
  /** Seconds until the window resets. */
  resetSeconds?: number;
}

export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/** Below this share of the window's budget left, pacing spreads the rest over the window. */
const PACE_BELOW_SHARE = 0.5;

/**
 * X-RateLimit-Reset has whole-second resolution and a server may round it down, so the window
 * can end up to a second later than the header says; waiting for the reset adds this much so the
 * first request of the new window does not land in the old one (and earn a 429).
 */
export const RESET_MARGIN_MS = 1_000;

/** Pure: how long to wait before the next request, given what we know. */
export function pacingDelayMs(input: {
  now: number;
  lastRequestAt: number | undefined;
  reading: (RateLimitReading & { at: number }) | undefined;
  maxRequestsPerMinute: number;
}): number {
  const { now, lastRequestAt, reading, maxRequestsPerMinute } = input;
  let earliest = now;
  if (maxRequestsPerMinute > 0 && lastRequestAt !== undefined) {
    earliest = Math.max(earliest, lastRequestAt + 60_000 / maxRequestsPerMinute);
  }
  if (reading?.remaining !== undefined && reading.resetSeconds !== undefined) {
    const windowEndsAt = reading.at + reading.resetSeconds * 1000 + RESET_MARGIN_MS;
    const msLeftInWindow = Math.max(0, windowEndsAt - now);
    if (reading.remaining <= 0) {
      earliest = Math.max(earliest, windowEndsAt);
    } else if (
      reading.limit !== undefined &&
      reading.remaining < reading.limit * PACE_BELOW_SHARE &&
      lastRequestAt !== undefined
    ) {
      earliest = Math.max(earliest, lastRequestAt + msLeftInWindow / reading.remaining);
    }
  }
  return Math.max(0, earliest - now);
}

/** A request the pacer let go: its number, for `observe` and `settled`. */
export type RequestTicket = number;

/**
 * Stateful pacer shared by every request of one source: every walk of a run (`concurrency`)
 * and every page in flight spend the one team budget. A reading tells what the server had left
 * when it answered one request; requests let go since then, and requests still in flight from
 * before it, are taken off what it says (they may not have been counted yet), so that many
 * requests in flight never spend more than the budget on a stale reading. Once a reading's window
 * has ended, the new window is assumed to hold `limit` requests; when that many are in flight and
 * none has answered yet (so what is left, and when that window ends, is unknown), the next request
 * waits for an answer.
 */
export class RequestPacer {
  private lastRequestAt: number | undefined;
  private reading: (RateLimitReading & { at: number; ticket: RequestTicket }) | undefined;
  private queue: Promise<void> = Promise.resolve();
  /** Requests let go so far; the last one's ticket. */
  private sent = 0;
  /** Requests let go and not answered yet. */
  private readonly inFlight = new Set<RequestTicket>();
  /** Resolved (and replaced) at each answer: what a request waiting for one waits on. */
  private answered = nextAnswer();
  /** Total time spent waiting, for metrics and tests. */
  pausedMs = 0;

  constructor(
    private readonly maxRequestsPerMinute: number,
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Resolves when the next request may go, with its ticket; callers are served one at a time, in
   * order. Give the ticket to `observe` with the answer's headers and to `settled` when it ends.
   */
  beforeRequest(signal?: AbortSignal): Promise<RequestTicket> {
    const turn = this.queue.then(async () => {
      for (;;) {
        const now = this.clock.now();
        const reading = this.estimatedReading(now);
        if (reading === 'wait for an answer') {
          await abortable(this.answered.promise, signal);
          continue;
        }
        const delay = pacingDelayMs({
          now,
          lastRequestAt: this.lastRequestAt,
          reading,
          maxRequestsPerMinute: this.maxRequestsPerMinute,
        });
        if (delay <= 0) break;
        this.pausedMs += delay;
        await this.clock.sleep(delay, signal);
        // Answers may have come in meanwhile: look again (time has moved, so this ends).
      }
      this.lastRequestAt = this.clock.now();
      this.sent += 1;
      this.inFlight.add(this.sent);
      return this.sent;
    });
    // A failed wait (abort) must not block the callers behind it.
    this.queue = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }

  /**
   * Record the server's rate-limit headers from the answer to request `ticket` (default: the last
   * one let go). A reading older than the one kept (an earlier request answering late) is dropped.
   */
  observe(reading: RateLimitReading, ticket: RequestTicket = this.sent): void {
    this.settled(ticket);
    if (reading.remaining === undefined && reading.resetSeconds === undefined) return;
    if (this.reading !== undefined && ticket < this.reading.ticket) return;
    this.reading = { ...reading, at: this.clock.now(), ticket };
  }

  /** Request `ticket` ended (answered, failed or given up): it no longer counts as in flight. */
  settled(ticket: RequestTicket): void {
    if (!this.inFlight.delete(ticket)) return;
    this.answered.resolve();
    this.answered = nextAnswer();
  }

  /**
   * The last reading with what it cannot know taken off: the requests let go after it, and those
   * from before it still in flight. Past the reading's window: none (a new window), unless `limit`
   * requests are in flight.
   */
  private estimatedReading(
    now: number,
  ): (RateLimitReading & { at: number }) | undefined | 'wait for an answer' {
    const reading = this.reading;
    if (reading?.remaining === undefined || reading.resetSeconds === undefined) return reading;
    const windowEndsAt = reading.at + reading.resetSeconds * 1000 + RESET_MARGIN_MS;
    let uncounted = this.sent - reading.ticket;
    for (const ticket of this.inFlight) if (ticket < reading.ticket) uncounted += 1;
    if (now < windowEndsAt) return { ...reading, remaining: reading.remaining - uncounted };
    // A request answered in the new window brings a reading of its own: until one does, every
    // request in flight may count against it. With none in flight no answer is coming, so
    // there is nothing to wait for (whatever the limit said).
    if (
      reading.limit === undefined ||
      this.inFlight.size === 0 ||
      this.inFlight.size < reading.limit
    ) {
      return undefined;
    }
    return 'wait for an answer';
  }
}

function nextAnswer(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((settle) => (resolve = settle));
  return { promise, resolve };
}

/** `promise`, or the signal's reason once it is aborted. */
function abortable(promise: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, reject);
  });
}

/** A rate-limit header that was sent with a value no budget can have, as it was sent. */
export interface UnusableHeader {
  name: string;
  value: string;
}

/**
 * What each header may hold: a whole number of requests (a limit of at least one), and a
 * non-negative number of seconds. Anything else (empty, 0 for a limit, negative, `lots`, `0x10`)
 * is what a proxy in front of the server made of it (REFERENCE.md: treat it as absent).
 */
const RATE_LIMIT_HEADERS = [
  { name: 'X-RateLimit-Limit', pattern: /^\d+$/, least: 1 },
  { name: 'X-RateLimit-Remaining', pattern: /^\d+$/, least: 0 },
  { name: 'X-RateLimit-Reset', pattern: /^\d+(?:\.\d+)?$/, least: 0 },
] as const;

/**
 * The server's rate-limit headers. One that was sent but cannot be used makes the whole answer
 * no reading (a proxy that mangles one header says nothing trustworthy in the others); it is
 * named in `unusable`. A header not sent at all is simply absent.
 */
export function readRateLimitHeaders(headers: Record<string, string | string[] | undefined>): {
  reading: RateLimitReading;
  unusable: UnusableHeader[];
} {
  const values: Array<number | undefined> = [];
  const unusable: UnusableHeader[] = [];
  for (const { name, pattern, least } of RATE_LIMIT_HEADERS) {
    const raw = headers[name.toLowerCase()];
    const text = Array.isArray(raw) ? raw[0] : raw;
    if (text === undefined) {
      values.push(undefined);
      continue;
    }
    const value = pattern.test(text.trim()) ? Number(text) : Number.NaN;
    if (Number.isFinite(value) && value >= least) values.push(value);
    else unusable.push({ name, value: text });
  }
  if (unusable.length > 0) return { reading: {}, unusable };
  const [limit, remaining, resetSeconds] = values;
  return {
    reading: {
      limit,
      remaining,
      // A window longer than any real one is not waited out (MAX_SERVER_WAIT_MS).
      resetSeconds:
        resetSeconds === undefined ? undefined : Math.min(resetSeconds, MAX_SERVER_WAIT_MS / 1000),
    },
    unusable,
  };
}
