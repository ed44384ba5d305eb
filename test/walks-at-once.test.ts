/**
 * Several walks at once (`concurrency`), and sealed values opened off the sync's thread: a walk
 * waiting for its values holds up no other walk; walks start longest first, as long as the
 * warehouse says their last walks took (manifest order with one lane); the run's threads stop
 * when its walks end, however they end; a thread that stops fails its page and nothing is stored
 * past it. The pacing of every setting is in pacer.test.ts.
 */
import { createPrivateKey } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { InterruptedError } from '../src/errors.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { Warehouse } from '../src/interfaces.js';
import {
  InThreadOpener,
  OpenThreadPool,
  type SealedValueOpener,
} from '../src/sealing/open-pool.js';
import { FULL_REFRESH_ALL, runSync, type SyncOptions } from '../src/sync/engine.js';
import { parseWalkDurations } from '../src/sync/walk-order.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { WALK_DURATIONS_STATE_KEY } from '../src/warehouse/state-keys.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  createTestWarehouse,
  expectWarehouseEqualsSource,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  settledThreads,
  syncFrom,
  threadsOfThisProcess,
  waitFor,
  type TestWarehouse,
} from './support.js';

interface Bed {
  server: FakeServer;
  dataset: FakeDataset;
  stored: TestWarehouse;
  warehouse: Warehouse;
  sync(overrides?: Partial<SyncOptions>): ReturnType<typeof runSync>;
}

let cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

const privateKey = () => createPrivateKey(teamKeys().privateKey);

async function openBed(dialect: 'sqlite' | 'postgres', rowsPerResource: number): Promise<Bed> {
  const dataset = createSampleDataset({ rowsPerResource, seed: 23 });
  const server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
  cleanups.push(() => server.close());
  const stored = await createTestWarehouse(dialect);
  cleanups.push(() => stored.dispose());
  const warehouse = await openWarehouse({
    url: stored.env.OCS_WAREHOUSE_URL!,
    ...(stored.env.OCS_WAREHOUSE_SCHEMA ? { schema: stored.env.OCS_WAREHOUSE_SCHEMA } : {}),
  });
  cleanups.push(() => warehouse.close());
  return {
    server,
    dataset,
    stored,
    warehouse,
    sync: (overrides = {}) =>
      syncFrom(server.url, warehouse, {
        secrets: { keys: { privateKey: privateKey() }, policyFor: () => 'plaintext' },
        concurrency: 2,
        ...overrides,
      }),
  };
}

describe('a walk waiting for its sealed values', () => {
  it('holds up no other walk: the others finish while it waits, then it is stored whole', async () => {
    const bed = await openBed('sqlite', 12);
    const others = ['users', 'chats', 'chat_messages'];
    const done: string[] = [];
    let releaseValues!: () => void;
    const othersDone = new Promise<void>((resolve) => (releaseValues = resolve));
    // Opens only once every other walk has ended: if waiting for values held up the other
    // walks, this run would never end.
    const inThread = new InThreadOpener({ privateKey: privateKey() });
    const opener: SealedValueOpener = {
      async open(policy, tokens, signal) {
        await othersDone;
        return inThread.open(policy, tokens, signal);
      },
      close: async () => undefined,
    };
    const resources = ['participant_data', ...others];
    const report = await bed.sync({
      resources,
      concurrency: 2,
      secrets: {
        keys: { privateKey: privateKey() },
        policyFor: () => 'plaintext',
        opener,
      },
      events: {
        onResourceDone: ({ resource }) => {
          done.push(resource);
          if (others.every((other) => done.includes(other))) releaseValues();
        },
      },
    });
    expect(report.status).toBe('ok');
    expect(done.at(-1)).toBe('participant_data');
    expect(done.slice(0, 3).sort()).toEqual([...others].sort());
    await expectWarehouseEqualsSource(bed.stored, bed.dataset, { resources });
  });
});

