/**
 * The chaos soak's own parts (bench/chaos*.ts), quickly: its verdict on a warehouse finds every
 * kind of wrong row it is there to find, its flags, its supervisor's back-off and end plans. The
 * soak itself runs in chaos-soak.long.test.ts.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareFileContents, compareWithServer } from '../bench/chaos-compare.js';
import { drawEnd, restartDelayMs } from '../bench/chaos-supervisor.js';
import { parseChaosArgs } from '../bench/chaos.js';
import { main } from '../bench/bench.js';
import type { ServerTruth } from '../bench/soak-server-process.js';
import type { StoredRow } from '../bench/warehouse-rows.js';
import { SeededRandom } from '../src/fake-server/random.js';
import { blobPath } from '../src/files/blob-store.js';
import { temporaryDirectory } from './support.js';

const row = (id: number, text = `row ${id}`): StoredRow => ({ id, text });

/** A warehouse as `compareWithServer` reads it: live rows, and the ones marked deleted. */
function warehouse(tables: Record<string, { live: StoredRow[]; deleted?: StoredRow[] }>) {
  return async (table: string, includeDeleted: boolean) => {
    const { live, deleted = [] } = tables[table] ?? { live: [] };
    if (!tables[table]) throw new Error(`no such table: ${table}`);
    const rows = includeDeleted ? [...live, ...deleted] : live;
    return rows.sort((a, b) => Number(a.id) - Number(b.id));
  };
}

function truth(tables: Record<string, StoredRow[]>, extra: Partial<ServerTruth> = {}): ServerTruth {
  return { tables, removed: {}, replacedFiles: [], fileContents: {}, ...extra };
}

describe("the chaos soak's verdict on a warehouse", () => {
  it('passes a warehouse that equals the server, deleted rows marked', async () => {
    const served = truth({ chats: [row(1), row(3)], tags: [] }, { removed: { chats: ['2'] } });
    const read = warehouse({ chats: { live: [row(1), row(3)], deleted: [row(2)] } });
    expect(await compareWithServer(served, read, 'full refresh')).toEqual({
      tables: 1,
      rows: 2,
      deletedMarked: 1,
      awaitingFullRefresh: 0,
      problems: [],
    });
  });

  it('names a lost row, a changed one, a doubled id, a phantom and an unmarked deletion', async () => {
    const served = truth(
      { chats: [row(1), row(2), row(4)], users: [row(7)] },
      { removed: { chats: ['3', '5'] } },
    );
    const read = warehouse({
      chats: { live: [row(1, 'stale'), row(3), row(6)], deleted: [row(4), row(5), row(5)] },
      users: { live: [row(7)] },
    });
    const { problems } = await compareWithServer(served, read, 'full refresh');
    expect(problems).toEqual([
      'chats: ids stored more than once: 5',
      'chats 1: differs: text: "stale" in the warehouse, "row 1" on the server',
      'chats 2: lost (not in the warehouse, the server has it)',
      'chats 4: lost (marked deleted, the server has it)',
      'chats 3: deleted on the server, not marked deleted after a full refresh',
      'chats 6: live in the warehouse, never on the server',
    ]);
  });

  it('after an incremental sync, allows what only a full refresh can know, nothing else', async () => {
    const served = truth(
      {
        files: [
          { id: 1, content_size: 9000 },
          { id: 2, content_size: 10 },
        ],
        chats: [row(1)],
      },
      { removed: { chats: ['2'] }, replacedFiles: ['1'] },
    );
    const read = warehouse({
      files: {
        live: [
          { id: 1, content_size: 10 },
          { id: 2, content_size: 11 },
        ],
      },
      chats: { live: [row(1), row(2)] },
    });
    const incremental = await compareWithServer(served, read, 'incremental');
    expect(incremental.awaitingFullRefresh).toBe(1);
    expect(incremental.problems).toEqual([
      'files 2: differs: content_size: 11 in the warehouse, 10 on the server',
    ]);
    const full = await compareWithServer(served, read, 'full refresh');
    expect(full.problems).toEqual([
      'files 1: differs: content_size: 10 in the warehouse, 9000 on the server',
      'files 2: differs: content_size: 11 in the warehouse, 10 on the server',
      'chats 2: deleted on the server, not marked deleted after a full refresh',
    ]);
  });

  it('says a table it cannot read is a problem only when the server has rows for it', async () => {
    const read = warehouse({});
    expect((await compareWithServer(truth({ tags: [] }), read, 'incremental')).problems).toEqual(
      [],
    );
    expect(
      (await compareWithServer(truth({ tags: [row(1)] }), read, 'incremental')).problems,
    ).toEqual(['tags: cannot be read (no such table: tags)']);
  });

  it('checks every file against the bytes the server serves, and its blob on disk', () => {
    const store = temporaryDirectory();
    try {
      const blob = (text: string) => {
        const sha256 = createHash('sha256').update(text).digest('hex');
        const path = blobPath(store.path, sha256);
        mkdirSync(dirname(path), { recursive: true });
        return { sha256, size: text.length, path };
      };
      const kept = blob('kept');
      writeFileSync(kept.path, 'kept');
      const corrupt = blob('corrupt');
      writeFileSync(corrupt.path, 'not what its name says');
      const absent = blob('absent');
      const served = truth(
        {},
        {
          fileContents: {
            '1': { sha256: kept.sha256, size: kept.size },
            '2': { sha256: corrupt.sha256, size: corrupt.size },
            '3': { sha256: absent.sha256, size: absent.size },
            '4': null,
            '5': { sha256: kept.sha256, size: kept.size },
          },
        },
      );
      const ledger = [
        { fileId: '1', status: 'ok', sha256: kept.sha256, size: kept.size },
        { fileId: '2', status: 'ok', sha256: corrupt.sha256, size: corrupt.size },
        { fileId: '3', status: 'ok', sha256: absent.sha256, size: absent.size },
        { fileId: '4', status: 'missing', sha256: null, size: null },
        { fileId: '5', status: 'failed', sha256: null, size: null },
        { fileId: '6', status: 'ok', sha256: kept.sha256, size: kept.size },
      ];
      expect(compareFileContents(served, ledger, store.path)).toEqual({
        files: 5,
        problems: [
          'file 2: its blob holds other bytes',
          'file 3: its blob is missing',
          `file 5: failed, the server serves ${kept.sha256.slice(0, 12)} 4 bytes`,
          'file 6: in the ledger, not on the server',
        ],
      });
    } finally {
      store.remove();
    }
  });
});

