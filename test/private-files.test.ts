/**
 * Files that hold team data are private (issue 26): the SQLite warehouse and its -wal and -shm,
 * the blob store, Parquet exports are 0600 in 0700 folders, or what `data_file_mode` says, set
 * exactly whatever the umask; `check` warns about wider ones. The umask is 0 here, so every mode
 * seen is one ocs-sync set.
 */
import Database from 'better-sqlite3';
import { chmodSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { writePrivateFile } from '../src/private-files.js';
import { storedFiles } from './files-support.js';
import {
  closeCliTestBed,
  openCliTestBed,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  type CliTestBed,
} from './support.js';

const modeOf = (path: string) => statSync(path).mode & 0o777;

let umask: number;
beforeAll(() => {
  umask = process.umask(0);
});
afterAll(() => {
  process.umask(umask);
});

describe.each(splitDialects)('private files (%s)', (dialect) => {
  let bed: CliTestBed;
  let server: FakeServer;

  beforeEach(async () => {
    bed = await openCliTestBed(dialect);
    server = await startFakeServer({
      dataset: createSampleDataset({ rowsPerResource: 12, seed: 5 }),
      teamPublicKeyPem: teamKeys().publicKey,
    });
  });
  afterEach(() => closeCliTestBed(bed, server));

  const env = (extra: Record<string, string> = {}) => ({
    ...syncEnv(server.url, bed.warehouse.env),
    ...extra,
  });

  /** Every folder and file under `root`, the root included. */
  const tree = (root: string): { folders: string[]; files: string[] } => {
    const folders = [root];
    const files: string[] = [];
    for (let index = 0; index < folders.length; index += 1) {
      for (const entry of readdirSync(folders[index]!, { withFileTypes: true })) {
        const path = join(folders[index]!, entry.name);
        if (entry.isDirectory()) folders.push(path);
        else files.push(path);
      }
    }
    return { folders, files };
  };

  it('the warehouse, its -wal and -shm, the blob store and Parquet exports are 0600 in 0700 folders; check warns about wider ones', async () => {
    const synced = await runCli(['sync'], env());
    expect(synced.code, synced.logs.slice(-1500)).toBe(0);
    if (dialect === 'sqlite') {
      const file = bed.warehouse.env.OCS_WAREHOUSE_URL!;
      expect(modeOf(file)).toBe(0o600);
      // SQLite gives its side files the database file's mode.
      const db = new Database(file);
      try {
        db.exec('CREATE TABLE IF NOT EXISTS t (x); INSERT INTO t VALUES (1)');
        for (const side of [`${file}-wal`, `${file}-shm`]) {
          expect(existsSync(side), side).toBe(true);
          expect(modeOf(side), side).toBe(0o600);
        }
      } finally {
        db.close();
      }
    }
    const blobs = tree(bed.warehouse.filesDir);
    expect(blobs.files.length).toBeGreaterThan(0);
    expect(blobs.folders.length).toBeGreaterThan(2);
    for (const folder of blobs.folders) expect(modeOf(folder), folder).toBe(0o700);
    for (const blob of blobs.files) expect(modeOf(blob), blob).toBe(0o600);

    const exportDir = join(bed.directory.path, 'exports', 'parquet');
    const exported = await runCli(
      ['export', 'parquet', exportDir, '--resources', 'llm_providers,chat_messages'],
      env(),
    );
    expect(exported.code, exported.stderr).toBe(0);
    expect(modeOf(exportDir)).toBe(0o700);
    expect(modeOf(join(bed.directory.path, 'exports'))).toBe(0o700);
    const parquet = readdirSync(exportDir);
    expect(parquet.sort()).toEqual(['chat_messages.parquet', 'llm_providers.parquet']);
    for (const name of parquet) expect(modeOf(join(exportDir, name)), name).toBe(0o600);

    const clean = await runCli(['check'], env());
    expect(clean.stdout).toMatch(/✓ files private\s+files 0600, folders 0700 \(\d+ checked\)/);

    // Made wider since (a copy, an older version): a warning naming each, with the fix.
    const blob = storedFiles(bed.warehouse.filesDir)[0]!;
    chmodSync(blob, 0o644);
    chmodSync(bed.warehouse.filesDir, 0o755);
    const warned = await runCli(['check'], env());
    expect(warned.code, warned.stdout).toBe(0);
    expect(warned.stdout).toContain(
      `wider than data_file_mode allows (files 0600, folders 0700): ${bed.warehouse.filesDir} (0755), ${blob} (0644)`,
    );
    expect(warned.stdout).toMatch(/^! files private {2,}wider/m);
    expect(warned.stdout).toContain('chmod -R go-rwx');
    const json = JSON.parse((await runCli(['check', '--json'], env())).stdout) as {
      ok: boolean;
      checks: Array<{ name: string; status: string }>;
    };
    expect(json.ok).toBe(true);
    expect(json.checks.find((check) => check.name === 'files private')?.status).toBe('warning');
  });

  it('data_file_mode sets another mode for every file and folder it creates', async () => {
    const shared = env({ OCS_DATA_FILE_MODE: '0640' });
    const synced = await runCli(['sync', '--resources', 'files,users'], shared);
    expect(synced.code, synced.logs.slice(-1500)).toBe(0);
    if (dialect === 'sqlite') expect(modeOf(bed.warehouse.env.OCS_WAREHOUSE_URL!)).toBe(0o640);
    const blobs = tree(bed.warehouse.filesDir);
    // With PostgreSQL the test made files.dir itself: a folder that exists keeps its mode.
    const created = dialect === 'postgres' ? blobs.folders.slice(1) : blobs.folders;
    for (const folder of created) expect(modeOf(folder), folder).toBe(0o750);
    for (const blob of blobs.files) expect(modeOf(blob), blob).toBe(0o640);
    const exportDir = join(bed.directory.path, 'shared-export');
    expect(
      (await runCli(['export', 'parquet', exportDir, '--resources', 'users'], shared)).code,
    ).toBe(0);
    expect(modeOf(exportDir)).toBe(0o750);
    expect(modeOf(join(exportDir, 'users.parquet'))).toBe(0o640);
    expect((await runCli(['check'], shared)).stdout).toMatch(
      /✓ files private\s+files 0640, folders 0750/,
    );

    const wrong = await runCli(['status'], { ...shared, OCS_DATA_FILE_MODE: '0755' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(
      'OCS_DATA_FILE_MODE (data_file_mode) must not set execute bits (folders get them where r is set)',
    );
    const unreadable = await runCli(['status'], { ...shared, OCS_DATA_FILE_MODE: '0400' });
    expect(unreadable.stderr).toContain('must let the owner read and write (0600 at least)');
  });
});

describe('writing a small private file (checkpoints)', () => {
  it('is whole or absent, with the file mode, in a folder made private', async () => {
    const umaskBefore = process.umask(0o022);
    const directory = temporaryDirectory();
    try {
      const path = join(directory.path, 'audit', 'checkpoint.json');
      await writePrivateFile(path, '{"entry": 1}');
      expect(modeOf(path)).toBe(0o600);
      expect(modeOf(join(directory.path, 'audit'))).toBe(0o700);
      await writePrivateFile(path, '{"entry": 2}');
      expect(readdirSync(join(directory.path, 'audit'))).toEqual(['checkpoint.json']);
      const { readFileSync } = await import('node:fs');
      expect(readFileSync(path, 'utf8')).toBe('{"entry": 2}');
    } finally {
      process.umask(umaskBefore);
      directory.remove();
    }
  });
});
