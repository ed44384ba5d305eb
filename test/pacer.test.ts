/**
 * Request pacing (src/source/pacer.ts): the max_requests_per_minute cap, slowing down before the
 * team's API budget runs out, and waiting for the window to reset. A fake clock stands in for
 * time: `sleep` moves it forward at once, so nothing here waits for real.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer } from '../src/fake-server/server.js';
import { silentLogger } from '../src/log.js';
import { runSync } from '../src/sync/engine.js';
import { openWarehouse } from '../src/warehouse/open.js';
import {
  RESET_MARGIN_MS,
  RequestPacer,
  pacingDelayMs,
  readRateLimitHeaders,
  type Clock,
  type RateLimitReading,
} from '../src/source/pacer.js';
import { createTestWarehouse, expectWarehouseEqualsSource, testSource } from './support.js';

class FakeClock implements Clock {
  readonly sleeps: number[] = [];
  constructor(public time = 1_000_000) {}
  now(): number {
    return this.time;
  }
  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw signal.reason;
    this.sleeps.push(ms);
    this.time += ms;
  }
}

/**
 * The server's fixed-window budget (as REFERENCE.md describes it): `limit` requests per window,
 * headers X-RateLimit-Limit / -Remaining / -Reset (whole seconds to the window's end), 429 when
 * the budget is spent.
 */
class FixedWindowBudget {
  private windowStart: number;
  private used = 0;
  readonly statuses: number[] = [];
  constructor(
    private readonly clock: FakeClock,
    readonly limit: number,
    readonly windowMs: number,
    /** How the server rounds Reset: up (the default) or down. */
    private readonly rounding: 'ceil' | 'floor' = 'ceil',
  ) {
    this.windowStart = clock.now();
  }

  request(): { status: number; headers: Record<string, string> } {
    const now = this.clock.now();
    while (now >= this.windowStart + this.windowMs) {
      this.windowStart += this.windowMs;
      this.used = 0;
    }
    const msLeft = this.windowStart + this.windowMs - now;
    const reset = String(Math[this.rounding](msLeft / 1000));
    if (this.used >= this.limit) {
      this.statuses.push(429);
      return {
        status: 429,
        headers: { 'retry-after': reset, 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset },
      };
    }
    this.used += 1;
    this.statuses.push(200);
    return {
      status: 200,
      headers: {
        'x-ratelimit-limit': String(this.limit),
        'x-ratelimit-remaining': String(this.limit - this.used),
        'x-ratelimit-reset': reset,
      },
    };
  }
}

