/**
 * `serve` bounds the wrong keys it answers, for the whole process: at most `perSecond` a second
 * are answered 401, each waiting its turn; one whose turn is more than `maxDelayMs` away is
 * answered 429 at once. A key is checked before any of this, so the right key is never slowed or
 * refused by wrong ones, whoever sent them: behind the TLS proxy or SSH tunnel the docs recommend,
 * every client has the proxy's address, so a count per address would let anyone's wrong keys lock
 * out the importer. Nothing here is the right key's to reset: it never waits, whatever came before.
 * What makes guessing hopeless is the key's length (serve refuses one under 32 characters); this
 * keeps a flood of wrong keys to a few answers a second. Memory is constant.
 */

export interface FailedKeyOptions {
  /** Milliseconds since some epoch (default Date.now); injected by tests. */
  now?: () => number;
  /** Waits `ms` (default a timer); injected by tests. */
  sleep?: (ms: number) => Promise<void>;
  /** Wrong keys answered 401 a second, for the whole process (default 10). */
  perSecond?: number;
  /** The longest a wrong key waits for its turn (default 5 s); one that would wait longer gets 429. */
  maxDelayMs?: number;
}

export class FailedKeyThrottle {
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly intervalMs: number;
  private readonly maxDelayMs: number;
  /** When the next wrong key may be answered. */
  private nextTurnAt = 0;

  constructor(options: FailedKeyOptions = {}) {
    this.now = options.now ?? Date.now;
    this.sleep =
      options.sleep ?? ((ms) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()));
    this.intervalMs = 1000 / (options.perSecond ?? 10);
    this.maxDelayMs = options.maxDelayMs ?? 5_000;
  }

  /**
   * After a wrong key: waits for its turn among the process's wrong keys. Resolves to false when
   * the turn is further away than `maxDelayMs`: answer 429 at once.
   */
  async failed(): Promise<boolean> {
    const now = this.now();
    const turn = Math.max(now, this.nextTurnAt);
    const wait = turn - now;
    if (wait > this.maxDelayMs) return false;
    this.nextTurnAt = turn + this.intervalMs;
    if (wait > 0) await this.sleep(wait);
    return true;
  }

  /** Seconds a refused client should wait before it tries again (for Retry-After). */
  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((this.nextTurnAt - this.maxDelayMs - this.now()) / 1000));
  }
}