describe.each(splitDialects)('the order walks start in (%s)', (dialect) => {
  it('is the manifest order with one lane; with more, the longest last walks first, unknown ones before them', async () => {
    const bed = await openBed(dialect, 6);
    // In manifest order.
    const resources = ['users', 'tags', 'chats', 'sessions', 'chat_messages'];
    const startOrder = async (overrides: Partial<SyncOptions>) => {
      const started: string[] = [];
      const report = await bed.sync({
        resources,
        events: { onResourceStart: ({ resource }) => started.push(resource) },
        ...overrides,
      });
      expect(report.status).toBe('ok');
      return started;
    };
    const durations = async () =>
      parseWalkDurations(await bed.warehouse.bookkeeping.getState(WALK_DURATIONS_STATE_KEY));
    const setDurations = (value: object) =>
      bed.warehouse.bookkeeping.setState(WALK_DURATIONS_STATE_KEY, JSON.stringify(value));

    // Nothing known yet: manifest order; then every walk's time is kept, as a walk from the start.
    expect(await startOrder({ concurrency: 3 })).toEqual(resources);
    const first = await durations();
    expect(Object.keys(first.fromStart).sort()).toEqual([...resources].sort());
    expect(first.resumed).toEqual({});

    // A full refresh goes by the walks from the start; `tags`, never timed, goes first.
    await setDurations({
      fromStart: { users: 10, chats: 500, chat_messages: 900, sessions: 50 },
      resumed: {},
    });
    expect(await startOrder({ concurrency: 3, fullRefresh: FULL_REFRESH_ALL })).toEqual([
      'tags',
      'chat_messages',
      'chats',
      'sessions',
      'users',
    ]);

    // An incremental run by the walks from a cursor, or from the start when none is known.
    bed.dataset.insert('users', 2);
    await setDurations({
      fromStart: { users: 10, tags: 5, chats: 500, chat_messages: 900, sessions: 50 },
      resumed: { users: 1000, sessions: 1 },
    });
    expect(await startOrder({ concurrency: 2 })).toEqual([
      'users',
      'chat_messages',
      'chats',
      'tags',
      'sessions',
    ]);
    const after = await durations();
    expect(Object.keys(after.resumed).sort()).toEqual([...resources].sort());
    expect(after.fromStart.chats).toBe(500);

    // One lane: the manifest order, whatever is known.
    expect(await startOrder({ concurrency: 1 })).toEqual(resources);
    await expectWarehouseEqualsSource(bed.stored, bed.dataset, { resources });
  });
});

describe('the threads that open sealed values', () => {
  it('start with the first sealed page and stop when the walks end: done, or interrupted', async (context) => {
    if (!existsSync('/proc/self/task')) context.skip('counts threads in /proc/self/task (Linux)');
    const bed = await openBed('sqlite', 12);
    const resources = ['users', 'participant_data', 'llm_providers', 'chats'];
    const secrets = {
      keys: { privateKey: privateKey() },
      policyFor: () => 'plaintext' as const,
      openThreads: 2,
    };
    // The first run starts what stays (the warehouse's writer thread, Node's own).
    expect((await bed.sync({ resources, secrets })).status).toBe('ok');
    const settled = await settledThreads();

    let during = 0;
    const report = await bed.sync({
      resources,
      secrets,
      fullRefresh: FULL_REFRESH_ALL,
      events: {
        onPageWritten: ({ resource }) => {
          if (resource === 'participant_data') during = Math.max(during, threadsOfThisProcess());
        },
      },
    });
    expect(report.status).toBe('ok');
    expect(during).toBeGreaterThan(settled);
    await waitFor(() => threadsOfThisProcess() === settled, 'the threads to stop after the run');

    // Interrupted while values are being opened: the threads stop all the same.
    const controller = new AbortController();
    await expect(
      bed.sync({
        resources,
        secrets,
        fullRefresh: FULL_REFRESH_ALL,
        signal: controller.signal,
        events: {
          onPageWritten: ({ resource }) => {
            if (resource === 'participant_data') controller.abort(new Error('SIGTERM'));
          },
        },
      }),
    ).rejects.toBeInstanceOf(InterruptedError);
    await waitFor(() => threadsOfThisProcess() === settled, 'the threads to stop after the abort');
    expect((await bed.sync({ resources, secrets })).status).toBe('ok');
    await expectWarehouseEqualsSource(bed.stored, bed.dataset, { resources });
  });
});