describe('pacingDelayMs (pure)', () => {
  it('spaces requests by the max_requests_per_minute cap', () => {
    const base = { now: 10_000, reading: undefined, maxRequestsPerMinute: 120 };
    expect(pacingDelayMs({ ...base, lastRequestAt: undefined })).toBe(0);
    expect(pacingDelayMs({ ...base, lastRequestAt: 10_000 })).toBe(500);
    expect(pacingDelayMs({ ...base, lastRequestAt: 9_800 })).toBe(300);
    expect(pacingDelayMs({ ...base, lastRequestAt: 9_000 })).toBe(0);
    // 0 = no cap.
    expect(pacingDelayMs({ ...base, maxRequestsPerMinute: 0, lastRequestAt: 10_000 })).toBe(0);
  });

  it('does not pace while more than half of the budget is left', () => {
    const reading = { limit: 2000, remaining: 1500, resetSeconds: 200, at: 0 };
    expect(pacingDelayMs({ now: 0, lastRequestAt: 0, reading, maxRequestsPerMinute: 0 })).toBe(0);
  });

  it('slows down more and more as the remaining budget falls, before it reaches 0', () => {
    const delays: number[] = [];
    for (const remaining of [1999, 1200, 999, 800, 500, 200, 50, 10, 2, 1]) {
      const reading: RateLimitReading & { at: number } = {
        limit: 2000,
        remaining,
        resetSeconds: 240,
        at: 0,
      };
      delays.push(pacingDelayMs({ now: 0, lastRequestAt: 0, reading, maxRequestsPerMinute: 0 }));
    }
    expect(delays.slice(0, 2)).toEqual([0, 0]);
    const paced = delays.slice(2);
    expect(paced.every((delay) => delay > 0)).toBe(true);
    for (let index = 1; index < paced.length; index += 1) {
      expect(paced[index]!).toBeGreaterThan(paced[index - 1]!);
    }
    // The rest of the window (plus the reset margin) spread over the requests left.
    expect(paced[0]).toBeCloseTo((240_000 + RESET_MARGIN_MS) / 999, 5);
    expect(paced.at(-1)!).toBeGreaterThanOrEqual(240_000);
  });

  it('waits for the window to reset when nothing is left', () => {
    const reading = { limit: 100, remaining: 0, resetSeconds: 30, at: 5_000 };
    const delay = pacingDelayMs({
      now: 7_000,
      lastRequestAt: 6_000,
      reading,
      maxRequestsPerMinute: 0,
    });
    // The window ends 30 s after the reading; the wait reaches at least that far.
    expect(7_000 + delay).toBeGreaterThanOrEqual(35_000);
    expect(delay).toBeLessThanOrEqual(30_000);
    // Once the window is over, the stale reading no longer holds anything up.
    expect(
      pacingDelayMs({ now: 36_500, lastRequestAt: 6_000, reading, maxRequestsPerMinute: 0 }),
    ).toBe(0);
  });

  it('takes the later of the cap and the budget', () => {
    const reading = { limit: 100, remaining: 10, resetSeconds: 10, at: 0 };
    // Budget pacing: (10 s + margin) / 10 = 1.1 s; cap 30/min: 2 s.
    expect(pacingDelayMs({ now: 0, lastRequestAt: 0, reading, maxRequestsPerMinute: 30 })).toBe(
      2_000,
    );
    expect(pacingDelayMs({ now: 0, lastRequestAt: 0, reading, maxRequestsPerMinute: 600 })).toBe(
      (10_000 + RESET_MARGIN_MS) / 10,
    );
  });
});

