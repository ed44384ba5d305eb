/**
 * A deadline for one request, headers and body together: a slow server that trickles one byte
 * at a time never trips an idle timeout, but it does trip this. Each request gets its own
 * AbortController and timer, both released in `finally` by the caller; the caller's longer-lived
 * signal (the run's, the walk's) is followed through a listener that is removed again, never
 * through AbortSignal.any, which on Node 20 keeps every combined signal alive as long as the
 * long-lived one (nodejs/node#55351).
 */
export class RequestDeadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly onOuterAbort: (() => void) | undefined;
  /** True once the deadline, not the caller, aborted the request. */
  expired = false;

  constructor(
    readonly timeoutMs: number,
    private readonly outer: AbortSignal | undefined,
  ) {
    this.timer = setTimeout(() => {
      this.expired = true;
      this.controller.abort(new Error(`no complete answer within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    if (outer?.aborted) {
      this.controller.abort(outer.reason);
    } else if (outer) {
      this.onOuterAbort = () => this.controller.abort(outer.reason);
      outer.addEventListener('abort', this.onOuterAbort, { once: true });
    }
  }

  /** Aborts when the deadline passes or the caller's signal aborts. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  release(): void {
    clearTimeout(this.timer);
    if (this.onOuterAbort) this.outer?.removeEventListener('abort', this.onOuterAbort);
  }
}
