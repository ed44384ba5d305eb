/**
 * Running ocs-sync without SQL, through the CLI on every dialect: recorded failures, `status`
 * and its exit codes, `runs`, `reset`, `check`, `config`, `fake-server`, and no secret in any
 * output.
 */
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import Database from 'better-sqlite3';
import { describeError } from '../src/errors.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { SqliteWarehouse } from '../src/warehouse/sqlite/warehouse.js';
import {
  ADMIN_KEY,
  MEMBER_KEY,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  waitFor,
  type TestWarehouse,
  closeCliTestBed,
  openCliTestBed,
} from './support.js';

/** Quick retries so failure tests do not wait long. */
const FAST_RETRIES_YAML =
  'http:\n  min_retry_delay_ms: 5\n  max_retry_delay_seconds: 1\n  max_attempts: 2\nlock:\n  wait_seconds: 0\n';

function writeFast(folder: string): string {
  const file = join(folder, 'fast.yaml');
  writeFileSync(file, FAST_RETRIES_YAML);
  return file;
}

interface RunJson {
  id: number;
  kind: string;
  status: string;
  error: string | null;
}

describe.each(splitDialects)('operating ocs-sync without SQL (%s)', (dialect) => {
  let server: FakeServer;
  let directory: ReturnType<typeof temporaryDirectory>;
  let warehouse: TestWarehouse;
  let configFile: string;

  const start = async (options: Partial<Parameters<typeof startFakeServer>[0]> = {}) => {
    server = await startFakeServer({
      dataset: createSampleDataset({ rowsPerResource: 12, seed: 5 }),
      teamPublicKeyPem: teamKeys().publicKey,
      ...options,
    });
  };
  const env = (extra: Record<string, string> = {}) =>
    syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: '5', ...extra });
  const cli = (argv: string[], extra: Record<string, string> = {}) =>
    runCli(['--config', configFile, ...argv], env(extra));
  const runs = async (): Promise<RunJson[]> =>
    JSON.parse((await cli(['runs', '--json'])).stdout) as RunJson[];
  const statusJson = async (args: string[] = []) => {
    const result = await cli(['status', '--json', ...args]);
    return { code: result.code, body: JSON.parse(result.stdout) as Record<string, unknown> };
  };

  beforeEach(async () => {
    ({ directory, warehouse, configFile } = await openCliTestBed(dialect, FAST_RETRIES_YAML));
  });
  afterEach(() => closeCliTestBed({ directory, warehouse, configFile }, server));

  it('records every failed run (401, 403, server down, unreadable key) and status exits 4 naming it', async () => {
    await start();
    const refused = await cli(['sync'], { OCS_API_KEY: 'not-a-key' });
    expect(refused.code).toBe(1);
    const forbidden = await cli(['sync'], { OCS_API_KEY: MEMBER_KEY });
    expect(forbidden.code).toBe(1);
    const badKey = await cli(['sync'], {
      OCS_PRIVATE_KEY: '',
      OCS_PRIVATE_KEY_FILE: join(directory.path, 'no-such-key.pem'),
    });
    expect(badKey.code).toBe(1);
    await server.close();
    const down = await cli(['sync']);
    expect(down.code).toBe(1);

    const recorded = await runs();
    expect(recorded.map((run) => run.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
    expect(recorded[3]!.error).toMatch(/HTTP 401/);
    expect(recorded[2]!.error).toMatch(/HTTP 403/);
    expect(recorded[2]!.error).toMatch(/team admin/);
    expect(recorded[1]!.error).toMatch(/no-such-key\.pem/);
    expect(recorded[0]!.error).toMatch(/manifest\/ failed after 2 attempts/);

    const status = await cli(['status']);
    expect(status.code).toBe(4);
    expect(status.stdout).toMatch(/Last run:\s+#4 initial failed .* ago/);
    expect(status.stdout).toMatch(/Last success:\s+none/);
    const json = await statusJson();
    expect(json.code).toBe(4);
    expect(json.body).toMatchObject({
      last_run: { id: 4, status: 'failed' },
      last_success: null,
      healthy: false,
      exit_code: 4,
    });
  });

  it('status: healthy after a sync; exit 5 for a resource error, 6 past --max-lag; fits 100 columns', async () => {
    await start();
    expect((await cli(['sync'])).code).toBe(0);
    const healthy = await cli(['status']);
    expect(healthy.stderr).toBe('');
    expect(healthy.code).toBe(0);
    expect(healthy.stdout).toMatch(/Last success:\s+#1 initial ok/);
    expect(healthy.stdout).toMatch(/Health:\s+ok/);
    for (const line of healthy.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(100);
    expect(healthy.stdout).not.toMatch(/cursor/);
    const wide = await cli(['status', '--wide']);
    expect(wide.stdout).toMatch(/cursor/);
    // Cursors decoded: an id for pk resources, a time and an id for the others.
    expect(wide.stdout).toMatch(/after id \d+/);
    expect(wide.stdout).toMatch(/after \d{4}-\d\d-\d\dT[\d:.]+(Z|\+00:00) id \d+/);

    const json = await statusJson();
    const resources = json.body.resources as Array<Record<string, unknown>>;
    expect(json.body.last_run).toMatchObject({ id: 1, kind: 'initial', status: 'ok' });
    expect(json.body.last_success).toMatchObject({ id: 1 });
    expect(resources.find((resource) => resource.resource === 'chat_messages')).toMatchObject({
      rows: 12,
      last_error: null,
    });
    expect(resources.every((resource) => typeof resource.lag_seconds === 'number')).toBe(true);

    // Lag: the last success was long ago.
    await warehouse.query(
      "UPDATE _ocs_resources SET last_success_at = '2020-01-01T00:00:00Z' WHERE resource = 'users'",
    );
    const lagging = await cli(['status', '--max-lag', '2h']);
    expect(lagging.code).toBe(6);
    expect(lagging.stdout).toMatch(/not synced within 7200 s: users/);
    expect((await cli(['status', '--max-lag', '100000d'])).code).toBe(0);
    const badLag = await cli(['status', '--max-lag', 'soon']);
    expect(badLag.code).toBe(2);
    expect(badLag.stderr).toMatch(/--max-lag must be a duration such as 90s, 15m, 2h/);

    // A resource the server stops exporting: the run is partial, the resource has an error.
    server.faults.failNext(1, { kind: 'status', status: 404 }, { resource: 'participants' });
    expect((await cli(['sync'])).code).toBe(3);
    const erring = await cli(['status']);
    expect(erring.code).toBe(5);
    expect(erring.stdout).toMatch(/1 resource\(s\) ended with an error: participants/);
    expect(erring.stdout).toMatch(/participants .*skipped: the server does not/);
  });

  it('a resource name the server does not have gets a did-you-mean, in sync and in check', async () => {
    await start();
    const sync = await cli(['sync'], { OCS_RESOURCES: 'users,chat_mesages' });
    expect(sync.code).toBe(3);
    expect(sync.stdout).toMatch(
      /problem: Resource "chat_mesages" is not in the server's manifest; did you mean "chat_messages"\?/,
    );
    const check = await cli(['check'], { OCS_RESOURCES: 'users,chat_mesages' });
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/✗ manifest readable .*did you mean "chat_messages"\?/);
  });

  it('runs lists past runs and runs show lists one run’s resources', async () => {
    await start();
    expect((await cli(['sync'])).code).toBe(0);
    expect((await cli(['sync'], { OCS_API_KEY: 'wrong' })).code).toBe(1);
    const list = await cli(['runs', '--limit', '1']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^id\s+kind\s+status/);
    expect(list.stdout).toMatch(/\n\s*2\s+incremental\s+failed/);
    expect(list.stdout).not.toMatch(/\n\s*1\s+initial/);
    const show = await cli(['runs', 'show', '1']);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/^Run 1 \(initial\): ok/);
    expect(show.stdout).toMatch(/\nchat_messages\s+ok\s+12\s+3\s/);
    const json = JSON.parse((await cli(['runs', 'show', '1', '--json'])).stdout) as {
      resources: Array<{ resource: string; rows: number }>;
    };
    expect(json.resources.find((row) => row.resource === 'users')?.rows).toBe(12);
    const missing = await cli(['runs', 'show', '99']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/There is no run 99/);
    expect((await cli(['runs', '--limit', 'all'])).code).toBe(2);
  });

  it('names the initial load: runs are initial until one ends ok or partial, then incremental; a full refresh asked for stays one', async () => {
    await start();
    server.faults.failNext(2, { kind: 'status', status: 503 }, { resource: 'manifest' });
    const down = await cli(['sync']);
    expect(down.code).toBe(1);
    const loaded = await cli(['sync']);
    expect(loaded.code).toBe(0);
    expect(loaded.stdout).toMatch(/^Run 2 \(initial\): ok, /m);
    expect((await cli(['sync'])).stdout).toMatch(/^Run 3 \(incremental\): ok, /m);
    expect((await cli(['sync', '--full-refresh'])).stdout).toMatch(/^Run 4 \(full_refresh\): ok/m);
    expect((await runs()).map((run) => `${run.kind} ${run.status}`)).toEqual([
      'full_refresh ok',
      'incremental ok',
      'initial ok',
      'initial failed',
    ]);
    const status = await cli(['status']);
    expect(status.stdout).toMatch(/Last run:\s+#4 full_refresh ok/);
    expect((await cli(['runs'])).stdout).toMatch(/\n\s*2\s+initial\s+ok/);
  });

  it('migrates a warehouse from before the initial kind: its runs kept, the next run incremental, the kind allowed', async () => {
    await start();
    expect((await cli(['sync'])).code).toBe(0);
    // Back to before migration 010: the old CHECK, and the migration not recorded.
    const restore =
      dialect === 'sqlite'
        ? [
            'CREATE TABLE _ocs_runs_old AS SELECT * FROM _ocs_runs',
            "UPDATE _ocs_runs_old SET kind = 'incremental'",
            'DROP TABLE _ocs_runs',
            `CREATE TABLE _ocs_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL CHECK (kind IN ('incremental', 'full_refresh', 'reset')), status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'partial', 'failed', 'interrupted')), started_at TEXT NOT NULL, finished_at TEXT, schema_checksum TEXT, "rows" INTEGER NOT NULL DEFAULT 0, pages INTEGER NOT NULL DEFAULT 0, requests INTEGER NOT NULL DEFAULT 0, error TEXT, selection_key TEXT)`,
            'INSERT INTO _ocs_runs SELECT * FROM _ocs_runs_old',
            'DROP TABLE _ocs_runs_old',
          ]
        : [
            "UPDATE _ocs_runs SET kind = 'incremental'",
            'ALTER TABLE _ocs_runs DROP CONSTRAINT _ocs_runs_kind_check',
            "ALTER TABLE _ocs_runs ADD CONSTRAINT _ocs_runs_kind_check CHECK (kind IN ('incremental', 'full_refresh', 'reset'))",
          ];
    for (const statement of [...restore, 'DELETE FROM _ocs_migrations WHERE version = 10']) {
      await warehouse.query(statement);
    }
    await expect(
      warehouse.query(
        "INSERT INTO _ocs_runs (kind, status, started_at) VALUES ('initial', 'ok', '2026-01-01T00:00:00.000000Z')",
      ),
    ).rejects.toThrow();
    const next = await cli(['sync']);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toMatch(/^Run \d+ \(incremental\): ok, /m);
    expect((await runs()).map((run) => run.kind)).toEqual(['incremental', 'incremental']);
    await warehouse.query(
      "INSERT INTO _ocs_runs (kind, status, started_at) VALUES ('initial', 'ok', '2026-01-01T00:00:00.000000Z')",
    );
  });

  it('reset forgets a cursor (the next sync starts over), asks first, is refused under the lock, and is recorded', async () => {
    await start();
    expect((await cli(['sync'])).code).toBe(0);

    const unknown = await cli(['reset', 'chat_mesages', '--yes']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/did you mean "chat_messages"\?/);

    const unasked = await cli(['reset', 'chat_messages']);
    expect(unasked.code).toBe(2);
    expect(unasked.stderr).toMatch(/add --yes/);

    // Declined on a terminal: nothing changes.
    const declined = await main(['--config', configFile, 'reset', 'chat_messages'], {
      env: env(),
      output: { out: () => undefined, err: () => undefined },
      logStream: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
      confirm: async () => false,
    });
    expect(declined).toBe(1);

    // Refused while another process holds the writer lock.
    const holder = await openWarehouse({
      url: warehouse.env.OCS_WAREHOUSE_URL!,
      schema: warehouse.env.OCS_WAREHOUSE_SCHEMA,
    });
    const lock = await holder.acquireLock(0);
    try {
      const locked = await cli(['reset', 'chat_messages', '--yes']);
      expect(locked.code).toBe(3);
      expect(locked.stderr).toMatch(/Another ocs-sync \(pid \d+/);
    } finally {
      await lock.release();
      await holder.close();
    }
    expect((await runs()).map((run) => run.kind)).toEqual(['initial']);

    const reset = await cli(['reset', 'chat_messages', '--yes']);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toMatch(/Reset chat_messages \(run 2\)/);
    server.requests.length = 0;
    expect((await cli(['sync'])).code).toBe(0);
    const walked = server.requests.filter((request) => request.resource === 'chat_messages');
    expect(walked[0]?.query.cursor).toBeUndefined();
    expect(walked).toHaveLength(3);
    const others = server.requests.filter((request) => request.resource === 'users');
    expect(others).toHaveLength(1);
    expect(others[0]?.query.cursor).toBeDefined();

    // --drop-table: the table goes, and the next sync builds it again.
    expect((await cli(['reset', 'users', '--drop-table', '--yes'])).code).toBe(0);
    await expect(warehouse.query('SELECT count(*) AS n FROM users')).rejects.toThrow();
    expect((await cli(['sync'])).code).toBe(0);
    expect(await warehouse.readTable('users')).toHaveLength(12);

    const history = await runs();
    expect(history.map((run) => run.kind)).toEqual([
      'incremental',
      'reset',
      'incremental',
      'reset',
      'initial',
    ]);
    const shown = await cli(['runs', 'show', String(history[1]!.id)]);
    expect(shown.stdout).toMatch(/users\s+ok\s+0\s+0\s.*cursor forgotten, table dropped/);
    const changes = await warehouse.query(
      "SELECT table_name FROM _ocs_schema_changes WHERE change = 'drop_table'",
    );
    expect(changes).toEqual([{ table_name: 'users' }]);
    // A reset is not a sync: status still reports the last sync run.
    expect((await statusJson()).body.last_run).toMatchObject({ kind: 'incremental' });
  });

  it('check passes on a good setup and writes nothing', async () => {
    await start();
    const before = await cli(['check']);
    expect(before.stdout).toMatch(/✓ configuration/);
    expect(before.stdout).toMatch(/✓ server reachable/);
    expect(before.stdout).toMatch(/✓ API key \(a team admin's\)\s+team/);
    expect(before.stdout).toMatch(/✓ team public key registered/);
    expect(before.stdout).toMatch(/✓ private key opens a sealed value\s+opened a sealed value/);
    expect(before.stdout).toMatch(/✓ schema checksum\s+\S+ \(new: no complete run yet\)/);
    expect(before.stdout).toMatch(/✓ warehouse writable/);
    expect(before.stdout).toMatch(/✓ writer lock free/);
    expect(before.stdout).toMatch(/✓ file contents\s+kept in \S+/);
    expect(before.code).toBe(0);
    if (dialect === 'sqlite') expect(existsSync(warehouse.env.OCS_WAREHOUSE_URL!)).toBe(false);

    expect((await cli(['sync'])).code).toBe(0);
    const runsBefore = await runs();
    const after = await cli(['check', '--json']);
    expect(after.code).toBe(0);
    const checks = JSON.parse(after.stdout) as {
      ok: boolean;
      checks: Array<{ name: string; status: string; detail: string }>;
    };
    expect(checks.ok).toBe(true);
    expect(checks.checks.find((check) => check.name === 'schema checksum')?.detail).toMatch(
      /unchanged since the last run/,
    );
    // The files the sync kept: ok, missing (404) and the bytes stored.
    expect(checks.checks.find((check) => check.name === 'file contents')).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(
        /^Files: [1-9]\d* ok, \d+ missing \(404\), 0 failed; .* stored in /,
      ),
    });
    const filesOff = await cli(['check'], { OCS_FILES_ENABLED: 'false' });
    expect(filesOff.stdout).toMatch(/- file contents\s+not checked: files.enabled is false/);
    // Turned off is not a failure: nothing else is wrong, so check passes.
    expect(filesOff.code, filesOff.stdout).toBe(0);
    expect(await runs()).toEqual(runsBefore);
  });

  it('check names the fix: 401, 403, no public key, a wrong private key, a held lock, server down', async () => {
    await start();
    const refused = await cli(['check'], { OCS_API_KEY: 'wrong' });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/✗ API key .*HTTP 401/);
    expect(refused.stdout).toMatch(/fix: Check OCS_API_KEY/);
    expect(refused.stdout).toMatch(/- private key opens a sealed value\s+not checked/);

    const member = await cli(['check'], { OCS_API_KEY: MEMBER_KEY });
    expect(member.stdout).toMatch(/✗ API key .*HTTP 403/);
    expect(member.stdout).toMatch(/fix: Only a team admin may export/);

    const otherKey = await import('node:crypto').then(({ generateKeyPairSync }) =>
      generateKeyPairSync('rsa', {
        modulusLength: 2048,
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
        publicKeyEncoding: { type: 'spki', format: 'pem' },
      }),
    );
    const wrongKey = await cli(['check'], { OCS_PRIVATE_KEY: otherKey.privateKey });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stdout).toMatch(/✗ private key opens a sealed value\s+cannot open/);
    expect(wrongKey.stdout).toMatch(/fix: This is not the private key/);

    expect((await cli(['sync'])).code).toBe(0);
    const holder = await openWarehouse({
      url: warehouse.env.OCS_WAREHOUSE_URL!,
      schema: warehouse.env.OCS_WAREHOUSE_SCHEMA,
    });
    const lock = await holder.acquireLock(0);
    try {
      const locked = await cli(['check']);
      expect(locked.code).toBe(1);
      expect(locked.stdout).toMatch(/✗ writer lock free\s+held by pid \d+/);
    } finally {
      await lock.release();
      await holder.close();
    }

    await server.close();
    await start({ teamPublicKeyPem: undefined });
    server.requests.length = 0;
    const noPublicKey = await cli(['check']);
    expect(noPublicKey.stdout).toMatch(/✗ team public key registered/);
    expect(noPublicKey.stdout).toMatch(/fix: Create a key pair with `ocs-sync keygen`/);
    // No sealed page is asked for when the team has no public key.
    expect(server.requests.filter((request) => request.resource !== undefined)).toEqual([]);

    await server.close();
    const down = await cli(['check']);
    expect(down.code).toBe(1);
    expect(down.stdout).toMatch(/✗ server reachable\s+GET manifest\/ failed after 2 attempts/);
    expect(down.stdout).toMatch(/fix: Check base_url/);
  });

  it('the daemon starts with the last success the warehouse recorded', async () => {
    await start();
    expect((await cli(['sync'])).code).toBe(0);
    await warehouse.query("UPDATE _ocs_runs SET finished_at = '2026-01-02T03:04:05Z'");
    await server.close();
    const controller = new AbortController();
    let logs = '';
    const exit = main(['--config', configFile, 'daemon'], {
      env: {
        ...env({ OCS_HEALTH_LISTEN: '127.0.0.1:0', OCS_SCHEDULE: '0 0 1 1 *' }),
        OCS_FULL_REFRESH_SCHEDULE: 'off',
      },
      output: { out: () => undefined, err: () => undefined },
      logStream: new Writable({
        write(chunk, _encoding, callback) {
          logs += chunk.toString();
          callback();
        },
      }),
      signal: controller.signal,
    });
    try {
      const listen = await waitFor(
        () => /"listen":"(127\.0\.0\.1:\d+)"/.exec(logs)?.[1],
        'the health server',
      );
      const metrics = await waitFor(async () => {
        const text = await (await fetch(`http://${listen}/metrics`)).text();
        return /ocs_sync_runs_total\{[^}]*status="failed"\} 1/.test(text) && text;
      }, 'the failed start-up run');
      expect(metrics).toMatch(/^ocs_sync_last_success_timestamp_seconds 1767323045$/m);
    } finally {
      controller.abort();
      await exit;
    }
  });
});

