/**
 * `serve` slows down an address that keeps presenting wrong keys: after a few failures, key checks
 * from that address take turns, each waiting longer than the last (doubling up to a cap), so
 * guessing costs time even with many connections at once. A request that would wait longer than
 * the cap is refused at once (429) without its key being checked. A right key clears the address.
 * Memory is bounded: at most `maxAddresses` are remembered (the least recently failing goes
 * first), and an address quiet for `forgetAfterMs` is forgotten.
 */

export interface FailedKeyOptions {
  /** Milliseconds since some epoch (default Date.now); injected by tests. */
  now?: () => number;
  /** Waits `ms` (default a timer); injected by tests. */
  sleep?: (ms: number) => Promise<void>;
  /** Failures an address may have before it is slowed down (default 3). */
  freeFailures?: number;
  /** The wait after the first failure past the free ones; doubles with each (default 1 s). */
  baseDelayMs?: number;
  /** The longest wait (default 30 s); a request that would wait longer is refused. */
  maxDelayMs?: number;
  maxAddresses?: number;
  forgetAfterMs?: number;
}

interface AddressState {
  failures: number;
  lastFailureAt: number;
  /** When the next key check from this address may run. */
  nextCheckAt: number;
}

export class FailedKeyThrottle {
  private readonly addresses = new Map<string, AddressState>();
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly freeFailures: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly maxAddresses: number;
  private readonly forgetAfterMs: number;

  constructor(options: FailedKeyOptions = {}) {
    this.now = options.now ?? Date.now;
    this.sleep =
      options.sleep ?? ((ms) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()));
    this.freeFailures = options.freeFailures ?? 3;
    this.baseDelayMs = options.baseDelayMs ?? 1000;
    this.maxDelayMs = options.maxDelayMs ?? 30_000;
    this.maxAddresses = options.maxAddresses ?? 10_000;
    this.forgetAfterMs = options.forgetAfterMs ?? 15 * 60_000;
  }

  /** Addresses remembered now (bounded by maxAddresses). */
  get size(): number {
    return this.addresses.size;
  }

  /**
   * Before a key from `address` is checked: waits for that address's turn. Resolves to false when
   * the wait would pass the cap: refuse the request without checking its key.
   */
  async beforeCheck(address: string): Promise<boolean> {
    const state = this.addresses.get(address);
    if (state === undefined) return true;
    const now = this.now();
    if (now - state.lastFailureAt > this.forgetAfterMs) {
      this.addresses.delete(address);
      return true;
    }
    const delay = this.delayAfter(state.failures);
    if (delay === 0) return true;
    const turn = Math.max(now, state.nextCheckAt);
    const wait = turn - now;
    if (wait > this.maxDelayMs) return false;
    state.nextCheckAt = turn + delay;
    if (wait > 0) await this.sleep(wait);
    return true;
  }

  /** Records a wrong key; true when this failure is the one that starts slowing the address. */
  failed(address: string): boolean {
    const now = this.now();
    const state = this.addresses.get(address) ?? {
      failures: 0,
      lastFailureAt: now,
      nextCheckAt: 0,
    };
    state.failures += 1;
    state.lastFailureAt = now;
    const delay = this.delayAfter(state.failures);
    state.nextCheckAt = Math.max(state.nextCheckAt, now + delay);
    // Most recently failing last: the first entry is the one to drop when full.
    this.addresses.delete(address);
    this.addresses.set(address, state);
    while (this.addresses.size > this.maxAddresses) {
      this.addresses.delete(this.addresses.keys().next().value!);
    }
    return state.failures === this.freeFailures + 1;
  }

  succeeded(address: string): void {
    this.addresses.delete(address);
  }

  /** Seconds a refused address should wait before it tries again (for Retry-After). */
  retryAfterSeconds(address: string): number {
    const state = this.addresses.get(address);
    if (state === undefined) return 1;
    return Math.max(1, Math.ceil((state.nextCheckAt - this.now()) / 1000));
  }

  private delayAfter(failures: number): number {
    if (failures <= this.freeFailures) return 0;
    return Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (failures - this.freeFailures - 1));
  }
}
