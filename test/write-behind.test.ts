/**
 * Write-behind: the sync hands a page to the warehouse and prepares the next while it commits
 * (SQLite: on the writer thread; PostgreSQL: in the server). Pages of a walk commit in order and
 * none after one that failed, so no cursor ever moves past rows that were not stored.
 */
import { spawn } from 'node:child_process';
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WarehouseError } from '../src/errors.js';
import type { PageWrite, PageWriteResult, Warehouse } from '../src/interfaces.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { FailedWalks } from '../src/warehouse/commit-order.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { WriterThreadCommitter } from '../src/warehouse/sqlite/page-committer.js';
import { SqliteHandle } from '../src/warehouse/sqlite/handle.js';
import { SqlitePageWriter } from '../src/warehouse/sqlite/page-writes.js';
import {
  CLI_FROM_SOURCE,
  createTestWarehouse,
  expectWarehouseEqualsSource,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  syncFrom,
  threadsOfThisProcess,
  type TestWarehouse,
} from './support.js';

const RESOURCE = 'chat_messages';
const root = join(dirname(fileURLToPath(import.meta.url)), '..');

describe('FailedWalks', () => {
  it('refuses the later pages of a failed walk only', () => {
    const walks = new FailedWalks();
    walks.assertOpen('1/a', 'a');
    walks.fail('1/a');
    expect(() => walks.assertOpen('1/a', 'a')).toThrow(
      /A page of a was not written because an earlier page of a failed/,
    );
    walks.assertOpen('1/b', 'b');
    walks.assertOpen('2/a', 'a');
    // Pages handed over without a walk depend on nothing.
    walks.fail(undefined);
    walks.assertOpen(undefined, 'a');
  });

  it('remembers the recent failures, not every one ever', () => {
    const walks = new FailedWalks();
    for (let walk = 0; walk < 100; walk += 1) walks.fail(`${walk}/a`);
    expect(() => walks.assertOpen('99/a', 'a')).toThrow();
    walks.assertOpen('0/a', 'a');
  });
});

describe('the SQLite writer thread', () => {
  it('fails every page with the file named when its connection cannot open', async () => {
    const directory = temporaryDirectory();
    try {
      const notAFile = join(directory.path, 'a-folder');
      mkdirSync(notAFile);
      const committer = new WriterThreadCommitter({
        path: notAFile,
        description: `sqlite:${notAFile}`,
        busyTimeoutMs: 100,
        storedColumnsQuery: { sql: 'SELECT 1', parameters: [] },
      });
      const page = {
        runId: 1,
        resource: RESOURCE,
        columns: [],
        rows: [[1]],
        cursor: null,
        cursorKind: null,
        syncedAt: '2026-01-01T00:00:00.000000Z',
      };
      await expect(committer.commit(page)).rejects.toThrow(
        new RegExp(`Cannot open the SQLite warehouse ${notAFile}`),
      );
      // Later pages fail the same way, at once.
      await expect(committer.commit(page)).rejects.toThrow(/Cannot open the SQLite warehouse/);
      await committer.close();
    } finally {
      directory.remove();
    }
  });
});

describe('the SQLite writer thread, under a lock another program holds', () => {
  it('fails the page with what failed, where, and the fix for SQLite’s code; the next page commits', async () => {
    const directory = temporaryDirectory();
    const path = join(directory.path, 'w.db');
    try {
      await (await openWarehouse({ url: path })).close();
      const committer = new WriterThreadCommitter({
        path,
        description: `sqlite:${path}`,
        busyTimeoutMs: 20,
        storedColumnsQuery: { sql: 'SELECT 1', parameters: [] },
      });
      const page = {
        runId: 1,
        resource: RESOURCE,
        columns: [],
        rows: [],
        cursor: '5',
        cursorKind: 'pk' as const,
        syncedAt: '2026-01-01T00:00:00.000000Z',
      };
      const other = new Database(path);
      other.exec('BEGIN IMMEDIATE');
      const error = await committer.commit(page).catch((caught: unknown) => caught);
      other.exec('ROLLBACK');
      other.close();
      // SQLite's own error crossed from the writer thread as itself (its code kept) and is worded here.
      expect(error).toBeInstanceOf(WarehouseError);
      expect((error as WarehouseError).message).toBe(
        `Writing a page of ${RESOURCE} failed in sqlite:${path}: database is locked`,
      );
      expect((error as WarehouseError).hint).toMatch(/^Another program holds a lock on the file/);
      expect(await committer.commit(page)).toBe(0);
      await committer.close();
      await expect(committer.commit(page)).rejects.toThrow(
        `The warehouse sqlite:${path} is closed.`,
      );
    } finally {
      directory.remove();
    }
  });
});

