/**
 * In-memory rows of the fake export server, with keyset paging exactly as REFERENCE.md describes.
 *
 * Each resource keeps its live rows sorted by id (the `pk` order) and, when rows carry
 * `updated_at`, every row version sorted by `(updated_at, id)` (the `updated_at_id` order). An
 * edit gets a strictly later time from the dataset's logical clock, so its new version is appended
 * to the time order and the old version is left there as a dead entry, skipped by paging and
 * compacted away in bulk. Both orders use binary search for the cursor position, so a resource of
 * a million rows pages in microseconds.
 */
import type { CursorKind, Row } from '../interfaces.js';
import {
  compareIds,
  addToId,
  decodeCursor,
  encodePkCursor,
  encodeUpdatedAtCursor,
  formatTimestamp,
  normalizeId,
  parseTimestamp,
  type RowId,
} from '../export-api/cursor.js';
import type { FixtureResource } from './fixture-schema.js';
import { SeededRandom, deriveSeed } from './random.js';

export interface RowGeneratorContext {
  id: RowId;
  /** How many rows this resource had generated before this one. */
  index: number;
  /** The logical time of the insert; use it for `created_at`. */
  nowMicros: number;
  /** The dataset, to pick ids of rows this one references. */
  dataset: FakeDataset;
}

export interface DatasetResource {
  resource: string;
  cursor: CursorKind;
  /** Rows carry `updated_at`, set by the clock on insert and edit. Always true for `updated_at_id`. */
  tracksUpdatedAt?: boolean;
  /**
   * Fills a row's fields (`updated_at` is overwritten by the clock). A result that already holds
   * the row's `id` (put it first: key order is the server's) is kept as the row itself.
   */
  generateRow?: (context: RowGeneratorContext) => Record<string, unknown>;
  /** The changes an `edit` without explicit changes makes. */
  editRow?: (row: Row, context: RowGeneratorContext) => Record<string, unknown>;
  /** The first id `insert(count)` hands out when the resource is empty (default 1). */
  firstId?: RowId;
}

export interface DatasetOptions {
  seed?: number;
  /** Start of the logical clock (default 2026-01-01T00:00:00Z). */
  startTime?: string;
  /** Rows of one `insert(count)` that share one timestamp (default 1): real bulk inserts tie. */
  rowsPerTick?: number;
}

export interface DatasetPage {
  rows: Row[];
  /** As the server sends it: null on the last page. */
  cursor: string | null;
  hasMore: boolean;
}

export type RowChanges = Record<string, unknown> | ((row: Row) => Record<string, unknown>);

interface Entry {
  row: Row;
  id: RowId;
  /** `updated_at` in microseconds; NaN when the resource does not track it. */
  micros: number;
  live: boolean;
}

class ResourceTable {
  readonly byId: Entry[] = [];
  readonly byTime: Entry[] | undefined;
  deadInTime = 0;
  timeOrderBroken = false;
  generated = 0;
  readonly random: SeededRandom;

  constructor(
    readonly definition: DatasetResource,
    seed: number,
  ) {
    this.byTime = this.tracksUpdatedAt ? [] : undefined;
    this.random = new SeededRandom(deriveSeed(seed, `ids:${definition.resource}`));
  }

  get tracksUpdatedAt(): boolean {
    return this.definition.cursor === 'updated_at_id' || this.definition.tracksUpdatedAt === true;
  }

