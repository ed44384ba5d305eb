/**
 * The page pipeline (src/sync/pipeline/): the sync's thread only fetches and moves each body's
 * bytes to the page thread, which does everything else and writes through a sink of its own.
 * Errors cross between the threads as themselves (test/thread-bridge.test.ts); a page thread that
 * dies fails the walks in flight with a clear message, stores nothing past the last committed page, leaves no thread
 * behind, and the next run completes exactly.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer } from '../src/fake-server/server.js';
import type { Warehouse } from '../src/interfaces.js';
import type { SyncOptions } from '../src/sync/engine.js';
import { PagePipeline } from '../src/sync/pipeline/pipeline.js';
import type { WalkSetup } from '../src/sync/pipeline/messages.js';
import type { PageHost } from '../src/sync/pipeline/prepare.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { parseWarehouseUrl, writableFromAnotherThread } from '../src/warehouse/url.js';
import { planPageThreads, type PageThreadsSetting } from '../src/page-threads.js';
import { startCliProcess } from './crash-support.js';
import {
  closeCliTestBed,
  createTestWarehouse,
  expectWarehouseEqualsSource,
  openCliTestBed,
  syncEnv,
  splitDialects,
  settledThreads,
  syncFrom,
  threadsOfThisProcess,
  waitFor,
  type TestWarehouse,
} from './support.js';

let cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

async function openStored(
  dialect: 'sqlite' | 'postgres',
): Promise<{ stored: TestWarehouse; warehouse: Warehouse }> {
  const stored = await createTestWarehouse(dialect);
  cleanups.push(() => stored.dispose());
  const warehouse = await openWarehouse({
    url: stored.env.OCS_WAREHOUSE_URL!,
    ...(stored.env.OCS_WAREHOUSE_SCHEMA ? { schema: stored.env.OCS_WAREHOUSE_SCHEMA } : {}),
  });
  cleanups.push(() => warehouse.close());
  return { stored, warehouse };
}

const notesColumns = [{ name: 'note', type: 'json' as const }];

/** A walk of `notes` (pages of 2 rows) in run `runId`. */
function notesWalk(runId: number): WalkSetup {
  return {
    walk: `${runId}/notes`,
    runId,
    resource: 'notes',
    cursorKind: 'pk',
    limit: 2,
    columns: notesColumns,
    excludedFields: [],
    sealed: { marked: new Set(), all: new Set() },
    policy: 'sealed',
    history: false,
  };
}

/** A page of plain rows asks the run nothing, whatever PageHost's questions are. */
const refusingHost = new Proxy({} as PageHost, {
  get: (_, question) => async () => {
    throw new Error(`${String(question)} was not to be asked`);
  },
});

/** A page body of `notes` with these ids. */
function pageBytes(ids: number[], cursor: string | null, hasMore = cursor !== null): Uint8Array {
  const results = ids.map((id) => ({ id, note: { id } }));
  return new Uint8Array(Buffer.from(JSON.stringify({ cursor, has_more: hasMore, results })));
}

describe('whether pages leave the sync’s thread', () => {
  it('is planned once, from page_threads, the teams at once and the warehouse', () => {
    const plan = (setting: PageThreadsSetting, othersAtOnce: boolean, writableElsewhere = true) =>
      planPageThreads({ setting, othersAtOnce, writableElsewhere });
    const both = { pageThread: true, writerThread: true };
    const neither = { pageThread: false, writerThread: false };
    expect(plan('auto', false)).toEqual(both);
    // Other teams at once keep the cores busy: auto keeps each team's pages on its own thread.
    expect(plan('auto', true)).toEqual(neither);
    expect(plan(true, true)).toEqual(both);
    expect(plan(false, false)).toEqual(neither);
    // An in-memory SQLite warehouse is one connection's: whatever was asked, no thread writes it.
    expect(plan(true, false, false)).toEqual(neither);
    expect(plan('auto', false, false)).toEqual(neither);
    expect(writableFromAnotherThread(parseWarehouseUrl(':memory:'))).toBe(false);
    expect(writableFromAnotherThread(parseWarehouseUrl('sqlite::memory:'))).toBe(false);
    expect(writableFromAnotherThread(parseWarehouseUrl('./w.db'))).toBe(true);
    expect(writableFromAnotherThread(parseWarehouseUrl('postgres://u@h/d'))).toBe(true);
  });

  it('is obeyed: a warehouse opened without a writer thread is refused a page thread, with the fix', async () => {
    const memory = await openWarehouse({ url: ':memory:' });
    cleanups.push(() => memory.close());
    expect(memory.pageSinkSetup()).toBeUndefined();
    const pipeline = new PagePipeline({ warehouse: memory, keys: {}, pageThread: true });
    const walk = pipeline.startWalk(notesWalk(1), refusingHost);
    // An empty page stays on this thread; the first with rows asks for the page thread.
    await expect(walk.parse(pageBytes([], null))).resolves.toMatchObject({ rowCount: 0 });
    await expect(walk.parse(pageBytes([1], '1'))).rejects.toThrow(
      'The warehouse sqlite::memory: cannot be written from a page thread (in memory, or opened without a writer thread).',
    );
    expect(pipeline.threaded).toBe(true);
    await walk.end();
    await pipeline.close();
    await expect(openWarehouse({ url: ':memory:', writerThread: true })).rejects.toThrow(
      'An in-memory SQLite warehouse has one connection: it cannot commit on a writer thread.',
    );
  });
});

