/**
 * The benchmark's data: one chat-message-like resource (the sample fixture's `chat_messages`,
 * about 490 bytes a row as JSON, `updated_at_id` cursor). The server process and the write-only
 * stage build it from the same seed, so both see the same rows.
 */
import type { Row } from '../src/interfaces.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import type { FakeFault } from '../src/fake-server/server.js';
import {
  datasetFromFixture,
  sampleFixture,
  type FixtureResource,
} from '../src/fake-server/fixture.js';

export const BENCH_RESOURCE = 'chat_messages';

/** The faults of a real deployment: a proxy's 502 page, 503s, resets, cut bodies, a 429. */
export const REAL_FAULTS: FakeFault[] = [
  { kind: 'status', status: 503 },
  { kind: 'status', status: 502, html: true },
  { kind: 'drop' },
  { kind: 'truncate' },
  { kind: 'rate_limit', retryAfterSeconds: 1 },
];
export const DEFAULT_BENCH_SEED = 42;

/** The manifest holds this one resource; `chat` is a plain integer because `chats` is not served. */
export function benchFixture(): FixtureResource[] {
  const messages = sampleFixture().find((entry) => entry.resource === BENCH_RESOURCE);
  if (!messages) throw new Error(`The sample fixture has no ${BENCH_RESOURCE} resource.`);
  return [{ ...messages, fields: { ...messages.fields, chat: { kind: 'integer' } } }];
}

/** The whole dataset in memory, as the fake server holds it. */
export function createBenchDataset(rows: number, seed = DEFAULT_BENCH_SEED): FakeDataset {
  return datasetFromFixture(benchFixture(), { seed, rowCounts: { [BENCH_RESOURCE]: rows } });
}

/**
 * The same rows as createBenchDataset, page by page, without keeping them: each page is inserted
 * into a dataset of the same seed (so ids, timestamps and values follow the same sequence), then
 * every row but the newest is dropped again (the newest keeps the id sequence going).
 */
export function* generateBenchPages(
  rows: number,
  pageSize: number,
  seed = DEFAULT_BENCH_SEED,
): Generator<Row[]> {
  const dataset = createBenchDataset(0, seed);
  // Ticks are counted per insert call: an even page size keeps the server's timestamp pairs.
  for (let done = 0; done < rows; done += pageSize) {
    const page = dataset.insert(BENCH_RESOURCE, Math.min(pageSize, rows - done));
    dataset.remove(BENCH_RESOURCE, dataset.ids(BENCH_RESOURCE).slice(0, -1));
    // Compacts the time order's dead entries so memory stays flat.
    dataset.pageAfter(BENCH_RESOURCE, 'updated_at_id', null, 1);
    yield page;
  }
}