describe('RequestPacer with a fake clock', () => {
  it('keeps every request at least 60 s / cap after the previous one', async () => {
    const clock = new FakeClock();
    const pacer = new RequestPacer(120, clock);
    const sentAt: number[] = [];
    for (let index = 0; index < 6; index += 1) {
      await pacer.beforeRequest();
      sentAt.push(clock.now());
    }
    const gaps = sentAt.slice(1).map((at, index) => at - sentAt[index]!);
    expect(gaps).toEqual([500, 500, 500, 500, 500]);
    expect(pacer.pausedMs).toBe(2_500);
  });

  it('serves concurrent callers one at a time, in order, each spaced by the cap', async () => {
    const clock = new FakeClock();
    const pacer = new RequestPacer(60, clock);
    const order: Array<{ caller: number; at: number }> = [];
    await Promise.all(
      [0, 1, 2, 3].map((caller) =>
        pacer.beforeRequest().then(() => order.push({ caller, at: clock.now() })),
      ),
    );
    expect(order.map((entry) => entry.caller)).toEqual([0, 1, 2, 3]);
    expect(order.map((entry) => entry.at - order[0]!.at)).toEqual([0, 1_000, 2_000, 3_000]);
  });

  it('an aborted wait rejects without blocking the callers behind it', async () => {
    const clock = new FakeClock();
    const pacer = new RequestPacer(60, clock);
    await pacer.beforeRequest();
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(pacer.beforeRequest(controller.signal)).rejects.toThrow('stop');
    await pacer.beforeRequest();
    expect(clock.sleeps).toEqual([1_000]);
  });

  it('after a reading of 0 remaining, waits for the window to reset, then goes on at once', async () => {
    const clock = new FakeClock(0);
    const pacer = new RequestPacer(0, clock);
    await pacer.beforeRequest();
    pacer.observe({ limit: 100, remaining: 0, resetSeconds: 42 });
    await pacer.beforeRequest();
    expect(clock.now()).toBeGreaterThanOrEqual(42_000);
    expect(clock.now()).toBeLessThanOrEqual(42_000 + RESET_MARGIN_MS);
    await pacer.beforeRequest();
    expect(clock.sleeps).toHaveLength(1);
  });

  it('with many requests in flight, a stale reading never lets more go than the budget', async () => {
    const clock = new FakeClock();
    const budget = new FixedWindowBudget(clock, 10, 10_000);
    const pacer = new RequestPacer(0, clock);
    // 8 callers at a time (concurrency × pages in flight); each answer lands after the next
    // requests went, as over a real network. Reset rounded up: a window never ends early.
    let answered = 0;
    const caller = async () => {
      for (let index = 0; index < 10; index += 1) {
        const ticket = await pacer.beforeRequest();
        const response = budget.request();
        await new Promise((resolve) => setImmediate(resolve));
        pacer.observe(readRateLimitHeaders(response.headers).reading, ticket);
        answered += 1;
      }
    };
    await Promise.all(Array.from({ length: 8 }, caller));
    expect(answered).toBe(80);
    expect(budget.statuses.filter((status) => status === 429)).toEqual([]);
    // 80 requests at 10 a window: at least 7 window ends passed.
    expect(clock.now() - 1_000_000).toBeGreaterThanOrEqual(70_000);
  });

  it.each(['ceil', 'floor'] as const)(
    'never spends more than the budget across several windows (Reset rounded with %s)',
    async (rounding) => {
      const clock = new FakeClock();
      const budget = new FixedWindowBudget(clock, 20, 10_000, rounding);
      const pacer = new RequestPacer(0, clock);
      const delays: Array<{ remainingBefore: number; delay: number }> = [];
      let remaining = budget.limit;
      for (let index = 0; index < 70; index += 1) {
        const before = clock.now();
        await pacer.beforeRequest();
        delays.push({ remainingBefore: remaining, delay: clock.now() - before });
        const response = budget.request();
        pacer.observe(readRateLimitHeaders(response.headers).reading);
        remaining = Number(response.headers['x-ratelimit-remaining']);
      }
      expect(budget.statuses.filter((status) => status === 429)).toEqual([]);
      // Three and a half windows' worth of requests took at least three windows.
      expect(clock.now() - 1_000_000).toBeGreaterThanOrEqual(30_000);
      // Within the first window: no waiting while more than half is left, then waits that
      // appear before the budget is gone.
      const firstWindow = delays.slice(0, 20);
      expect(
        firstWindow
          .filter((entry) => entry.remainingBefore > 10)
          .every((entry) => entry.delay === 0),
      ).toBe(true);
      expect(
        firstWindow
          .filter((entry) => entry.remainingBefore < 10 && entry.remainingBefore > 0)
          .every((entry) => entry.delay > 0),
      ).toBe(true);
    },
  );
});

describe('readRateLimitHeaders', () => {
  it('reads the three headers; a repeated header counts once; a missing one is absent', () => {
    expect(
      readRateLimitHeaders({
        'x-ratelimit-limit': '2000',
        'x-ratelimit-remaining': '17',
        'x-ratelimit-reset': '42',
      }),
    ).toEqual({ reading: { limit: 2000, remaining: 17, resetSeconds: 42 }, unusable: [] });
    expect(
      readRateLimitHeaders({ 'x-ratelimit-remaining': ['0', '6'], 'x-ratelimit-reset': '0' }),
    ).toEqual({
      reading: { limit: undefined, remaining: 0, resetSeconds: 0 },
      unusable: [],
    });
  });

  it.each([
    ['x-ratelimit-limit', ''],
    ['x-ratelimit-limit', '0'],
    ['x-ratelimit-limit', '-5'],
    ['x-ratelimit-limit', 'lots'],
    ['x-ratelimit-limit', '0.5'],
    ['x-ratelimit-limit', '0x10'],
    ['x-ratelimit-remaining', ' '],
    ['x-ratelimit-remaining', '-1'],
    ['x-ratelimit-remaining', 'NaN'],
    ['x-ratelimit-reset', ''],
    ['x-ratelimit-reset', '-3'],
    ['x-ratelimit-reset', 'Infinity'],
  ])('a %s of %j makes the answer no reading, and names it', (header, value) => {
    const valid = {
      'x-ratelimit-limit': '2000',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '30',
    };
    const { reading, unusable } = readRateLimitHeaders({ ...valid, [header]: value });
    expect(reading).toEqual({});
    const names: Record<string, string> = {
      'x-ratelimit-limit': 'X-RateLimit-Limit',
      'x-ratelimit-remaining': 'X-RateLimit-Remaining',
      'x-ratelimit-reset': 'X-RateLimit-Reset',
    };
    expect(unusable).toEqual([{ name: names[header], value }]);
  });
});

