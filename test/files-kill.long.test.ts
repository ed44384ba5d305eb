/**
 * A real `ocs-sync sync` process killed (SIGKILL: no chance to clean up) at several points of its
 * downloads, on every dialect: no recorded blob is absent or partial, no final name holds partial
 * bytes, and the next run fetches exactly what was not recorded, losing and doubling nothing.
 * SIGINT mid-download stops cleanly with exit 130.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import {
  FILE_CONTENT_ENDPOINT,
  startFakeServer,
  type FakeServer,
  type FileContentProgress,
} from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { expectBlobsMatchServer, readLedger, sha256OfFile, storedFiles } from './files-support.js';
import {
  createTestWarehouse,
  runCli,
  syncEnv,
  teamKeys,
  testDialects,
  type TestWarehouse,
} from './support.js';
import { CLI_FROM_SOURCE } from './support.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

describe.each(testDialects)('kills during file downloads (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let child: ChildProcess | undefined;

  const env = () => ({ ...syncEnv(server.url, warehouse.env), OCS_FILES_CONCURRENCY: '3' });

  /** Runs `sync` as its own process; `killWhen` decides, per chunk served, when to send `signal`. */
  const syncKilled = async (
    signal: NodeJS.Signals,
    killWhen: (progress: FileContentProgress) => boolean,
  ): Promise<number | null> => {
    let sent = false;
    server.options.onFileContent = async (progress) => {
      if (sent || !killWhen(progress)) return;
      sent = true;
      child?.kill(signal);
      // Hold this body back while the signal lands.
      await new Promise((resolve) => setTimeout(resolve, 100));
    };
    child = spawn(process.execPath, [...CLI_FROM_SOURCE, 'sync'], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env() },
      stdio: 'ignore',
    });
    const code = await new Promise<number | null>((resolve) =>
      child!.on('exit', (exitCode) => resolve(exitCode)),
    );
    server.options.onFileContent = undefined;
    expect(sent, 'the process was still downloading when the signal was sent').toBe(true);
    return code;
  };

  /** What a killed run left: only complete blobs under final names, each recorded one present. */
  const expectConsistentAfterKill = async (): Promise<Set<string>> => {
    const ledger = await readLedger(warehouse);
    for (const path of storedFiles(warehouse.filesDir)) {
      const name = path.split('/').pop()!;
      if (name.startsWith('.partial-')) continue;
      expect(sha256OfFile(path), `${path} is complete`).toBe(name);
    }
    const verify = await runCli(['files', 'verify'], warehouse.env);
    expect(verify.stdout).toContain('all intact');
    expect(verify.code).toBe(0);
    return new Set(ledger.map((row) => row.file_id));
  };

  /** The next run fetches exactly the files not yet recorded, and ends equal to the server. */
  const expectResumed = async (recorded: Set<string>) => {
    server.requests.length = 0;
    const result = await runCli(['sync'], env());
    expect(result.code).toBe(0);
    const requested = server.requests
      .filter((request) => request.endpoint === FILE_CONTENT_ENDPOINT)
      .map((request) => request.path.split('/')[3]!);
    const expected = dataset
      .rows('files')
      .map((row) => String(row.id))
      .filter((id) => !recorded.has(id));
    expect(expected.length, 'the kill left files to fetch').toBeGreaterThan(0);
    expect(requested.sort()).toEqual(expected.sort());
    await expectBlobsMatchServer(warehouse, dataset);
    expect(storedFiles(warehouse.filesDir).some((path) => path.includes('.partial-'))).toBe(false);
  };

  beforeEach(async () => {
    dataset = createSampleDataset({ rowsPerResource: 40, seed: 21 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    warehouse = await createTestWarehouse(dialect);
  });
  afterEach(async () => {
    child?.kill('SIGKILL');
    child = undefined;
    await server.close();
    await warehouse.dispose();
  });

  it('SIGKILL half-way through a several-MB body', async () => {
    await syncKilled(
      'SIGKILL',
      (progress) => progress.size > 1 << 20 && progress.sentBytes > progress.size / 2,
    );
    await expectResumed(await expectConsistentAfterKill());
  });

  it('SIGKILL as the first body starts', async () => {
    await syncKilled('SIGKILL', () => true);
    await expectResumed(await expectConsistentAfterKill());
  });

  it('SIGKILL right after some bodies completed (while storing and recording)', async () => {
    let completed = 0;
    await syncKilled('SIGKILL', (progress) => {
      if (progress.sentBytes === progress.size) completed += 1;
      return completed === 7;
    });
    await expectResumed(await expectConsistentAfterKill());
  });

  it('SIGINT mid-download stops with 130 and the run is recorded interrupted', async () => {
    const code = await syncKilled(
      'SIGINT',
      (progress) => progress.size > 1 << 20 && progress.sentBytes > progress.size / 4,
    );
    expect(code).toBe(130);
    const runs = await warehouse.query('SELECT status FROM "_ocs_runs"');
    expect(runs.map((run) => run.status)).toEqual(['interrupted']);
    await expectResumed(await expectConsistentAfterKill());
  });
});
