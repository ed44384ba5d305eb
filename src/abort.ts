/**
 * Abort signals for work that is shorter than what can cancel it (a run under the daemon, a walk
 * under a run, a request under a walk). The short-lived part gets its own controller, linked to
 * the long-lived signal by one listener that `release()` removes when the part ends, so nothing
 * stays attached to the long-lived signal however many parts come and go.
 *
 * Never `AbortSignal.any([short, long])` (or `AbortSignal.timeout` combined with a long-lived
 * signal) per request: on Node 20 each call leaves a WeakRef in the long-lived signal's set of
 * dependants that nothing ever removes (nodejs/node#55351), about 55 bytes a page, forever.
 */

export interface LinkedAbortController {
  /** Aborts when the parent does (with its reason), or when `abort` is called. */
  readonly signal: AbortSignal;
  abort(reason?: unknown): void;
  /** Unhooks from the parent. Call it when the part ends, whatever way it ends; idempotent. */
  release(): void;
}

/** A controller of its own that follows `parent` until released. */
export function linkedAbortController(parent: AbortSignal | undefined): LinkedAbortController {
  const controller = new AbortController();
  if (!parent) {
    return { signal: controller.signal, abort: (reason) => controller.abort(reason), release() {} };
  }
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { signal: controller.signal, abort: () => undefined, release() {} };
  }
  const follow = () => controller.abort(parent.reason);
  parent.addEventListener('abort', follow, { once: true });
  const release = () => parent.removeEventListener('abort', follow);
  return {
    signal: controller.signal,
    abort: (reason) => {
      release();
      controller.abort(reason);
    },
    release,
  };
}