describe('RequestPacer never waits for an answer that cannot come', () => {
  it('past the window of any reading (a limit of 0 too), with nothing in flight, goes at once', async () => {
    const clock = new FakeClock();
    const pacer = new RequestPacer(0, clock);
    const first = await pacer.beforeRequest();
    // Given as is (readRateLimitHeaders would have refused it): nothing left, a limit of 0.
    pacer.observe({ limit: 0, remaining: 0, resetSeconds: 1 }, first);
    // Waits for the window to end; then nothing is in flight, so no answer is waited for.
    await pacer.beforeRequest();
    expect(clock.sleeps).toEqual([1_000 + RESET_MARGIN_MS]);
  });
});

describe('a sync against the fake server with a small API budget', () => {
  let cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    cleanups = [];
  });

  /**
   * The fake server's budget window and the HTTP source's pacer read the same fake clock, and the
   * pacer's sleeps move it, so windows pass without any real waiting. Every `concurrency` setting
   * (1..8): the walks share the one source and its pacer, so the team's budget is one for all.
   */
  it.each([[1, 1], [3, 1], ...[2, 3, 4, 5, 6, 7, 8].map((concurrency) => [2, concurrency])])(
    'never receives a 429 (%i pages in flight, concurrency %i)',
    async (pagesInFlight, concurrency) => {
      const clock = new FakeClock(Date.parse('2026-02-01T00:00:00Z'));
      const dataset = createSampleDataset({ rowsPerResource: 30, seed: 5 });
      const server = await startFakeServer({
        dataset,
        rateLimit: { limit: 8, windowSeconds: 10 },
        now: () => clock.now(),
      });
      cleanups.push(() => server.close());
      const stored = await createTestWarehouse('sqlite');
      cleanups.push(() => stored.dispose());
      const warehouse = await openWarehouse({ url: stored.env.OCS_WAREHOUSE_URL! });
      cleanups.push(() => warehouse.close());
      const source = testSource(server.url, { clock });
      cleanups.push(() => source.close());
      // Enough walks that every lane has one.
      const resources = [
        'users',
        'chats',
        'chat_messages',
        'tags',
        'sessions',
        'participants',
        'chatbots',
        'collections',
      ].slice(0, Math.max(3, concurrency));

      const started = clock.now();
      const report = await runSync({
        source,
        warehouse,
        logger: silentLogger(),
        pageSize: 4,
        resources,
        secrets: { keys: {}, policyFor: () => 'sealed' },
        onSchemaChange: 'evolve',
        history: false,
        deletes: 'mark',
        pagesInFlight,
        concurrency,
        lockWaitMs: 0,
      });

      expect(report.status).toBe('ok');
      const statuses = server.requests.map((request) => request.status);
      expect(statuses.filter((status) => status === 429)).toEqual([]);
      const throttled = server.requests.filter(
        (request) => request.endpoint !== 'manifest' && request.endpoint !== 'schema',
      );
      // More requests than one window allows: pacing had to spread them over several windows.
      expect(throttled.length).toBeGreaterThan(3 * 8);
      const windowsNeeded = Math.ceil(throttled.length / 8) - 1;
      expect(clock.now() - started).toBeGreaterThanOrEqual(windowsNeeded * 10_000);
      expect(source.pacingPausedMs).toBeGreaterThan(0);
      await expectWarehouseEqualsSource(stored, dataset, { resources });
    },
  );
});