describe.each(splitDialects)('the page pipeline (%s)', (dialect) => {
  it('moves each body’s bytes to the page thread (the sync’s thread keeps none) and commits with the cursor', async () => {
    const { warehouse } = await openStored(dialect);
    const lock = await warehouse.acquireLock(0);
    cleanups.push(() => lock.release());
    const columns = [{ name: 'note', type: 'json' as const }];
    await warehouse.applySchemaChanges(
      [{ kind: 'create_table', table: 'notes', columns, reason: 'schema' }],
      { from: null, to: null },
    );
    const runId = await warehouse.bookkeeping.startRun('incremental', null);
    const pipeline = new PagePipeline({ warehouse, keys: {}, pageThread: true });
    cleanups.push(() => pipeline.close());
    // A page of plain rows asks the run nothing, whatever PageHost's questions are.
    const host = new Proxy({} as PageHost, {
      get: (_, question) => async () => {
        throw new Error(`${String(question)} was not to be asked`);
      },
    });
    const walk = pipeline.startWalk(
      {
        walk: `${runId}/notes`,
        runId,
        resource: 'notes',
        cursorKind: 'pk',
        limit: 2,
        columns,
        excludedFields: [],
        sealed: { marked: new Set(), all: new Set() },
        policy: 'sealed',
        history: false,
      },
      host,
    );
    const body = '{"cursor":"2","has_more":true,"results":[{"id":1,"note":{"b": 1.0}},{"id":2}]}';
    const bytes = new Uint8Array(Buffer.from(body));
    const summary = await walk.parse(bytes);
    // Moved, not copied: this thread's buffer is empty once handed over.
    expect(bytes.byteLength).toBe(0);
    expect(summary).toMatchObject({ rowCount: 2, cursor: '2', hasMore: true, bare: false });
    const result = await walk.commit(summary.seq, '2');
    expect(result).toMatchObject({ rowsWritten: 2, refusedFields: [] });
    await walk.end();
    await pipeline.close();
    expect((await warehouse.bookkeeping.getResourceState('notes'))?.cursor).toBe('2');
    const [row] = await warehouse.reads.readRows({
      table: 'notes',
      columns,
      afterId: null,
      limit: 1,
      live: false,
      jsonAsText: true,
    });
    // SQLite keeps the server's own text (not `{"b":1}`); jsonb writes this value so too.
    expect(row!.note).toBe('{"b": 1.0}');
  });

  it('starts no thread for empty pages; a walk moves to the page thread at its first page with rows, committing in order', async (context) => {
    if (!existsSync('/proc/self/task')) context.skip('counts threads in /proc/self/task (Linux)');
    const { warehouse } = await openStored(dialect);
    const lock = await warehouse.acquireLock(0);
    cleanups.push(() => lock.release());
    await warehouse.applySchemaChanges(
      [{ kind: 'create_table', table: 'notes', columns: notesColumns, reason: 'schema' }],
      { from: null, to: null },
    );
    const settled = await settledThreads();
    const runId = await warehouse.bookkeeping.startRun('incremental', null);
    const pipeline = new PagePipeline({ warehouse, keys: {}, pageThread: true });
    cleanups.push(() => pipeline.close());
    const walk = pipeline.startWalk(notesWalk(runId), refusingHost);
    // An empty page with a cursor of its own is parsed and committed on this thread.
    const empty = await walk.parse(pageBytes([], '0', true));
    expect(empty).toMatchObject({ seq: 1, rowCount: 0, cursor: '0' });
    const emptyWritten = walk.commit(empty.seq, '0');
    expect(threadsOfThisProcess()).toBe(settled);
    // The first page with rows, and every later one, go to the page thread, bytes moved.
    const first = pageBytes([1, 2], '2');
    const rows = await walk.parse(first);
    expect(first.byteLength).toBe(0);
    expect(rows).toMatchObject({ seq: 2, rowCount: 2, cursor: '2' });
    expect(threadsOfThisProcess()).toBeGreaterThan(settled);
    const last = await walk.parse(pageBytes([], null, false));
    expect(last).toMatchObject({ seq: 3, rowCount: 0 });
    // Handed over without waiting, as the walk does (write-behind): still committed in order.
    const written = [emptyWritten, walk.commit(rows.seq, '2'), walk.commit(last.seq, '3')];
    const results = await Promise.all(written);
    expect(results.map((result) => result.rowsWritten)).toEqual([0, 2, 0]);
    await walk.end();
    await pipeline.close();
    expect((await warehouse.bookkeeping.getResourceState('notes'))?.cursor).toBe('3');
    // A writer thread lives for a run: once the lock is let go, none is left.
    await lock.release();
    expect(await settledThreads()).toBe(settled);
  });

  it('a page is not written after one that failed on the other thread', async () => {
    const { warehouse } = await openStored(dialect);
    const lock = await warehouse.acquireLock(0);
    cleanups.push(() => lock.release());
    await warehouse.applySchemaChanges(
      [{ kind: 'create_table', table: 'notes', columns: notesColumns, reason: 'schema' }],
      { from: null, to: null },
    );
    const runId = await warehouse.bookkeeping.startRun('incremental', null);
    // Pages written on this thread fail (those of the page thread go through its own sink).
    const failingHere = new Proxy(warehouse, {
      get: (target, key) =>
        key === 'writePage'
          ? async () => {
              throw new Error('the disk is full');
            }
          : (Reflect.get(target, key) as unknown as { bind?: unknown }) instanceof Function
            ? (Reflect.get(target, key) as (...args: unknown[]) => unknown).bind(target)
            : Reflect.get(target, key),
    });
    const pipeline = new PagePipeline({ warehouse: failingHere, keys: {}, pageThread: true });
    cleanups.push(() => pipeline.close());
    const walk = pipeline.startWalk(notesWalk(runId), refusingHost);
    const empty = await walk.parse(pageBytes([], '0', true));
    const rows = await walk.parse(pageBytes([1, 2], '2'));
    const emptyWritten = walk.commit(empty.seq, '0');
    const rowsWritten = walk.commit(rows.seq, '2');
    await expect(emptyWritten).rejects.toThrow('the disk is full');
    await expect(rowsWritten).rejects.toThrow(
      'A page of notes was not written because an earlier page of notes failed',
    );
    await walk.end();
    await pipeline.close();
    expect(await warehouse.bookkeeping.getResourceState('notes')).toBeUndefined();
    expect(
      await warehouse.reads.readRows({
        table: 'notes',
        columns: notesColumns,
        afterId: null,
        limit: 5,
        live: false,
      }),
    ).toEqual([]);
  });

  it('an unchanged run starts no thread: its empty pages and the team row stay on the sync’s thread', async (context) => {
    if (!existsSync('/proc/self/task')) context.skip('counts threads in /proc/self/task (Linux)');
    const dataset = createSampleDataset({ rowsPerResource: 6, seed: 47 });
    const server = await startFakeServer({ dataset });
    cleanups.push(() => server.close());
    const { stored, warehouse: first } = await openStored(dialect);
    const resources = ['users', 'chats', 'chat_messages'];
    expect((await syncFrom(server.url, first, { resources })).rows).toBeGreaterThan(0);
    await first.close();
    // Opened as the CLI opens it: by the run's plan, threads wanted.
    const warehouse = await openWarehouse({
      url: stored.env.OCS_WAREHOUSE_URL!,
      ...(stored.env.OCS_WAREHOUSE_SCHEMA ? { schema: stored.env.OCS_WAREHOUSE_SCHEMA } : {}),
    });
    cleanups.push(() => warehouse.close());
    const settled = await settledThreads();
    let mostThreads = 0;
    const unchanged = await syncFrom(server.url, warehouse, {
      resources,
      events: {
        onResourceDone: () => {
          mostThreads = Math.max(mostThreads, threadsOfThisProcess());
        },
      },
    });
    expect(unchanged).toMatchObject({ status: 'ok', rows: 0 });
    expect(mostThreads).toBe(settled);
    expect(threadsOfThisProcess()).toBe(settled);
    // Rows again: the page thread (and SQLite's writer thread) start for them.
    dataset.insert('chats', 3);
    mostThreads = 0;
    expect(
      await syncFrom(server.url, warehouse, {
        resources,
        events: {
          onResourceDone: () => {
            mostThreads = Math.max(mostThreads, threadsOfThisProcess());
          },
        },
      }),
    ).toMatchObject({ status: 'ok', rows: 3 });
    expect(mostThreads).toBeGreaterThan(settled);
    await expectWarehouseEqualsSource(stored, dataset, { resources });
  });

  it('a sync process lives until its run is recorded: waiting for the page thread to end keeps it alive', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 36 });
    const server = await startFakeServer({ dataset });
    const bed = await openCliTestBed(dialect, '');
    cleanups.push(() => closeCliTestBed(bed, server));
    // A real process: its event loop, not a test runner's, decides when it ends.
    const cli = startCliProcess(
      ['sync', '--resources', 'chat_messages'],
      syncEnv(server.url, bed.warehouse.env, { OCS_PAGE_SIZE: '5' }),
    );
    const result = await cli.finished;
    expect(result.code, result.stderr).toBe(0);
    const runs = await bed.warehouse.query('SELECT status FROM "_ocs_runs"');
    expect(runs.map((run) => run.status)).toEqual(['ok']);
  });

  it('gives a SQLite page thread a 16 MB young generation, a PostgreSQL one V8’s default', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 38 });
    const server = await startFakeServer({ dataset });
    cleanups.push(() => server.close());
    const { warehouse } = await openStored(dialect);
    const folder = mkdtempSync(join(tmpdir(), 'ocs-page-limits-'));
    const limitsFile = join(folder, 'limits.jsonl');
    process.env.OCS_TEST_PAGE_THREAD_LIMITS = limitsFile;
    cleanups.push(() => {
      delete process.env.OCS_TEST_PAGE_THREAD_LIMITS;
      rmSync(folder, { recursive: true, force: true });
    });
    const report = await syncFrom(server.url, warehouse, {
      resources: ['chat_messages'],
      pageThreadModule: new URL('./page-thread-that-tells-its-limits.mjs', import.meta.url),
    });
    expect(report.status).toBe('ok');
    const limits = readFileSync(limitsFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { maxYoungGenerationSizeMb: number });
    expect(limits).toHaveLength(1);
    if (dialect === 'sqlite') expect(limits[0]!.maxYoungGenerationSizeMb).toBe(16);
    else expect(limits[0]!.maxYoungGenerationSizeMb).toBeGreaterThan(16);
  });

  it('a page thread that dies fails the walk at its page, stores nothing past it, leaves no thread, and the next run completes', async (context) => {
    if (!existsSync('/proc/self/task')) context.skip('counts threads in /proc/self/task (Linux)');
    const dataset = createSampleDataset({ rowsPerResource: 20, seed: 31 });
    const server = await startFakeServer({ dataset });
    cleanups.push(() => server.close());
    const { stored, warehouse } = await openStored(dialect);
    const resources = ['users', 'chats', 'chat_messages'];
    const sync = (overrides: Partial<SyncOptions> = {}) =>
      syncFrom(server.url, warehouse, { resources, ...overrides });
    // The first run starts what stays (the warehouse's writer thread, Node's own).
    expect((await sync({ resources: ['users'] })).status).toBe('ok');
    const settled = await settledThreads();
    // users has nothing new; the thread stops when told to write its 2nd page, chats' 2nd.
    process.env.OCS_TEST_PAGE_THREAD_STOPS_AT = '2';
    cleanups.push(() => {
      delete process.env.OCS_TEST_PAGE_THREAD_STOPS_AT;
    });
    const report = await sync({
      pageThreadModule: new URL('./page-thread-that-stops.mjs', import.meta.url),
      // The threads started after it go on (a thread reads the variable as it starts).
      events: {
        onResourceDone: ({ resource }) => {
          if (resource === 'chats') delete process.env.OCS_TEST_PAGE_THREAD_STOPS_AT;
        },
      },
    });
    expect(report.status).toBe('partial');
    const chats = report.resources.find((resource) => resource.resource === 'chats')!;
    expect(chats.status).toBe('failed');
    expect(chats.error).toContain(
      "The sync's page thread stopped (it exited with code 9); the page was not stored.",
    );
    expect(chats.error).toContain('resumes after them');
    // A walk started after it has a thread of its own.
    const messages = report.resources.find((resource) => resource.resource === 'chat_messages');
    expect(messages).toMatchObject({ status: 'ok', rows: 20 });
    await waitFor(() => threadsOfThisProcess() === settled, 'the threads to stop after the run');
    // Whole pages from the start of the walk, and the cursor after the last of them.
    const walkOrder = dataset
      .pageAfter('chats', 'updated_at_id', null, 1_000)
      .rows.map((row) => Number(row.id));
    const storedIds = (await stored.readTable('chats')).map((row) => Number(row.id));
    expect(storedIds.length % 5).toBe(0);
    expect(storedIds.length).toBeLessThan(20);
    expect(new Set(storedIds)).toEqual(new Set(walkOrder.slice(0, storedIds.length)));

    const rerun = await sync();
    expect(rerun.status).toBe('ok');
    await expectWarehouseEqualsSource(stored, dataset, { resources });
  });

  it('page_threads: false parses, prepares and writes on the sync’s thread: no page thread, no writer thread', async (context) => {
    if (!existsSync('/proc/self/task')) context.skip('counts threads in /proc/self/task (Linux)');
    const dataset = createSampleDataset({ rowsPerResource: 20, seed: 37 });
    const server = await startFakeServer({ dataset });
    cleanups.push(() => server.close());
    const { stored, warehouse: threadedWarehouse } = await openStored(dialect);
    const resources = ['users', 'chats', 'chat_messages'];
    let warehouse = threadedWarehouse;
    let mostThreads = 0;
    const sync = (overrides: Partial<SyncOptions>) =>
      syncFrom(server.url, warehouse, {
        concurrency: 2,
        events: {
          onResourceDone: () => {
            mostThreads = Math.max(mostThreads, threadsOfThisProcess());
          },
        },
        ...overrides,
      });
    // A page thread stops at its first page: a run with one fails at it.
    process.env.OCS_TEST_PAGE_THREAD_STOPS_AT = '1';
    cleanups.push(() => {
      delete process.env.OCS_TEST_PAGE_THREAD_STOPS_AT;
    });
    const pageThreadModule = new URL('./page-thread-that-stops.mjs', import.meta.url);
    const threaded = await sync({ resources, pageThreadModule });
    expect(threaded.status).toBe('partial');
    expect(threaded.resources.map((resource) => resource.error).join('\n')).toContain(
      "The sync's page thread stopped",
    );
    await threadedWarehouse.close();
    warehouse = await openWarehouse({
      url: stored.env.OCS_WAREHOUSE_URL!,
      ...(stored.env.OCS_WAREHOUSE_SCHEMA ? { schema: stored.env.OCS_WAREHOUSE_SCHEMA } : {}),
      writerThread: false,
    });
    cleanups.push(() => warehouse.close());
    // The first run starts Node's own threads (its pool for files and crypto) too.
    expect((await sync({ resources: ['users'], pageThreads: false })).status).toBe('ok');
    const settled = await settledThreads();
    mostThreads = 0;
    const report = await sync({ resources, pageThreads: false, pageThreadModule });
    expect(report.status).toBe('ok');
    expect(mostThreads).toBe(settled);
    await expectWarehouseEqualsSource(stored, dataset, { resources });
  });
});