  /** Index of the live entry with this id, or -1. */
  indexOf(id: RowId): number {
    let low = 0;
    let high = this.byId.length - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const order = compareIds((this.byId[middle] as Entry).id, id);
      if (order === 0) return middle;
      if (order < 0) low = middle + 1;
      else high = middle - 1;
    }
    return -1;
  }

  /** First position in the id order whose id is greater than `id`. */
  firstIdAfter(id: RowId): number {
    let low = 0;
    let high = this.byId.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((this.byId[middle] as Entry).id <= id) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** First position in the time order whose `(updated_at, id)` is greater than the given pair. */
  firstTimeAfter(micros: number, id: RowId): number {
    const order = this.timeOrder();
    let low = 0;
    let high = order.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      const entry = order[middle] as Entry;
      if (entry.micros < micros || (entry.micros === micros && entry.id <= id)) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** The time order, re-sorted or compacted first when inserts or edits left it so. */
  timeOrder(): Entry[] {
    const order = this.byTime;
    if (!order) {
      throw new Error(`Resource ${this.definition.resource} has no updated_at to page by.`);
    }
    if (this.timeOrderBroken || this.deadInTime > Math.max(1024, order.length / 4)) {
      let kept = 0;
      for (const entry of order) if (entry.live) order[kept++] = entry;
      order.length = kept;
      this.deadInTime = 0;
      if (this.timeOrderBroken) {
        order.sort((left, right) => left.micros - right.micros || compareIds(left.id, right.id));
        this.timeOrderBroken = false;
      }
    }
    return order;
  }

  lastId(): RowId | undefined {
    return this.byId[this.byId.length - 1]?.id;
  }
}

const defaultStartTime = '2026-01-01T00:00:00Z';

export class FakeDataset {
  /** The fixture the rows follow, when the dataset was built from one. */
  fixture: FixtureResource[] | undefined;
  readonly seed: number;
  private readonly tables = new Map<string, ResourceTable>();
  private clockMicros: number;
  private ticks = 0;
  private readonly rowsPerTick: number;

  constructor(options: DatasetOptions = {}) {
    this.seed = options.seed ?? 1;
    const start = parseTimestamp(options.startTime ?? defaultStartTime);
    if (start === undefined) throw new Error(`Invalid startTime ${options.startTime}`);
    this.clockMicros = start;
    this.rowsPerTick = Math.max(1, options.rowsPerTick ?? 1);
  }

  defineResource(definition: DatasetResource): void {
    if (this.tables.has(definition.resource)) {
      throw new Error(`Resource ${definition.resource} is already defined.`);
    }
    this.tables.set(definition.resource, new ResourceTable(definition, this.seed));
  }

  hasResource(resource: string): boolean {
    return this.tables.has(resource);
  }

  resources(): string[] {
    return [...this.tables.keys()];
  }

  cursorKind(resource: string): CursorKind {
    return this.table(resource).definition.cursor;
  }

  /** The newest logical time handed out, in microseconds. */
  now(): number {
    return this.clockMicros;
  }

  /**
   * A strictly later logical time. Steps are uneven and every fourth lands on a whole second, so
   * rows show both timestamp forms (`...:05Z` and `...:05.137251Z`).
   */
  tick(): number {
    this.ticks += 1;
    this.clockMicros += 137_251;
    if (this.ticks % 4 === 0) this.clockMicros = Math.ceil(this.clockMicros / 1e6) * 1e6;
    return this.clockMicros;
  }

  /** Moves the clock forward (a quiet period between syncs). */
  advanceClock(micros: number): void {
    if (micros > 0) this.clockMicros += Math.floor(micros);
  }

  count(resource: string): number {
    return this.tables.get(resource)?.byId.length ?? 0;
  }

  /** Live rows in id order. */
  rows(resource: string): Row[] {
    return this.table(resource).byId.map((entry) => entry.row);
  }

  /** Live ids in id order. */
  ids(resource: string): RowId[] {
    return this.table(resource).byId.map((entry) => entry.id);
  }

  get(resource: string, id: RowId | string): Row | undefined {
    const table = this.table(resource);
    const normalized = normalizeId(id);
    if (normalized === undefined) return undefined;
    const index = table.indexOf(normalized);
    return index < 0 ? undefined : (table.byId[index] as Entry).row;
  }

  /** A random live id of the resource (for references), or undefined when it is empty. */
  randomId(resource: string, random: SeededRandom): RowId | undefined {
    const table = this.tables.get(resource);
    if (!table || table.byId.length === 0) return undefined;
    return (table.byId[Math.floor(random.next() * table.byId.length)] as Entry).id;
  }

  /**
   * Adds `count` generated rows, or the given rows (missing fields generated when the resource has
   * a generator; missing `id` and `updated_at` assigned). Returns the stored rows.
   */
  insert(
    resource: string,
    countOrRows: number | Array<Record<string, unknown>>,
    options: { rowsPerTick?: number } = {},
  ): Row[] {
    const table = this.table(resource);
    const given = typeof countOrRows === 'number' ? undefined : countOrRows;
    const count = typeof countOrRows === 'number' ? countOrRows : countOrRows.length;
    const rowsPerTick = Math.max(1, options.rowsPerTick ?? this.rowsPerTick);
    const inserted: Entry[] = [];
    const seen = new Set<RowId>();
    let highest = table.lastId();
    let now = this.clockMicros;
    for (let index = 0; index < count; index += 1) {
      const values = given?.[index];
      if (index % rowsPerTick === 0) now = this.tick();
      let id: RowId;
      if (values && values.id !== undefined) {
        const explicit = normalizeId(values.id);
        if (explicit === undefined) {
          throw new Error(`insert into ${resource}: id ${String(values.id)} is not an integer`);
        }
        if (seen.has(explicit) || table.indexOf(explicit) >= 0) {
          throw new Error(`insert into ${resource}: id ${String(explicit)} already exists`);
        }
        seen.add(explicit);
        id = explicit;
      } else {
        // Real ids have gaps (rolled-back inserts, deletions).
        const gap = table.random.chance(0.1) ? table.random.int(2, 5) : 1;
        id = highest === undefined ? (table.definition.firstId ?? 1) : addToId(highest, gap);
        if (given) seen.add(id);
      }
      if (highest === undefined || id > highest) highest = id;
      const generated = table.definition.generateRow?.({
        id,
        index: table.generated,
        nowMicros: now,
        dataset: this,
      });
      table.generated += 1;
      const row = (
        generated && !values && generated.id === id ? generated : { id, ...generated, ...values }
      ) as Row;
      row.id = id;
      let micros = Number.NaN;
      if (table.tracksUpdatedAt) {
        if (values && typeof values.updated_at === 'string') {
          const explicit = parseTimestamp(values.updated_at);
          if (explicit === undefined) {
            throw new Error(`insert into ${resource}: updated_at ${values.updated_at} is invalid`);
          }
          micros = explicit;
          if (explicit > this.clockMicros) this.clockMicros = explicit;
        } else {
          micros = now;
          row.updated_at = formatTimestamp(now);
        }
      }
      inserted.push({ row, id, micros, live: true });
    }
    this.addEntries(table, inserted);
    return inserted.map((entry) => entry.row);
  }

  /**
   * Changes rows and gives each a strictly later `updated_at` (when the resource tracks it).
   * Without `changes` the resource's own edit (regenerated fields) is applied. Returns new versions.
   */
  edit(resource: string, ids: Array<RowId | string>, changes?: RowChanges): Row[] {
    const table = this.table(resource);
    const edited: Row[] = [];
    for (const rawId of ids) {
      const id = normalizeId(rawId);
      const index = id === undefined ? -1 : table.indexOf(id);
      if (id === undefined || index < 0) {
        throw new Error(`edit ${resource}: no row with id ${String(rawId)}`);
      }
      const old = table.byId[index] as Entry;
      const delta =
        typeof changes === 'function'
          ? changes(old.row)
          : (changes ??
            table.definition.editRow?.(old.row, {
              id,
              index: -1,
              nowMicros: this.clockMicros,
              dataset: this,
            }) ??
            {});
      const row = { ...old.row, ...delta, id } as Row;
      let micros = Number.NaN;
      if (table.tracksUpdatedAt) {
        micros = this.tick();
        row.updated_at = formatTimestamp(micros);
      }
      const entry: Entry = { row, id, micros, live: true };
      table.byId[index] = entry;
      if (table.byTime) {
        old.live = false;
        table.deadInTime += 1;
        table.byTime.push(entry);
      }
      edited.push(row);
    }
    return edited;
  }

  /** Deletes rows (the server marks nothing: they simply stop appearing). Returns how many. */
  remove(resource: string, ids: Array<RowId | string>): number {
    const table = this.table(resource);
    let removed = 0;
    for (const rawId of ids) {
      const id = normalizeId(rawId);
      const index = id === undefined ? -1 : table.indexOf(id);
      if (index < 0) continue;
      const entry = table.byId[index] as Entry;
      if (!entry.live) continue;
      entry.live = false;
      removed += 1;
      if (table.byTime) table.deadInTime += 1;
    }
    if (removed > 0) {
      let kept = 0;
      for (const entry of table.byId) if (entry.live) table.byId[kept++] = entry;
      table.byId.length = kept;
    }
    return removed;
  }

  /**
   * One page after `cursor` (a cursor string as a client sends it, or null for the start),
   * exactly as the server pages: `pk` by `id > cursor`; `updated_at_id` by
   * `updated_at > t OR (updated_at = t AND id > id)`; only rows `include` keeps (a chatbot
   * choice), when given. Throws InvalidCursorError for a bad cursor.
   */
  pageAfter(
    resource: string,
    cursorKind: CursorKind,
    cursor: string | null,
    limit: number,
    include?: (row: Row) => boolean,
  ): DatasetPage {
    const table = this.table(resource);
    const decoded = cursor === null ? null : decodeCursor(cursorKind, cursor);
    const taken: Entry[] = [];
    if (cursorKind === 'pk') {
      const start = decoded ? table.firstIdAfter(decoded.id) : 0;
      for (let index = start; index < table.byId.length && taken.length <= limit; index += 1) {
        const entry = table.byId[index] as Entry;
        if (!include || include(entry.row)) taken.push(entry);
      }
    } else {
      const order = table.timeOrder();
      const start =
        decoded?.kind === 'updated_at_id'
          ? table.firstTimeAfter(decoded.updatedAtMicros, decoded.id)
          : 0;
      for (let index = start; index < order.length && taken.length <= limit; index += 1) {
        const entry = order[index] as Entry;
        if (entry.live && (!include || include(entry.row))) taken.push(entry);
      }
    }
    const hasMore = taken.length > limit;
    if (hasMore) taken.length = limit;
    const last = taken[taken.length - 1];
    let next: string | null = null;
    if (hasMore && last) {
      next =
        cursorKind === 'pk' ? encodePkCursor(last.id) : encodeUpdatedAtCursor(last.micros, last.id);
    }
    return { rows: taken.map((entry) => entry.row), cursor: next, hasMore };
  }

  private addEntries(table: ResourceTable, entries: Entry[]): void {
    if (entries.length === 0) return;
    let inIdOrder = true;
    let previous = table.lastId();
    for (const entry of entries) {
      if (previous !== undefined && entry.id <= previous) inIdOrder = false;
      previous = entry.id;
      table.byId.push(entry);
    }
    if (!inIdOrder) table.byId.sort((left, right) => compareIds(left.id, right.id));
    const order = table.byTime;
    if (order) {
      let last = order[order.length - 1];
      for (const entry of entries) {
        if (
          last &&
          (entry.micros < last.micros || (entry.micros === last.micros && entry.id <= last.id))
        ) {
          table.timeOrderBroken = true;
        }
        order.push(entry);
        last = entry;
      }
    }
  }

  private table(resource: string): ResourceTable {
    const table = this.tables.get(resource);
    if (!table) throw new Error(`The fake dataset has no resource ${resource}.`);
    return table;
  }
}