describe('config, fake-server, paths and secrets through the CLI', () => {
  let directory: ReturnType<typeof temporaryDirectory>;
  beforeEach(() => {
    directory = temporaryDirectory();
  });
  afterEach(() => directory.remove());

  it('config shows every key with its value and where it came from; secrets as set / not set', async () => {
    const file = join(directory.path, 'config.yaml');
    writeFileSync(file, '# ours\npage_size: 250\nhttp:\n  max_attempts: 3\n');
    const result = await runCli(['--config', file, '--log-level', 'debug', 'config'], {
      OCS_API_KEY: 'very-secret-api-key',
      OCS_WAREHOUSE_URL: 'postgres://ocs:hunter2hunter2@db.example.org/ocs',
      OCS_CONCURRENCY: '2',
    });
    expect(result.code).toBe(0);
    const line = (key: string) =>
      result.stdout.split('\n').find((text) => text.startsWith(`${key} `)) ?? '';
    expect(line('page_size')).toMatch(new RegExp(`^page_size\\s+250\\s+${file}:2$`));
    expect(line('http.max_attempts')).toMatch(new RegExp(`3\\s+${file}:4$`));
    expect(line('concurrency')).toMatch(/2\s+env OCS_CONCURRENCY$/);
    expect(line('log_level')).toMatch(/debug\s+flag$/);
    expect(line('deletes')).toMatch(/mark\s+default$/);
    expect(line('api_key')).toMatch(/^api_key\s+set\s+env OCS_API_KEY$/);
    expect(line('private_key')).toMatch(/^private_key\s+not set\s+-$/);
    expect(line('warehouse.url')).toMatch(/postgres:\/\/ocs:\*\*\*@db\.example\.org\/ocs/);
    expect(result.stdout).not.toContain('very-secret-api-key');
    expect(result.stdout).not.toContain('hunter2hunter2');

    const json = JSON.parse(
      (await runCli(['--config', file, 'config', '--json'], {})).stdout,
    ) as Record<string, { value: unknown; source: string }>;
    expect(json.page_size).toEqual({ value: 250, source: `${file}:2` });
    expect(json.api_key).toEqual({ value: 'not set', source: '-' });

    const bad = await runCli(['config'], { OCS_PAGE_SIZE: 'lots' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/OCS_PAGE_SIZE/);
  });

  it('fake-server prints a URL, an API key and a key file that check and sync accept', async () => {
    const controller = new AbortController();
    let stdout = '';
    const exit = main(['fake-server', '--port', '0', '--rows', '6', '--key-dir', directory.path], {
      env: {},
      output: { out: (text) => (stdout += `${text}\n`), err: () => undefined },
      signal: controller.signal,
    });
    try {
      const url = await waitFor(() => /OCS_BASE_URL=(\S+)/.exec(stdout)?.[1], 'the server URL');
      const apiKey = /OCS_API_KEY=(\S+)/.exec(stdout)![1]!;
      const keyFile = /OCS_PRIVATE_KEY_FILE=(\S+)/.exec(stdout)![1]!;
      const env = {
        OCS_BASE_URL: url,
        OCS_API_KEY: apiKey,
        OCS_PRIVATE_KEY_FILE: keyFile,
        OCS_WAREHOUSE_URL: join(directory.path, 'w.db'),
      };
      const check = await runCli(['check'], env);
      expect(check.stdout).toMatch(/✓ private key opens a sealed value/);
      expect(check.code).toBe(0);
      expect((await runCli(['sync'], env)).code).toBe(0);
      const status = await runCli(['status'], env);
      expect(status.code).toBe(0);
      expect(status.stdout).toMatch(/chat_messages\s+6\s/);
    } finally {
      controller.abort();
    }
    expect(await exit).toBe(0);
    expect((await runCli(['fake-server', '--fault-rate', '2'], {})).stderr).toMatch(
      /--fault-rate must be a number from 0 to 1/,
    );
  });

  it('names a SQLite folder that does not exist instead of creating it, and a read-only file', async () => {
    const missing = join(directory.path, 'typo', 'w.db');
    const result = await runCli(['sync'], {
      OCS_BASE_URL: 'http://127.0.0.1:1',
      OCS_API_KEY: ADMIN_KEY,
      OCS_WAREHOUSE_URL: missing,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `The folder ${join(directory.path, 'typo')} of the SQLite warehouse`,
    );
    expect(result.stderr).toMatch(/mkdir -p/);
    expect(existsSync(join(directory.path, 'typo'))).toBe(false);

    // Permissions do not bind root; the check only means something for other users.
    if (process.getuid?.() === 0) return;
    const path = join(directory.path, 'w.db');
    await (await openWarehouse({ url: path })).close();
    chmodSync(path, 0o444);
    const readOnly = await runCli(['sync'], {
      OCS_BASE_URL: 'http://127.0.0.1:1',
      OCS_API_KEY: ADMIN_KEY,
      OCS_WAREHOUSE_URL: path,
    });
    expect(readOnly.code).toBe(1);
    expect(readOnly.stderr).toContain(`The SQLite warehouse ${path} cannot be written`);
    expect(readOnly.stderr).toMatch(/hint: Give this user write access/);
  });

  it('--log-format: JSON lines off a terminal by default, pretty lines when asked', async () => {
    const path = join(directory.path, 'w.db');
    const env = {
      OCS_BASE_URL: 'http://127.0.0.1:1',
      OCS_API_KEY: ADMIN_KEY,
      OCS_WAREHOUSE_URL: path,
    };
    const json = await runCli(['--config', writeFast(directory.path), 'sync'], env);
    for (const line of json.logs.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
    const pretty = await runCli(
      ['--log-format', 'pretty', '--config', writeFast(directory.path), 'sync'],
      env,
    );
    expect(pretty.logs).toMatch(/^\[\d\d:\d\d:\d\d\] .*WARN.*: Request failed; retrying/m);
    expect(pretty.logs).not.toMatch(/^\{/m);
    expect((await runCli(['--log-format', 'xml', 'status'], env)).code).toBe(2);
  });

  it('names the file and the fix when another program holds a lock on the SQLite file', async () => {
    const path = join(directory.path, 'w.db');
    await (await openWarehouse({ url: path })).close();
    const other = new Database(path);
    other.exec('BEGIN EXCLUSIVE');
    const warehouse = new SqliteWarehouse({ path, busyTimeoutMs: 20, writerThread: false });
    try {
      const error = await warehouse.acquireLock(0).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(describeError(error)).toContain(path);
      expect(describeError(error)).toMatch(/hint: Another program holds a lock on the file/);
    } finally {
      other.exec('ROLLBACK');
      other.close();
      await warehouse.close();
    }
  });

  it('the demo prints a short story: at most 40 lines', async () => {
    const result = await runCli(['demo', '--db', join(directory.path, 'demo.db'), '--rows', '10'], {
      OCS_LOG_LEVEL: '',
    });
    expect(result.code).toBe(0);
    const lines = [result.stdout, result.stderr, result.logs].join('').trim().split('\n');
    expect(lines.length).toBeLessThanOrEqual(40);
    expect(result.logs).toMatch(/retrying/);
    expect(result.stdout).toMatch(/ocs-sync status -w /);
  });
});

describe.each(splitDialects.filter((dialect) => dialect === 'postgres'))(
  'no password in any output (%s)',
  () => {
    it('runs every command with a password in the warehouse URL and never prints it', async () => {
      const password = 'Pw-never-shown-7311';
      const base = process.env.OCS_TEST_POSTGRES_URL!;
      const url = new URL(base);
      url.password = password;
      const schema = `t_pw_${Math.random().toString(36).slice(2, 8)}`;
      const server = await startFakeServer({
        dataset: createSampleDataset({ rowsPerResource: 4, seed: 2 }),
        teamPublicKeyPem: teamKeys().publicKey,
      });
      const directory = temporaryDirectory();
      try {
        const env = syncEnv(server.url, {
          OCS_WAREHOUSE_URL: url.toString(),
          OCS_WAREHOUSE_SCHEMA: schema,
        });
        const commands = [
          ['check'],
          ['sync'],
          ['status'],
          ['status', '--json', '--wide'],
          ['runs'],
          ['runs', 'show', '1'],
          ['reset', 'users', '--yes'],
          ['audit', 'checkpoints'],
          ['audit', 'verify'],
          ['config'],
          ['config', '--json'],
          ['--log-level', 'debug', 'sync'],
          ['-w', url.toString(), 'status'],
          ['-w', url.toString(), 'demo', '--rows', '3'],
          ['-w', 'postgres://ocs:Pw-never-shown-7311@127.0.0.1:1/none', 'status'],
          ['-w', 'postgres://ocs:Pw-never-shown-7311@127.0.0.1:1/none', 'check'],
          ['-w', 'postgres://ocs:Pw-never-shown-7311@127.0.0.1:1/none', 'sync'],
        ];
        for (const argv of commands) {
          const result = await runCli(argv, { ...env, OCS_LOG_LEVEL: 'debug' });
          const everything = result.stdout + result.stderr + result.logs;
          expect(everything, argv.join(' ')).not.toContain(password);
          expect(everything, argv.join(' ')).not.toContain(encodeURIComponent(password));
        }
      } finally {
        await server.close();
        const pg = (await import('pg')).default;
        const client = new pg.Client({ connectionString: base });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await client.end();
        directory.remove();
      }
    });
  },
);