describe('the SQLite writer thread, not started yet', () => {
  it('commits on the warehouse’s connection until a thread attaches, failures worded as the thread’s', async (context) => {
    if (!existsSync('/proc/self/task')) context.skip('counts threads in /proc/self/task (Linux)');
    const directory = temporaryDirectory();
    const path = join(directory.path, 'w.db');
    try {
      await (await openWarehouse({ url: path })).close();
      const storedColumnsQuery = { sql: 'SELECT 1', parameters: [] };
      const handle = new SqliteHandle(path, 20, storedColumnsQuery);
      const committer = new WriterThreadCommitter(
        { path, description: `sqlite:${path}`, busyTimeoutMs: 20, storedColumnsQuery },
        new SqlitePageWriter(handle),
      );
      const page = (cursor: string) => ({
        runId: 1,
        resource: RESOURCE,
        columns: [],
        rows: [],
        cursor,
        cursorKind: 'pk' as const,
        syncedAt: '2026-01-01T00:00:00.000000Z',
      });
      const cursor = () =>
        (handle.db.prepare('SELECT cursor FROM _ocs_resources').get() as { cursor: string }).cursor;
      const threads = threadsOfThisProcess();
      expect(await committer.commit(page('1'))).toBe(0);
      expect(cursor()).toBe('1');
      expect(threadsOfThisProcess()).toBe(threads);
      const other = new Database(path);
      other.exec('BEGIN IMMEDIATE');
      const error = await committer.commit(page('2')).catch((caught: unknown) => caught);
      other.exec('ROLLBACK');
      other.close();
      expect(error).toBeInstanceOf(WarehouseError);
      expect((error as WarehouseError).message).toBe(
        `Writing a page of ${RESOURCE} failed in sqlite:${path}: database is locked`,
      );
      expect((error as WarehouseError).hint).toMatch(/^Another program holds a lock on the file/);
      // Once a thread attached, every page commits on the writer thread, in order with its pages.
      committer.attach(false).close();
      expect(threadsOfThisProcess()).toBeGreaterThan(threads);
      expect(await committer.commit(page('3'))).toBe(0);
      expect(cursor()).toBe('3');
      await committer.close();
      handle.db.close();
    } finally {
      directory.remove();
    }
  });
});

