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

/** Stateful pacer shared by every request of one source. */
export class RequestPacer {
  private lastRequestAt: number | undefined;
  private reading: (RateLimitReading & { at: number }) | undefined;
  private queue: Promise<void> = Promise.resolve();
  /** Total time spent waiting, for metrics and tests. */
  pausedMs = 0;

  constructor(
    private readonly maxRequestsPerMinute: number,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Resolves when the next request may go; callers are served one at a time, in order. */
  beforeRequest(signal?: AbortSignal): Promise<void> {
    const turn = this.queue.then(async () => {
      const delay = pacingDelayMs({
        now: this.clock.now(),
        lastRequestAt: this.lastRequestAt,
        reading: this.reading,
        maxRequestsPerMinute: this.maxRequestsPerMinute,
      });
      if (delay > 0) {
        this.pausedMs += delay;
        await this.clock.sleep(delay, signal);
      }
      this.lastRequestAt = this.clock.now();
    });
    // A failed wait (abort) must not block the callers behind it.
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  /** Record the server's rate-limit headers from a response. */
  observe(reading: RateLimitReading): void {
    if (reading.remaining === undefined && reading.resetSeconds === undefined) return;
    this.reading = { ...reading, at: this.clock.now() };
  }
}

export function readRateLimitHeaders(
  headers: Record<string, string | string[] | undefined>,
): RateLimitReading {
  const number = (name: string): number | undefined => {
    const raw = headers[name];
    const value = Number(Array.isArray(raw) ? raw[0] : raw);
    return raw === undefined || !Number.isFinite(value) ? undefined : value;
  };
  const resetSeconds = number('x-ratelimit-reset');
  return {
    limit: number('x-ratelimit-limit'),
    remaining: number('x-ratelimit-remaining'),
    // A window longer than any real one is not waited out (MAX_SERVER_WAIT_MS).
    resetSeconds:
      resetSeconds === undefined ? undefined : Math.min(resetSeconds, MAX_SERVER_WAIT_MS / 1000),
  };
}
