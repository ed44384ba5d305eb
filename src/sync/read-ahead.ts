/**
 * Fetch ahead of the writer: while page N is being written, page N+1 (up to `depth` pages) is
 * already on its way. Fetches stay sequential (each needs the previous page's cursor) and pages
 * come out strictly in order, so writes — each committing with its cursor — stay in order too.
 */
import { linkedAbortController } from '../abort.js';

export interface ReadStep<T> {
  value: T;
  /** True on the last step: nothing is fetched after it. */
  last: boolean;
}

/**
 * `signal` (the run's) cancels the fetch in flight too: every fetch gets the walk's own signal,
 * linked to it once per walk, never a per-page combination (src/abort.ts).
 */
export async function* readAhead<T>(
  fetchNext: (signal: AbortSignal) => Promise<ReadStep<T>>,
  depth: number,
  signal?: AbortSignal,
): AsyncGenerator<T> {
  const buffered: Array<ReadStep<T>> = [];
  const controller = linkedAbortController(signal);
  // Set when the consumer stops; an abort of `signal` before that is a failure of the walk.
  let stopped = false;
  let failure: { error: unknown } | undefined;
  let producerDone = false;
  let wakeConsumer: (() => void) | undefined;
  let wakeProducer: (() => void) | undefined;

  const producer = (async () => {
    try {
      for (;;) {
        while (buffered.length >= depth && !stopped) {
          await new Promise<void>((resolve) => (wakeProducer = resolve));
        }
        if (stopped) return;
        const step = await fetchNext(controller.signal);
        if (stopped) return;
        buffered.push(step);
        wakeConsumer?.();
        if (step.last) return;
      }
    } catch (error) {
      if (!stopped) failure = { error };
    } finally {
      producerDone = true;
      wakeConsumer?.();
    }
  })();

  try {
    for (;;) {
      const step = buffered.shift();
      if (step) {
        wakeProducer?.();
        if (!step.last && !producerDone) await requestsOnTheWire();
        yield step.value;
        if (step.last) return;
        continue;
      }
      if (failure) throw failure.error;
      if (producerDone) return;
      await new Promise<void>((resolve) => (wakeConsumer = resolve));
    }
  } finally {
    // The consumer stopped (done, failed or interrupted): cancel the fetch in flight.
    stopped = true;
    controller.abort();
    wakeProducer?.();
    await producer;
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
