/**
 * Real SIGINT and SIGTERM sent to a real `ocs-sync` process mid-walk, on every dialect: the page
 * in flight commits or rolls back, the lock is released, and the next run resumes to exactly the
 * source. (The in-process tests abort through an AbortSignal; this proves the wiring to the OS.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  createTestWarehouse,
  expectWarehouseEqualsSource,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  testDialects,
  type TestWarehouse,
} from './support.js';
import { CLI_FROM_SOURCE } from './support.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

interface Finished {
  code: number | null;
  stderr: string;
}

function startCli(
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; finished: Promise<Finished> } {
  const child = spawn(process.execPath, [...CLI_FROM_SOURCE, ...args], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const finished = new Promise<Finished>((resolve) =>
    child.on('exit', (code) => resolve({ code, stderr })),
  );
  return { child, finished };
}

describe.each(testDialects)('real signals to an ocs-sync process (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let running: ChildProcess | undefined;
  let directory: ReturnType<typeof temporaryDirectory>;
  /**
   * The stopped run is recorded as interrupted, and the next one (which would wait for the lock
   * and exit 3 had the stopped process kept it) resumes to exactly the source.
   */
  const expectInterruptedThenResumed = async () => {
    const runs = await warehouse.query(`SELECT status FROM "_ocs_runs" ORDER BY id`);
    expect(runs.map((run) => run.status)).toEqual(['interrupted']);
    server.options.onPageServed = undefined;
    const configFile = join(directory.path, 'no-lock-wait.yaml');
    writeFileSync(configFile, 'lock:\n  wait_seconds: 0\n');
    expect((await runCli(['--config', configFile, 'sync'], env())).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  };

  const env = () => ({
    ...syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '7' }),
    OCS_LOG_LEVEL: 'info',
  });
  /** Sends `signal` to the process once the server has produced `pages` pages. */
  const signalAfterPages = (pages: number, signal: NodeJS.Signals) => {
    let served = 0;
    server.options.onPageServed = () => {
      served += 1;
      if (served === pages) running?.kill(signal);
    };
  };

  beforeEach(async () => {
    dataset = createSampleDataset({ rowsPerResource: 30, seed: 12 });
    // Slow pages, so the process is surely mid-walk when the signal lands.
    server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      pageLatencyMs: 20,
    });
    warehouse = await createTestWarehouse(dialect);
    directory = temporaryDirectory();
  });
  afterEach(async () => {
    running?.kill('SIGKILL');
    running = undefined;
    await server.close();
    await warehouse.dispose();
    directory.remove();
  });

  it('sync: SIGINT stops after the page in flight, exits 130, and the next run resumes exactly', async () => {
    const { child, finished } = startCli(['sync'], env());
    running = child;
    signalAfterPages(8, 'SIGINT');
    const result = await finished;
    expect(result.code).toBe(130);
    expect(result.stderr).toMatch(/interrupted; every committed page is kept/);
    await expectInterruptedThenResumed();
  });

  it('daemon: SIGTERM mid-run exits 0, leaves the warehouse consistent and the lock free', async () => {
    const { child, finished } = startCli(['daemon'], {
      ...env(),
      OCS_HEALTH_LISTEN: '127.0.0.1:0',
      OCS_SCHEDULE: '0 0 1 1 *',
      OCS_FULL_REFRESH_SCHEDULE: 'off',
    });
    running = child;
    signalAfterPages(8, 'SIGTERM');
    const result = await finished;
    expect(result.code).toBe(0);
    await expectInterruptedThenResumed();
  });
});
