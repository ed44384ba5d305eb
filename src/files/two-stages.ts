/**
 * Files go through two stages: fetched from the server, then stored (a bucket's upload, a
 * folder's rename). Each stage takes at most `limit` files at once, so while some files go up
 * the next ones come down: a file's fetch no longer waits for the upload before it, nor its
 * upload for the fetch. The server never sees more than `limit` downloads at once, the store never
 * more than `limit` uploads, and at most 2 × `limit` files are in hand.
 */

/** What a file's work calls once its bytes are all in hand, before it stores them. */
export type Received = () => Promise<void>;

/**
 * Runs `work` over `items` as they come. The first error stops new work from starting, waits for
 * the work in flight, and is rethrown.
 */
export async function forEachInTwoStages<T>(
  items: AsyncGenerator<T>,
  limit: number,
  work: (item: T, received: Received) => Promise<void>,
): Promise<void> {
  const fetching = new Permits(limit);
  const storing = new Permits(limit);
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (failure === undefined) {
      let item: IteratorResult<T>;
      try {
        // Calls of next() wait their turn: each item goes to one worker.
        item = await items.next();
      } catch (error) {
        failure ??= { error };
        return;
      }
      if (item.done) return;
      await fetching.take();
      let held: Permits | undefined = fetching;
      // A file taken before the failure is not started after it.
      if (failure !== undefined) {
        fetching.give();
        return;
      }
      const received = async () => {
        if (held !== fetching) return;
        fetching.give();
        held = undefined;
        await storing.take();
        held = storing;
      };
      try {
        await work(item.value, received);
      } catch (error) {
        failure ??= { error };
      } finally {
        held?.give();
      }
    }
  };
  await Promise.all(Array.from({ length: 2 * limit }, worker));
  await items.return(undefined);
  if (failure !== undefined) throw failure.error;
}

/** At most `limit` holders at once; the others wait in line. */
class Permits {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(limit: number) {
    this.free = limit;
  }

  async take(): Promise<void> {
    if (this.free > 0) {
      this.free -= 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }
}
