/**
 * Fetch ahead of the writer: while page N is being written, the pages after it (up to `depth`
 * pages, received or on their way) are already being fetched. Each request needs the cursor of
 * the page before; the real server writes that cursor first in its body (src/source/page-head.ts),
 * so the request for page N+1 leaves as soon as page N's first bytes are in (the early cursor),
 * and the latency of N+1 hides the transfer and parse of N. A body that does not start that way
 * falls back to the request after the full parse.
 *
 * The full parse has the last word: pages are settled strictly in order, and a page is only taken
 * from a request sent with exactly the cursor its settled predecessor gives; any other request
 * on the way (sent from a head the full parse then contradicted, or behind a page that failed) is
 * cancelled and its answer never used. So pages come out in order, each from the right cursor,
 * and writes — each committing with its cursor — stay in order too.
 */
import { linkedAbortController, type LinkedAbortController } from '../abort.js';

export interface WalkStep<T> {
  value: T;
  /** The cursor of the next page; undefined on the last page: nothing is fetched after it. */
  next: string | undefined;
}

export interface PageWalk<R, T> {
  /** The first request's cursor (null: from the beginning). */
  start: string | null;
  /**
   * One page's request (may run beside others). `announce`: the cursor of the page after it, as
   * soon as the answer's first bytes say so (undefined: they say there is none); may be called
   * again (a retried request) with another answer, which replaces the first.
   */
  fetch(
    cursor: string | null,
    signal: AbortSignal,
    announce: (next: string | undefined) => void,
  ): Promise<R>;
  /** Runs on each fetched page in walk order; throws to stop the walk (nothing after it is used). */
  settle(cursor: string | null, fetched: R): WalkStep<T>;
  /** Told of a fetched page that will never be settled (its request was given up). */
  discard?(fetched: R): void;
  /**
   * Whether a cursor a head announced is worth a request before its page settles (false: the
   * walk followed it already, so that page will stop the walk). Default: always.
   */
  worthAsking?(cursor: string): boolean;
}

interface Request<R> {
  cursor: string | null;
  controller: LinkedAbortController;
  /** The next cursor this request's answer announced (undefined: none, or not yet). */
  announced: string | undefined;
  outcome?: { fetched: R } | { error: unknown };
  done: Promise<void>;
}

/**
 * `signal` (the run's) cancels the requests in flight too: each request has a controller linked
 * to the walk's, released when it ends, never a per-page combination (src/abort.ts).
 */
export async function* readAhead<R, T>(
  walk: PageWalk<R, T>,
  depth: number,
  signal?: AbortSignal,
): AsyncGenerator<T> {
  const walkController = linkedAbortController(signal);
  const buffered: Array<{ value: T; last: boolean }> = [];
  /** Requests on their way, in walk order: each one's cursor is the one before's (announced) next. */
  const chain: Array<Request<R>> = [];
  const live = new Set<Promise<void>>();
  /** The cursor of the page after the last settled one (undefined: the walk has no more). */
  let settledNext: string | null | undefined = walk.start;
  let stopped = false;
  let failure: { error: unknown } | undefined;
  let wakeConsumer: (() => void) | undefined;
  const wake = () => {
    const resolve = wakeConsumer;
    wakeConsumer = undefined;
    resolve?.();
  };

  const hasRoom = () => buffered.length + chain.length < depth;
  const cancelFrom = (index: number) => {
    for (const request of chain.splice(index)) {
      request.controller.abort();
      if (request.outcome && 'fetched' in request.outcome) walk.discard?.(request.outcome.fetched);
    }
  };
  const fail = (error: unknown) => {
    failure = { error };
    settledNext = undefined;
    cancelFrom(0);
    wake();
  };

  const launch = (cursor: string | null) => {
    const controller = linkedAbortController(walkController.signal);
    const request: Request<R> = {
      cursor,
      controller,
      announced: undefined,
      done: Promise.resolve(),
    };
    chain.push(request);
    request.done = walk
      .fetch(cursor, controller.signal, (next) => announced(request, next))
      .then(
        (fetched) => {
          // Given up while it was on its way: nothing will settle it.
          if (!chain.includes(request)) walk.discard?.(fetched);
          else request.outcome = { fetched };
        },
        (error: unknown) => {
          request.outcome = { error };
        },
      )
      .finally(() => {
        controller.release();
        live.delete(request.done);
        settleInOrder();
      });
    live.add(request.done);
  };

  /** An answer's head named the next cursor: send that request now, if there is room. */
  const announced = (request: Request<R>, next: string | undefined) => {
    const index = chain.indexOf(request);
    if (stopped || index === -1) return;
    request.announced = next;
    const follower = chain[index + 1];
    if (follower && follower.cursor === next) return;
    // A retried answer said otherwise: what was sent from the first is of no use.
    cancelFrom(index + 1);
    fill();
  };

  /** Sends what can be sent: the settled next page, then what the heads announced. */
  const fill = () => {
    while (!stopped && failure === undefined && hasRoom()) {
      const tail = chain[chain.length - 1];
      if (tail === undefined) {
        if (settledNext === undefined) return;
        launch(settledNext);
      } else if (tail.announced !== undefined && (walk.worthAsking?.(tail.announced) ?? true)) {
        launch(tail.announced);
      } else {
        return;
      }
    }
  };

  /** Settles the answers at the front of the chain, in order; starts what follows. */
  const settleInOrder = () => {
    for (;;) {
      const first = chain[0];
      if (stopped || failure !== undefined || first?.outcome === undefined) break;
      chain.shift();
      if ('error' in first.outcome) return fail(first.outcome.error);
      let step: WalkStep<T>;
      try {
        step = walk.settle(first.cursor, first.outcome.fetched);
      } catch (error) {
        return fail(error);
      }
      buffered.push({ value: step.value, last: step.next === undefined });
      settledNext = step.next;
      // Only a request sent with exactly the settled cursor may give the next page.
      if (chain[0] !== undefined && chain[0].cursor !== step.next) cancelFrom(0);
      wake();
    }
    fill();
  };

  try {
    fill();
    for (;;) {
      const step = buffered.shift();
      if (step) {
        fill();
        if (!step.last && chain.length > 0) await requestsOnTheWire();
        yield step.value;
        if (step.last) return;
        continue;
      }
      if (failure) throw failure.error;
      if (chain.length === 0 && settledNext === undefined) return;
      await new Promise<void>((resolve) => (wakeConsumer = resolve));
    }
  } finally {
    // The consumer stopped (done, failed or interrupted): cancel the requests in flight.
    stopped = true;
    cancelFrom(0);
    // An abort makes an exception, stack and all: a walk that ended with nothing on its way
    // (most of them, and every one of an unchanged run) has no one to tell.
    if (live.size > 0) walkController.abort();
    else walkController.release();
    await Promise.all(live);
  }
}

/**
 * Lets the fetch the producer has just started send its request before the consumer's work
 * begins. undici writes a request on a reused keep-alive socket from a setImmediate, so a
 * synchronous page write started in the same microtask run would hold the request back until it
 * ends: the server would idle through every write and the walk would cost fetch + write per page
 * instead of the larger of the two. Two turns: the second lands after any immediate queued now.
 */
async function requestsOnTheWire(): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
  await new Promise<void>((resolve) => setImmediate(resolve));
}
