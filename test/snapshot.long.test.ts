/**
 * `ocs-sync snapshot create|list|restore` through the CLI: a SQLite warehouse copied while a sync
 * writes it, into a bucket (s3rver) and a folder, listed, restored with its digest checked and
 * atomically, refused over a warehouse a process holds or from a changed snapshot, pruned to
 * `snapshot.keep`; PostgreSQL is pointed at pg_dump (exit 2).
 */
import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { faultOnce, startS3Server, type S3TestServer } from './s3-server.js';
import {
  createTestWarehouse,
  runCli,
  startCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  testDialects,
  waitFor,
} from './support.js';

const BUCKET = 'ocs-snapshots';
const DIR = `s3://${BUCKET}/team-a/snapshots`;

describe('warehouse snapshots', () => {
  let server: FakeServer;
  let s3: S3TestServer;
  let directory: ReturnType<typeof temporaryDirectory>;
  let env: Record<string, string>;

  beforeEach(async () => {
    server = await startFakeServer({
      dataset: createSampleDataset({ rowsPerResource: 40, seed: 4 }),
      teamPublicKeyPem: teamKeys().publicKey,
    });
    s3 = await startS3Server({ buckets: [BUCKET] });
    directory = temporaryDirectory();
    env = {
      ...syncEnv(server.url, { OCS_WAREHOUSE_URL: join(directory.path, 'team.db') }),
      ...s3.env(),
      OCS_FILES_ENABLED: 'false',
      OCS_SNAPSHOT_DIR: DIR,
      OCS_PAGE_SIZE: '10',
    };
  });
  afterEach(async () => {
    await s3.close();
    await server.close();
    directory.remove();
  });

  const list = async (extra: Record<string, string> = {}) => {
    const listed = await runCli(['snapshot', 'list', '--json'], { ...env, ...extra });
    expect(listed.code, listed.stderr).toBe(0);
    return JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
  };

  it('copies the warehouse while a sync writes it; list and restore give it back, digest checked', async () => {
    expect((await runCli(['sync'], env)).code).toBe(0);
    // A second sync (a full refresh, slowed down) is writing while the snapshot is taken.
    server.faults.failNext(20, { kind: 'latency', ms: 50 });
    const writing = runCli(['sync', '--full-refresh'], env);
    const created = await runCli(['snapshot', 'create', '--json'], env);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect((await writing).code).toBe(0);
    const made = JSON.parse(created.stdout);
    expect(made.id).toMatch(/^ocs-sync-\d{8}T\d{9}Z$/);
    expect(made.location).toBe(`${DIR}/${made.id}.db.gz`);

    const snapshots = await list();
    expect(snapshots).toEqual([
      {
        id: made.id,
        time: made.time,
        bytes: made.bytes,
        sha256: made.sha256,
        location: made.location,
      },
    ]);
    expect(Object.keys(snapshots[0]!)).toEqual(['id', 'time', 'bytes', 'sha256', 'location']);

    const restoredPath = join(directory.path, 'restored.db');
    const restored = await runCli(['snapshot', 'restore', made.id, '--to', restoredPath], env);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    const db = new Database(restoredPath, { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const runs = db.prepare('SELECT count(*) AS n FROM _ocs_runs').get() as { n: number };
      expect(runs.n).toBeGreaterThanOrEqual(1);
    } finally {
      db.close();
    }
    // The restored file is a warehouse ocs-sync opens and syncs into.
    const resumed = await runCli(['sync'], { ...env, OCS_WAREHOUSE_URL: restoredPath });
    expect(resumed.code).toBe(0);
  });

  it('a restore whose read the store cuts short resumes it, and restores the same warehouse', async () => {
    expect((await runCli(['sync'], env)).code).toBe(0);
    const made = JSON.parse((await runCli(['snapshot', 'create', '--json'], env)).stdout);
    s3.requests.length = 0;
    s3.fault = faultOnce(
      (request) => request.method === 'GET' && request.url.includes(`${made.id}.db.gz`),
      () => ({ cutResponseAfterBytes: 1000 }),
    );
    const restoredPath = join(directory.path, 'restored.db');
    const restored = await runCli(['snapshot', 'restore', made.id, '--to', restoredPath], env);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    expect(s3.requests.some((request) => request.headers.range === 'bytes=1000-')).toBe(true);
    const db = new Database(restoredPath, { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      db.close();
    }
  });

  it('refuses a warehouse a process holds, and a snapshot whose bytes changed', async () => {
    expect((await runCli(['sync'], env)).code).toBe(0);
    const made = JSON.parse((await runCli(['snapshot', 'create', '--json'], env)).stdout);
    const target = join(directory.path, 'held.db');
    expect((await runCli(['snapshot', 'restore', made.id, '--to', target], env)).code).toBe(0);

    const holder = new Database(target);
    holder.pragma('journal_mode = WAL');
    holder.prepare('SELECT count(*) FROM _ocs_runs').get();
    try {
      const refused = await runCli(['snapshot', 'restore', made.id, '--to', target], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        `Refusing to restore over ${target}: another process has it open`,
      );
    } finally {
      holder.close();
    }

    const key = `team-a/snapshots/${made.id}.db.gz`;
    const bytes = s3.objectBytes(BUCKET, key);
    bytes[bytes.length - 5] = bytes[bytes.length - 5]! ^ 0xff;
    writeFileSync(join(s3.directory, BUCKET, `${key}._S3rver_object`), bytes);
    const other = join(directory.path, 'other.db');
    const damaged = await runCli(['snapshot', 'restore', made.id, '--to', other], env);
    expect(damaged.code).toBe(1);
    expect(damaged.stderr).toContain('does not match its SHA-256');
    expect(damaged.stderr).toContain('nothing was restored');
    expect(() => new Database(other, { fileMustExist: true })).toThrow();
  });

  it('keeps the newest snapshot.keep, in a folder as in a bucket', async () => {
    expect((await runCli(['sync'], env)).code).toBe(0);
    const folder = { OCS_SNAPSHOT_DIR: join(directory.path, 'snapshots'), OCS_SNAPSHOT_KEEP: '2' };
    const ids: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const made = await runCli(['snapshot', 'create', '--json'], { ...env, ...folder });
      expect(made.code, made.stderr).toBe(0);
      ids.push(JSON.parse(made.stdout).id);
    }
    expect((await list(folder)).map((item) => item.id)).toEqual(ids.slice(1));
  });

  it('the daemon takes one on snapshot.schedule, beside its syncs', async () => {
    const folder = join(directory.path, 'scheduled');
    const daemonEnv = {
      ...env,
      OCS_SNAPSHOT_DIR: folder,
      OCS_HEALTH_LISTEN: 'off',
      OCS_SCHEDULE: '0 0 1 1 *',
    };
    const daemon = startCli(['daemon'], { ...daemonEnv, OCS_SNAPSHOT_SCHEDULE: '*/2 * * * * *' });
    try {
      await waitFor(
        async () => (await list({ OCS_SNAPSHOT_DIR: folder })).length >= 1 || undefined,
        'a scheduled snapshot',
        60_000,
      );
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
    expect(daemon.logs()).toContain('Snapshots scheduled');
    expect(daemon.logs()).not.toContain('snapshot failed');
  });

  it.runIf(testDialects.includes('postgres'))(
    'on PostgreSQL says to use pg_dump, and exits 2',
    async () => {
      const warehouse = await createTestWarehouse('postgres');
      try {
        const refused = await runCli(['snapshot', 'create'], { ...env, ...warehouse.env });
        expect(refused.code).toBe(2);
        expect(refused.stderr).toContain('pg_dump');
      } finally {
        await warehouse.dispose();
      }
    },
  );
});
