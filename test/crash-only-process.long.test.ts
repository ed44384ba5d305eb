/**
 * Crash-only, through the CLI as a real process on every dialect: whatever kills or breaks a run,
 * the process ends cleanly and says why, and the next start recovers by itself.
 *
 * - kill -9, then a restart as the same pid on the same host (pid 1 of a PID namespace, as in a
 *   container): the lock died with its process, the restart runs at once and closes the dead run
 *   as `interrupted`; a second live process, same pid and host, is still refused, and SIGTERM
 *   while waiting for the lock ends the wait at once.
 * - An uncaught exception or unhandled rejection anywhere (injected from outside the program,
 *   run-cli-with-fault.ts): exit 1, one line, the run recorded as failed, the lock released.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exportParquet } from '../src/export/parquet.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  expectWarehouseEqualsSource,
  openCliTestBed,
  closeCliTestBed,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  testDialects,
  type CliTestBed,
} from './support.js';
import {
  expectDaemonStartToRedoFullRefresh,
  holdAPage as holdPage,
  pidNamespaceUnavailable,
  startCliProcess,
  type CliProcess,
  type Finished,
} from './crash-support.js';

const noPidNamespace = pidNamespaceUnavailable();

/** What `check --json` says of the writer lock. */
function lockCheck(check: { stdout: string }): string | undefined {
  const { checks } = JSON.parse(check.stdout) as {
    checks: Array<{ name: string; detail: string }>;
  };
  return checks.find((result) => result.name === 'writer lock free')?.detail;
}
if (noPidNamespace) console.warn(noPidNamespace);