describe.each(splitDialects)(
  'several walks and a pool of threads, through the CLI (%s)',
  (dialect) => {
    it('`--concurrency 3` with two threads stores an exact copy; a setting out of range is refused', async () => {
      const bed = await openBed(dialect, 14);
      const directory = temporaryDirectory();
      cleanups.push(() => directory.remove());
      const env = syncEnv(bed.server.url, bed.stored.env, {
        OCS_PAGE_SIZE: '4',
        OCS_SECRETS_OPEN_THREADS: '2',
        OCS_FILES_DIR: `${directory.path}/files`,
        OCS_LOG_LEVEL: 'debug',
      });
      const refused = await runCli(['--concurrency', '9', 'sync'], {
        ...env,
        OCS_SECRETS_OPEN_THREADS: '65',
      });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('concurrency (command-line flag)');
      expect(refused.stderr).toContain('an integer from 1 to 8');
      expect(refused.stderr).toContain('OCS_SECRETS_OPEN_THREADS (secrets.open_threads)');

      const synced = await runCli(['--concurrency', '3', 'sync'], env);
      expect(synced.code, synced.stderr).toBe(0);
      // Only several lanes order the walks.
      expect(synced.logs).toContain('Walks start longest first');
      await expectWarehouseEqualsSource(bed.stored, bed.dataset);
      const config = await runCli(['--concurrency', '3', 'config', '--json'], env);
      expect(JSON.parse(config.stdout).concurrency).toEqual({ value: 3, source: 'flag' });
    });
  },
);

describe.each(splitDialects)('a thread that stops in the middle of a walk (%s)', (dialect) => {
  it('fails that walk at its page, stores nothing past it, and the next run completes', async () => {
    const bed = await openBed(dialect, 20);
    const keys = { privateKey: privateKey() };
    // participant_data: 2 sealed fields a row, 5 rows a page, so 10 values a page, in 4 chunks
    // on one thread (3, 3, 3, 1); the thread stops at its tenth chunk, in the third page.
    process.env.OCS_TEST_THREAD_STOPS_AT = '10';
    const stopping = new OpenThreadPool(
      keys,
      1,
      new URL('./open-thread-that-stops.mjs', import.meta.url),
    );
    cleanups.push(async () => {
      delete process.env.OCS_TEST_THREAD_STOPS_AT;
      await stopping.close();
    });
    const resources = ['users', 'participant_data', 'chats'];
    const report = await bed.sync({
      resources,
      concurrency: 3,
      secrets: { keys, policyFor: () => 'plaintext', opener: stopping },
    });
    expect(report.status).toBe('partial');
    const failed = report.resources.find((resource) => resource.resource === 'participant_data')!;
    expect(failed).toMatchObject({ status: 'failed', pages: 2, rows: 10 });
    expect(failed.error).toContain(
      'A thread that opens sealed values stopped (it exited with code 7); the page was not stored.',
    );
    expect(failed.error).not.toMatch(/PRIVATE KEY|BEGIN/);
    expect(
      report.resources.filter((resource) => resource.status === 'ok').map((r) => r.resource),
    ).toEqual(expect.arrayContaining(['users', 'chats']));
    // The two whole pages before it, and not a row more.
    const stored = await bed.stored.readTable('participant_data');
    expect(stored).toHaveLength(10);

    delete process.env.OCS_TEST_THREAD_STOPS_AT;
    const rerun = await bed.sync({ resources, secrets: { keys, policyFor: () => 'plaintext' } });
    expect(rerun.status).toBe('ok');
    await expectWarehouseEqualsSource(bed.stored, bed.dataset, { resources });
  });
});
