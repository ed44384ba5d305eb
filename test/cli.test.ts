/** The command line's contract: help, usage errors, configuration errors, exit codes. */
import { join } from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openWarehouse } from '../src/warehouse/open.js';
import { runCli, temporaryDirectory } from './support.js';

describe('ocs-sync command line', () => {
  let directory: ReturnType<typeof temporaryDirectory>;
  beforeEach(() => {
    directory = temporaryDirectory();
  });
  afterEach(() => directory.remove());

  it('shows help with exit 0 on every command', async () => {
    for (const argv of [
      ['--help'],
      ['sync', '--help'],
      ['status', '--help'],
      ['daemon', '--help'],
      ['keygen', '--help'],
      ['unseal', '--help'],
      ['demo', '--help'],
      ['check', '--help'],
      ['runs', '--help'],
      ['runs', 'show', '--help'],
      ['reset', '--help'],
      ['config', '--help'],
      ['fake-server', '--help'],
      ['audit', '--help'],
      ['audit', 'verify', '--help'],
      ['audit', 'checkpoints', '--help'],
    ]) {
      const result = await runCli(argv, {});
      expect(result.code, argv.join(' ')).toBe(0);
      expect(result.stdout, argv.join(' ')).toMatch(/Usage: ocs-sync/);
    }
  });

  it('exits 2 on usage errors', async () => {
    expect((await runCli([], {})).code).toBe(2);
    const unknownCommand = await runCli(['synch'], {});
    expect(unknownCommand.code).toBe(2);
    expect(unknownCommand.stderr).toMatch(/unknown command 'synch'/);
    expect((await runCli(['sync', '--no-such-flag'], {})).code).toBe(2);
    expect((await runCli(['--log-level', 'loud', 'status'], {})).code).toBe(2);
  });

  it('reports every configuration problem at once, exit 1, without echoing the API key', async () => {
    const file = join(directory.path, 'config.yaml');
    writeFileSync(file, 'page_size: 5000\nconcurency: 2\ndeletes: sometimes\n');
    const result = await runCli(['--config', file, 'sync'], {
      OCS_BASE_URL: 'http://chat.example.org',
      OCS_API_KEY: 'secret-key-value',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/Configuration has \d+ problems/);
    expect(result.stderr).toMatch(/page_size/);
    expect(result.stderr).toMatch(/concurency.*concurrency/);
    expect(result.stderr).toMatch(/deletes/);
    expect(result.stderr).toMatch(/http:\/\//);
    expect(result.stderr).not.toContain('secret-key-value');
  });

  it('says what is missing when sync runs with no server configured', async () => {
    const result = await runCli(['sync'], { OCS_WAREHOUSE_URL: join(directory.path, 'w.db') });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/OCS_BASE_URL/);
    expect(result.stderr).toMatch(/OCS_API_KEY/);
  });

  it('says there is no warehouse yet instead of creating one, then shows an empty status', async () => {
    const path = join(directory.path, 'w.db');
    const env = { OCS_WAREHOUSE_URL: path };
    const missing = await runCli(['status'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`There is no SQLite warehouse at ${path} yet`);
    expect(missing.stderr).toMatch(/run `ocs-sync sync` first/);
    expect(existsSync(path)).toBe(false);

    await (await openWarehouse({ url: path })).close();
    // A warehouse that never synced is not healthy: exit 4, saying why.
    const table = await runCli(['status'], env);
    expect(table.code).toBe(4);
    expect(table.stdout).toMatch(/Last run:\s+none/);
    expect(table.stdout).toMatch(/no sync run is recorded yet/);
    expect(table.stdout).toMatch(/No resources synced yet/);
    const json = await runCli(['status', '--json'], env);
    expect(JSON.parse(json.stdout)).toMatchObject({
      last_run: null,
      last_success: null,
      resources: [],
      exit_code: 4,
    });
  });

  it('refuses an unsupported warehouse URL and an unreachable PostgreSQL without showing the password', async () => {
    const mysql = await runCli(['status'], { OCS_WAREHOUSE_URL: 'mysql://u:pw@h/db' });
    expect(mysql.code).toBe(1);
    expect(mysql.stderr).toMatch(/mysql/);
    const postgres = await runCli(['status'], {
      OCS_WAREHOUSE_URL: 'postgres://u:hunter2@127.0.0.1:1/db',
    });
    expect(postgres.code).toBe(1);
    expect(postgres.stderr).not.toContain('hunter2');
  });

  it('runs the demo end to end into a SQLite file', async () => {
    const database = join(directory.path, 'demo.db');
    const result = await runCli(['demo', '--db', database, '--rows', '15'], {});
    expect(result.stderr).toMatch(/Fake export server on http:\/\/127\.0\.0\.1:\d+/);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Run 1 \(initial\): ok/);
    expect(result.logs).toMatch(/retrying/);
    // File contents too, through a cut-off body and a reset connection.
    expect(result.stdout).toMatch(/Files: \d+ fetched/);
    expect(result.logs).toMatch(/"path":"files\/\d+\/content".*retrying/);
    const status = await runCli(['status', '-w', database], {});
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/chat_messages\s+15\s/);
    expect(status.stdout).toMatch(/Files: [1-9]\d* ok, [1-9]\d* missing \(404\), 0 failed/);
    const again = await runCli(['demo', '--db', database, '--rows', '15'], {});
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/: ok, 0 rows in 0 pages/);
  });
});