/** Exit 1, and stderr one line (no stack, no log line) that says what failed. */
function expectOneLineExit1(crashed: Finished, line: RegExp): void {
  expect(crashed.code, crashed.stderr).toBe(1);
  const lines = crashed.stderr.trim().split('\n');
  expect(lines, crashed.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(line);
}

describe.each(testDialects)(
  'crash-only: the process ends cleanly, the next start recovers (%s)',
  (dialect) => {
    let server: FakeServer;
    let dataset: FakeDataset;
    let bed: CliTestBed;
    const started: CliProcess[] = [];

    const env = (extra: Record<string, string> = {}) => ({
      ...syncEnv(server.url, bed.warehouse.env, { OCS_PAGE_SIZE: '7' }),
      OCS_CONFIG: bed.configFile,
      OCS_LOG_LEVEL: 'info',
      ...extra,
    });
    const start = (
      args: string[],
      options: Parameters<typeof startCliProcess>[2] = {},
      extra = {},
    ) => {
      const cli = startCliProcess(args, env(extra), options);
      started.push(cli);
      return cli;
    };
    const runs = () =>
      bed.warehouse.query('SELECT id, status, error, finished_at FROM "_ocs_runs" ORDER BY id');
    /** A sync that will not wait for the lock: it runs only if nothing holds it. */
    const syncNow = async () => {
      const result = await runCli(['sync'], { ...env(), OCS_CONFIG: noWaitConfig() });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      await expectWarehouseEqualsSource(bed.warehouse, dataset);
    };
    const noWaitConfig = () => {
      const file = join(bed.directory.path, 'no-lock-wait.yaml');
      writeFileSync(file, 'lock:\n  wait_seconds: 0\n');
      return file;
    };
    const holdAPage = () => holdPage(server);

    beforeEach(async () => {
      dataset = createSampleDataset({ rowsPerResource: 30, seed: 34 });
      server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
      bed = await openCliTestBed(dialect, 'lock:\n  wait_seconds: 30\n');
    });
    afterEach(async () => {
      for (const cli of started.splice(0)) {
        cli.child.kill('SIGKILL');
        await cli.finished;
      }
      server.options.onPageServed = undefined;
      await closeCliTestBed(bed, server);
    });

    it.skipIf(noPidNamespace)(
      'kill -9, then a restart as the same pid on the same host runs at once and closes the dead run as interrupted',
      async () => {
        const { reached } = holdAPage();
        const first = start(['sync'], { pidNamespace: true });
        await reached;
        const [holder] = await bed.warehouse.query('SELECT pid, host FROM "_ocs_lock"');
        expect({ pid: Number(holder?.pid), host: holder?.host }).toEqual({
          pid: 1,
          host: hostname(),
        });
        await first.killHard();
        server.options.onPageServed = undefined;

        // Before any restart, what an operator sees: the run is dead, not running.
        const status = await runCli(['status'], env());
        expect(status.code).toBe(4);
        expect(status.stdout).toMatch(/Last run: +#1 initial interrupted .*end not recorded/);
        expect(status.stdout).toMatch(/end not recorded, \d+ rows: Its process ended without/);
        expect(lockCheck(await runCli(['check', '--json'], env()))).toMatch(
          new RegExp(`^free \\(pid 1 on ${hostname()} ended without releasing it`),
        );

        // Pid 1 on this host again, with a fresh record: it does not wait for its dead self.
        const second = start(['sync'], { pidNamespace: true }, { OCS_CONFIG: noWaitConfig() });
        const result = await second.finished;
        expect(result.code, result.stderr).toBe(0);
        expect(result.stderr).toMatch(
          /Closed run 1 as interrupted: its process ended without recording its end/,
        );
        await expectWarehouseEqualsSource(bed.warehouse, dataset);
        const [dead, next] = await runs();
        expect(dead?.status).toBe('interrupted');
        expect(String(dead?.error)).toMatch(/^Closed by the next start \(pid 1 on /);
        expect(dead?.finished_at).not.toBeNull();
        expect(next?.status).toBe('ok');
        expect(await bed.warehouse.query('SELECT pid FROM "_ocs_lock"')).toEqual([]);

        // What an operator reads: `runs` says who closed it, `status` shows the last run ok.
        const listed = await runCli(['runs'], env());
        expect(listed.stdout).toMatch(/interrupted .*Closed by the next start/);
        expect((await runCli(['status'], env())).code).toBe(0);
      },
    );

    it.skipIf(noPidNamespace)(
      'a second live process with the same pid on the same host is refused; SIGTERM ends a wait for the lock at once',
      async () => {
        const { reached, release } = holdAPage();
        const first = start(['sync'], { pidNamespace: true });
        await reached;
        const second = start(['sync'], { pidNamespace: true }, { OCS_CONFIG: noWaitConfig() });
        const refused = await second.finished;
        expect(refused.code).toBe(3);
        expect(refused.stderr).toMatch(
          new RegExp(`Another ocs-sync \\(pid 1 on ${hostname()}, since \\d{4}-`),
        );
        // `check` says who holds it, without disturbing it.
        expect(lockCheck(await runCli(['check', '--json'], env()))).toMatch(/^held by pid 1 on /);

        // Ten minutes of waiting, unless the signal is heard: it is, at once.
        writeFileSync(bed.configFile, 'lock:\n  wait_seconds: 600\n');
        const waiting = start(['sync'], { pidNamespace: true });
        await waiting.stderrMatches(/Waiting up to 600 s for the writer lock/);
        waiting.signal('SIGTERM');
        const stopped = await waiting.finished;
        expect(stopped.code).toBe(130);
        expect(stopped.stderr).toMatch(
          /Stopped while waiting for the writer lock; nothing was written/,
        );

        release();
        expect((await first.finished).code).toBe(0);
        await expectWarehouseEqualsSource(bed.warehouse, dataset);
        expect((await runs()).map((run) => run.status)).toEqual(['ok']);
      },
    );

    it("a full refresh stopped by SIGTERM (a deploy at 03:00 on Sunday): the daemon's next start runs it again, so the deletions it was to mark are not left for a week", async () => {
      await syncNow();
      const gone = dataset.ids('chat_messages').slice(0, 3);
      dataset.remove('chat_messages', gone);
      const { reached } = holdAPage();
      const stop = new AbortController();
      const stopped = runCli(['sync', '--full-refresh'], env(), { signal: stop.signal });
      await reached;
      stop.abort();
      server.options.onPageServed = undefined;
      expect((await stopped).code).toBe(130);
      await expectDaemonStartToRedoFullRefresh(env(), bed.warehouse, dataset, gone);
    });

    it('an uncaught exception mid-sync: exit 1 with one line, the run recorded as failed, the lock released', async () => {
      const crashed = await start(
        ['sync'],
        { fault: 'throw-after-responses:12' },
        {
          OCS_LOG_LEVEL: 'error',
        },
      ).finished;
      expectOneLineExit1(
        crashed,
        /^ocs-sync: stopped by an unexpected error \(an uncaught exception\): TypeError: injected fault \(test\)\. Run 1 is recorded as failed\. Every committed page is kept; the next run resumes from there\.$/,
      );
      const [run] = await runs();
      expect(run?.status).toBe('failed');
      expect(run?.error).toBe(
        'Stopped by an unexpected error (an uncaught exception): TypeError: injected fault (test)',
      );
      expect(await bed.warehouse.query('SELECT pid FROM "_ocs_lock"')).toEqual([]);
      await syncNow();
      expect((await runs()).map((r) => r.status)).toEqual(['failed', 'ok']);
    });

    // The guard is the same for every command and dialect; the sync's test above runs on each.
    it.runIf(dialect === 'sqlite')(
      'an unhandled rejection in the daemon: exit 1 with one line, the run recorded as failed',
      async () => {
        const crashed = await start(
          ['daemon'],
          { fault: 'reject-after-responses:12' },
          {
            OCS_LOG_LEVEL: 'error',
            OCS_HEALTH_LISTEN: '127.0.0.1:0',
            OCS_SCHEDULE: '0 0 1 1 *',
            OCS_FULL_REFRESH_SCHEDULE: 'off',
          },
        ).finished;
        expectOneLineExit1(
          crashed,
          /^ocs-sync: stopped by an unexpected error \(an unhandled promise rejection\): RangeError: injected rejection \(test\)\. Run 1 is recorded as failed\./,
        );
        expect((await runs()).map((run) => run.status)).toEqual(['failed']);
        await syncNow();
      },
    );
  },
);

describe('crash-only: export parquet leaves nothing behind', () => {
  let server: FakeServer;
  let bed: CliTestBed;
  let scratch: ReturnType<typeof temporaryDirectory>;
  const started: CliProcess[] = [];
  const out = () => join(bed.directory.path, 'parquet');
  /** The export's own TMPDIR, to see what it leaves there. */
  const env = () => ({ ...bed.warehouse.env, TMPDIR: scratch.path, OCS_LOG_LEVEL: 'info' });
  const exportCli = (fault?: string) => {
    const cli = startCliProcess(['export', 'parquet', out()], env(), { fault });
    started.push(cli);
    return cli.finished;
  };
  const tables = () => readdirSync(out()).filter((name) => name.endsWith('.parquet'));
  /** The export folder holds complete Parquet files only, and TMPDIR nothing. */
  const expectNothingLeft = () => {
    expect(readdirSync(out()).filter((name) => !name.endsWith('.parquet'))).toEqual([]);
    expect(readdirSync(scratch.path)).toEqual([]);
  };

  beforeEach(async () => {
    const dataset = createSampleDataset({ rowsPerResource: 20, seed: 7 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    bed = await openCliTestBed('sqlite');
    scratch = temporaryDirectory();
    const synced = await runCli(['sync'], syncEnv(server.url, bed.warehouse.env));
    expect(synced.code).toBe(0);
  });
  afterEach(async () => {
    for (const cli of started.splice(0)) {
      cli.child.kill('SIGKILL');
      await cli.finished;
    }
    scratch.remove();
    await closeCliTestBed(bed, server);
  });

  it('a failure mid-export removes the folder it wrote in and its staging database', async () => {
    const warehouse = await openWarehouse({ url: bed.warehouse.env.OCS_WAREHOUSE_URL! });
    let batches = 0;
    const failing: Parameters<typeof exportParquet>[0] = {
      describeTable: (table) => warehouse.describeTable(table),
      reads: {
        readRows: async (query) => {
          if (++batches === 3) throw new Error('the disk went away');
          return warehouse.reads.readRows(query);
        },
      },
    };
    const tmp = process.env.TMPDIR;
    process.env.TMPDIR = scratch.path;
    try {
      await expect(
        exportParquet(failing, {
          directory: out(),
          tables: ['llm_providers', 'participants', 'chats', 'chat_messages'],
          live: false,
        }),
      ).rejects.toThrow('the disk went away');
    } finally {
      if (tmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = tmp;
      await warehouse.close();
    }
    expect(tables()).toEqual(['llm_providers.parquet', 'participants.parquet']);
    expectNothingLeft();
  });

  it('SIGTERM mid-export: exit 130, the files done are kept, nothing half-written is left', async () => {
    const stopped = await exportCli('signal-after-output:SIGTERM');
    expect(stopped.code).toBe(130);
    expect(stopped.stderr).toMatch(
      /ocs-sync: The export was stopped; the files already complete are kept, nothing half-written is left\./,
    );
    const done = tables();
    expect(done.length).toBeGreaterThan(0);
    expectNothingLeft();
    const again = await exportCli();
    expect(again.code).toBe(0);
    expect(tables().length).toBeGreaterThan(done.length);
    expectNothingLeft();
  });

  it('kill -9 mid-export leaves its folders; the next export removes them and exports everything', async () => {
    const killed = await exportCli('signal-after-output:SIGKILL');
    expect(killed.signal).toBe('SIGKILL');
    const partial = readdirSync(out()).filter((name) => name.startsWith('.partial-'));
    expect(partial).toHaveLength(1);
    const staging = readdirSync(scratch.path);
    expect(staging).toEqual([expect.stringMatching(/^ocs-parquet-/)]);
    expect(readdirSync(join(scratch.path, staging[0]!))).toContain('stage.duckdb');

    const next = await exportCli();
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).toMatch(/Removed 2 folder\(s\) an export that was killed left behind/);
    expectNothingLeft();
    const full = await runCli(['export', 'parquet', join(bed.directory.path, 'check')], env());
    expect(tables()).toEqual(
      readdirSync(join(bed.directory.path, 'check')).filter((name) => name.endsWith('.parquet')),
    );
    expect(full.code).toBe(0);
  });
});