describe("the chaos soak's supervisor and flags", () => {
  it('backs off as Kubernetes does, scaled down: doubled per death before a success, capped', () => {
    expect([0, 1, 2, 3, 4, 5].map((deaths) => restartDelayMs(1000, deaths))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
  });

  it('plans each end from its seed: -9 or SIGTERM, at start, in a run or later, alike often', () => {
    const plans = (seed: number) => {
      const random = new SeededRandom(seed);
      return Array.from({ length: 600 }, () => drawEnd(random, { stopShare: 0.25 }));
    };
    expect(plans(34)).toEqual(plans(34));
    const drawn = plans(34);
    const share = (test: (plan: (typeof drawn)[0]) => boolean) =>
      drawn.filter(test).length / drawn.length;
    expect(share((plan) => plan.signal === 'SIGTERM')).toBeCloseTo(0.25, 1);
    for (const at of ['start', 'run', 'later']) {
      expect(share((plan) => plan.at === at)).toBeCloseTo(1 / 3, 1);
    }
    for (const plan of drawn) {
      expect(plan.fraction).toBeGreaterThanOrEqual(0);
      expect(plan.fraction).toBeLessThan(1);
    }
  });

  it('takes its flags, refuses bad ones with its usage, and is reached as soak --chaos', async () => {
    expect(parseChaosArgs(['--chaos'])).toMatchObject({
      minutes: 10,
      scheduleSeconds: 5,
      fullRefreshMinutes: 1,
      faultRate: 0.1,
      killSeconds: 20,
      stopShare: 0.25,
      graceSeconds: 10,
      audit: false,
    });
    expect(parseChaosArgs(['--no-pid-namespace']).pidNamespace).toBe(false);
    expect(() => parseChaosArgs(['--stop-share', '2'])).toThrow(
      /--stop-share must be a share from 0 to 1, not "2"\.\nUsage: npm run bench -- soak --chaos/,
    );
    expect(() => parseChaosArgs(['--window-minutes', '1'])).toThrow(/Unknown option/);
    let progress = '';
    const code = await main(['soak', '--chaos', '--kill-seconds', 'often'], {
      out: () => undefined,
      progress: (text) => (progress += text),
    });
    expect(code).toBe(2);
    expect(progress).toMatch(/--kill-seconds must be a positive number/);
  });
});