describe.each(splitDialects)('write-behind (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let stored: TestWarehouse;

  beforeEach(async () => {
    dataset = createSampleDataset({ rowsPerResource: 30, seed: 11 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    stored = await createTestWarehouse(dialect);
  });
  afterEach(async () => {
    await server.close();
    await stored.dispose();
  });

  const openStored = () =>
    openWarehouse({
      url: stored.env.OCS_WAREHOUSE_URL!,
      schema: stored.env.OCS_WAREHOUSE_SCHEMA,
    });

  it('hands the next page over before the one ahead has committed, and meanwhile calls the warehouse for nothing else', async () => {
    const warehouse = await openStored();
    // Each page's result is held back until the next page is handed over (or, for the last
    // page of a walk, a while later): a sync that waited for a commit before handing over the
    // next page would only ever see the fallback release.
    const events: string[] = [];
    let held: { release: () => void } | undefined;
    let unsettled = 0;
    const busyCalls: string[] = [];
    const recording = new Proxy(warehouse, {
      get(target, property) {
        // Getters run on the warehouse itself: the archive (the values' originals, saved beside
        // the pages) may be used meanwhile.
        const value = Reflect.get(target, property) as unknown;
        if (typeof value !== 'function') return value;
        // A check of a flag, no call to the database.
        if (property === 'assertLockHeld') return value.bind(target);
        if (property === 'writePage') {
          return (page: PageWrite): Promise<PageWriteResult> => {
            held?.release();
            events.push(`hand ${page.resource}`);
            unsettled += 1;
            const committed = target.writePage(page);
            return new Promise((resolve, reject) => {
              let released = false;
              const release = (reason: string) => {
                if (released) return;
                released = true;
                clearTimeout(fallback);
                events.push(reason);
                unsettled -= 1;
                committed.then(resolve, reject);
              };
              const fallback = setTimeout(() => release('released late'), 1_500);
              held = { release: () => release('released by the next page') };
            });
          };
        }
        return (...args: unknown[]) => {
          if (unsettled > 0) busyCalls.push(String(property));
          return (value as (...parameters: unknown[]) => unknown).apply(target, args);
        };
      },
    }) as Warehouse;
    try {
      // Pages go through writePage on this thread (page_threads: false): the pipeline runs here
      // the same stages the page thread runs, so what this sees of them holds there too.
      const report = await syncFrom(server.url, recording, {
        pageSize: 4,
        resources: [RESOURCE],
        pageThreads: false,
      });
      expect(report.status).toBe('ok');
    } finally {
      await warehouse.close();
    }
    const pages = events.filter((event) => event === `hand ${RESOURCE}`).length;
    expect(pages).toBe(Math.ceil(30 / 4));
    // The team row is written on its own; of the resource's pages, only the last waits.
    expect(events.filter((event) => event === 'released by the next page')).toHaveLength(pages - 1);
    expect(busyCalls).toEqual([]);
    await expectWarehouseEqualsSource(stored, dataset, { resources: [RESOURCE] });
  });

  it('a page that fails to commit: the page handed over behind it is not written, and the rerun stores every row once', async () => {
    const directory = temporaryDirectory();
    const configFile = join(directory.path, 'config.yaml');
    writeFileSync(configFile, 'http:\n  min_retry_delay_ms: 5\n  max_attempts: 2\n');
    const sync = () =>
      runCli(['--config', configFile, 'sync'], {
        ...syncEnv(server.url, stored.env, { OCS_PAGE_SIZE: '5' }),
      });
    try {
      expect((await sync()).code).toBe(0);
      const inserted = dataset.insert(RESOURCE, 20);
      const failing = inserted[5]!.id;
      await stored.query(
        dialect === 'sqlite'
          ? `CREATE TRIGGER test_refuse BEFORE INSERT ON ${RESOURCE} WHEN NEW.id = ${failing}
             BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END`
          : `CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'refused by a test trigger'; END $$;
             CREATE TRIGGER test_refuse BEFORE INSERT ON ${RESOURCE}
             FOR EACH ROW WHEN (NEW.id = ${failing}) EXECUTE FUNCTION test_refuse()`,
      );

      const failed = await sync();
      expect(failed.code).not.toBe(0);
      expect(`${failed.stdout}${failed.stderr}`).toMatch(/refused by a test trigger/);
      const ids = new Set((await stored.readTable(RESOURCE)).map((row) => Number(row.id)));
      // The first new page committed; the failing page did not, nor the one handed over behind it.
      for (const row of inserted.slice(0, 5)) expect(ids.has(Number(row.id))).toBe(true);
      for (const row of inserted.slice(5)) expect(ids.has(Number(row.id))).toBe(false);

      await stored.query(
        dialect === 'sqlite'
          ? 'DROP TRIGGER test_refuse'
          : `DROP TRIGGER test_refuse ON ${RESOURCE}; DROP FUNCTION test_refuse()`,
      );
      const rerun = await sync();
      expect(rerun.stderr).toBe('');
      expect(rerun.code).toBe(0);
      await expectWarehouseEqualsSource(stored, dataset);
    } finally {
      directory.remove();
    }
  });

  it('SIGKILL while pages commit: whole pages only, and the next run resumes to an exact copy', async () => {
    dataset.insert(RESOURCE, 60);
    const env = syncEnv(server.url, stored.env, { OCS_PAGE_SIZE: '5' });
    let killed = false;
    const child = spawn(process.execPath, [...CLI_FROM_SOURCE, 'sync'], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: 'ignore',
    });
    server.options.onPageServed = async ({ resource, pageIndex }) => {
      if (killed || resource !== RESOURCE || pageIndex < 6) return;
      killed = true;
      child.kill('SIGKILL');
      await new Promise((resolve) => setTimeout(resolve, 100));
    };
    await new Promise((resolve) => child.on('exit', resolve));
    server.options.onPageServed = undefined;
    expect(killed, 'the process was still walking when it was killed').toBe(true);

    // Pages are all or nothing: what is stored is the first whole pages of the walk.
    const walkOrder = dataset
      .pageAfter(RESOURCE, 'updated_at_id', null, 1_000)
      .rows.map((row) => Number(row.id));
    const storedIds = (await stored.readTable(RESOURCE)).map((row) => Number(row.id));
    expect(storedIds.length % 5).toBe(0);
    expect(storedIds.length).toBeLessThan(walkOrder.length);
    expect(new Set(storedIds)).toEqual(new Set(walkOrder.slice(0, storedIds.length)));

    const rerun = await runCli(['sync'], env);
    expect(rerun.stderr).toBe('');
    expect(rerun.code).toBe(0);
    await expectWarehouseEqualsSource(stored, dataset);
  });
});
