/**
 * The files step's two stages (src/files/two-stages.ts): at most `limit` files fetched at once
 * and at most `limit` stored at once, a file's fetch not waiting for the uploads before it, and
 * the first error stopping what has not started.
 */
import { describe, expect, it } from 'vitest';
import { forEachInTwoStages } from '../src/files/two-stages.js';

async function* numbers(count: number): AsyncGenerator<number> {
  for (let index = 0; index < count; index += 1) yield index;
}

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('files in two stages', () => {
  it('fetches the next files while as many are stored, never more than the limit in either stage', async () => {
    const stores = new Map<number, ReturnType<typeof gate>>();
    const fetching = new Set<number>();
    const storing = new Set<number>();
    let mostFetching = 0;
    let mostStoring = 0;
    const run = forEachInTwoStages(numbers(6), 2, async (item, received) => {
      fetching.add(item);
      mostFetching = Math.max(mostFetching, fetching.size);
      await settle();
      fetching.delete(item);
      await received();
      storing.add(item);
      mostStoring = Math.max(mostStoring, storing.size);
      const store = gate();
      stores.set(item, store);
      await store.opened;
      storing.delete(item);
    });
    for (let round = 0; round < 10; round += 1) await settle();
    // Two stored (held open), and two more fetched while they are: waiting for a turn to store.
    expect([...storing].sort()).toEqual([0, 1]);
    expect(stores.size).toBe(2);
    expect(fetching.size).toBe(0);
    stores.get(0)!.open();
    for (let round = 0; round < 10; round += 1) await settle();
    expect([...storing].sort()).toEqual([1, 2]);
    for (const item of [1, 2, 3, 4, 5]) {
      while (!stores.has(item)) await settle();
      stores.get(item)!.open();
    }
    await run;
    expect(mostFetching).toBe(2);
    expect(mostStoring).toBe(2);
  });

  it('a file whose work fails before it was received gives its turn back; the error stops the rest and is rethrown', async () => {
    const started: number[] = [];
    const run = forEachInTwoStages(numbers(10), 1, async (item, received) => {
      started.push(item);
      if (item === 1) throw new Error('file 1 failed');
      await received();
      await settle();
    });
    await expect(run).rejects.toThrow('file 1 failed');
    // One fetching and one storing at a time: file 2 may have been taken, none after it started.
    expect(Math.max(...started)).toBeLessThanOrEqual(2);
  });

  it('receiving twice holds one turn to store', async () => {
    let storingAtOnce = 0;
    let most = 0;
    await forEachInTwoStages(numbers(4), 1, async (_item, received) => {
      await received();
      await received();
      storingAtOnce += 1;
      most = Math.max(most, storingAtOnce);
      await settle();
      storingAtOnce -= 1;
    });
    expect(most).toBe(1);
  });
});
