/**
 * Many teams through the CLI, on every dialect: `sync --team all` into a warehouse per team (a
 * SQLite file each, or a schema each of one PostgreSQL database), `status` with a line per team
 * and the worst team's code, the one-team commands with `--team`, and the fleet's daemon: the
 * teams that can sync finish, exact, while one team's server hangs, one is down and one refuses
 * the key; /healthz names them; SIGTERM stops every team. Ordered by events, never by time.
 */
import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  startFakeServer,
  type FakeServer,
  type FakeServerOptions,
} from '../src/fake-server/server.js';
import { openWarehouseReader } from '../src/warehouse/open.js';
import {
  ADMIN_KEY,
  createTestWarehouse,
  docsSqlBlocks,
  expectWarehouseEqualsSource,
  runCli,
  startCli,
  teamKeys,
  splitDialects,
  waitFor,
  type TestWarehouse,
} from './support.js';

interface TeamBed {
  name: string;
  dataset: FakeDataset;
  server?: FakeServer;
  /** When the team's server is not a fake one (down). */
  baseUrl?: string;
  warehouse: TestWarehouse;
  /** More lines of the team's entry (YAML, indented 4). */
  extra?: string;
}

/** What each test builds: teams, their servers and warehouses, a config file, a folder. */
class Fleet {
  readonly teams: TeamBed[] = [];
  readonly folder = mkdtempSync(join(tmpdir(), 'ocs-sync-teams-'));
  readonly configFile = join(this.folder, 'teams.yaml');
  readonly keyFile = join(this.folder, 'private.pem');

  constructor(readonly dialect: 'sqlite' | 'postgres') {
    writeFileSync(this.keyFile, teamKeys().privateKey, { mode: 0o600 });
  }

  async add(
    name: string,
    options: { seed: number; server?: Partial<FakeServerOptions> | false; extra?: string },
  ): Promise<TeamBed> {
    const dataset = createSampleDataset({ rowsPerResource: 6, seed: options.seed });
    const server =
      options.server === false
        ? undefined
        : await startFakeServer({
            dataset,
            teamPublicKeyPem: teamKeys().publicKey,
            ...options.server,
          });
    const team: TeamBed = {
      name,
      dataset,
      server,
      baseUrl: server?.url ?? `http://127.0.0.1:${await closedPort()}`,
      warehouse: await createTestWarehouse(this.dialect),
      extra: options.extra,
    };
    this.teams.push(team);
    return team;
  }

  /** Writes the teams: file; `shared` goes at its top level. */
  write(shared = ''): void {
    const entries = this.teams.map((team) => {
      const { env } = team.warehouse;
      const warehouse =
        this.dialect === 'postgres'
          ? `{ url: '${env.OCS_WAREHOUSE_URL}', schema: ${env.OCS_WAREHOUSE_SCHEMA} }`
          : `{ url: '${env.OCS_WAREHOUSE_URL}' }`;
      return [
        `  - name: ${team.name}`,
        `    base_url: ${team.baseUrl}`,
        `    api_key_env: ${keyVariable(team.name)}`,
        `    private_key_file: ${this.keyFile}`,
        `    warehouse: ${warehouse}`,
        `    files: { dir: '${team.warehouse.filesDir}' }`,
        ...(team.extra ? [team.extra.replace(/^/gm, '    ')] : []),
      ].join('\n');
    });
    writeFileSync(
      this.configFile,
      `http: { min_retry_delay_ms: 5, max_retry_delay_seconds: 1, max_attempts: 3 }\n${shared}\nteams:\n${entries.join('\n')}\n`,
    );
  }

  /** The environment of a command: the config file, every team's key. */
  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      OCS_CONFIG: this.configFile,
      ...Object.fromEntries(this.teams.map((team) => [keyVariable(team.name), ADMIN_KEY])),
      ...extra,
    };
  }

  cli(argv: string[], extra: Record<string, string> = {}) {
    return runCli(argv, this.env(extra));
  }

  async close(): Promise<void> {
    for (const team of this.teams) {
      await team.server?.close();
      await team.warehouse.dispose();
    }
    rmSync(this.folder, { recursive: true, force: true });
  }
}

const keyVariable = (team: string) => `OCS_${team.toUpperCase().replace(/-/g, '_')}_API_KEY`;

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function lastRunOf(team: TeamBed) {
  const { env } = team.warehouse;
  const reader = await openWarehouseReader({
    url: env.OCS_WAREHOUSE_URL!,
    schema: env.OCS_WAREHOUSE_SCHEMA ?? 'ocs',
  });
  try {
    return (await reader.runs({ limit: 1 }))[0];
  } finally {
    await reader.close();
  }
}

/** /healthz bodies, as far as the tests read them. */
interface HealthBody {
  unhealthy: string[];
  teams: Record<
    string,
    { status: string; lastRunStatus: string | null; reason: string; stage: string | null }
  >;
}

let fleet: Fleet | undefined;
afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
});

describe.each(splitDialects)('many teams through the CLI (%s)', (dialect) => {
  it('sync --team all fills each team’s own warehouse, exactly; status has a line per team and exits with the worst code', async () => {
    fleet = new Fleet(dialect);
    const kenya = await fleet.add('kenya', { seed: 1, extra: 'history: true' });
    const malawi = await fleet.add('malawi', { seed: 2, extra: 'page_threads: true' });
    const uganda = await fleet.add('uganda', {
      seed: 3,
      server: { apiKeys: { admin: ['another-key'], nonAdmin: [] } },
    });
    fleet.write('teams_at_once: 2');

    const sync = await fleet.cli(['sync', '--team', 'all']);
    expect(sync.code, sync.stderr).toBe(1);
    expect(sync.stdout).toMatch(/^kenya: Run 1 \(initial\): ok, /m);
    expect(sync.stdout).toMatch(/^malawi: Run 1 \(initial\): ok, /m);
    expect(sync.stdout).toMatch(
      /^uganda: could not run: The server refused the API key \(HTTP 401\)/m,
    );
    expect(sync.stdout).toMatch(/^Teams: 2 ok, 1 could not run \(uganda\)\.$/m);
    await expectWarehouseEqualsSource(kenya.warehouse, kenya.dataset);
    await expectWarehouseEqualsSource(malawi.warehouse, malawi.dataset);
    expect(
      (await kenya.warehouse.query('SELECT count(*) AS n FROM chats__history'))[0],
    ).toBeDefined();
    await expect(malawi.warehouse.query('SELECT * FROM chats__history')).rejects.toThrow();
    // Every log line of a team's run carries its name.
    const lines = sync.logs
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.filter((line) => line.msg === 'The team could not be synced')).toEqual([
      expect.objectContaining({ team: 'uganda', level: 50 }),
    ]);
    expect(new Set(lines.map((line) => line.team))).toEqual(new Set(['kenya', 'malawi', 'uganda']));
    // Two teams at once: a team keeps its pages on the sync's thread unless it says otherwise.
    const pageThreads = Object.fromEntries(
      lines.filter((line) => line.msg === 'Sync ok').map((line) => [line.team, line.pageThread]),
    );
    expect(pageThreads).toEqual({ kenya: false, malawi: true });
    const alone = await fleet.cli(['sync', '--team', 'kenya']);
    expect(alone.code, alone.stderr).toBe(0);
    expect(alone.logs).toMatch(/"pageThread":true/);

    const status = await fleet.cli(['status']);
    expect(status.code).toBe(4);
    expect(status.stdout).toMatch(/^kenya +ok +\S+ ago +\S+ +0$/m);
    expect(status.stdout).toMatch(/^uganda +run failed +never +- +0 +the last run \(#1\) failed$/m);
    expect(status.stdout).toMatch(/^Teams: 3, 1 not healthy \(uganda\);/m);
    const json = JSON.parse((await fleet.cli(['status', '--json'])).stdout);
    expect(json).toMatchObject({
      healthy: false,
      exit_code: 4,
      teams: [
        { team: 'kenya', healthy: true, exit_code: 0 },
        { team: 'malawi', healthy: true, exit_code: 0 },
        { team: 'uganda', healthy: false, exit_code: 4 },
      ],
    });
    expect(json.teams[0].resources.length).toBeGreaterThan(20);
    const one = await fleet.cli(['status', '--team', 'malawi']);
    expect([one.code, one.stdout]).toEqual([0, expect.stringMatching(/^Health: +ok$/m)]);

    // The server takes the key back: uganda syncs, and every team is healthy.
    uganda.server!.options.apiKeys = { admin: [ADMIN_KEY], nonAdmin: [] };
    const again = await fleet.cli(['sync', '--team', 'all', '--json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      exit_code: 0,
      teams: [
        { team: 'kenya', status: 'ok' },
        { team: 'malawi', status: 'ok' },
        { team: 'uganda', status: 'ok' },
      ],
    });
    await expectWarehouseEqualsSource(uganda.warehouse, uganda.dataset);
    expect((await fleet.cli(['status'])).code).toBe(0);
  }, 180_000);

  it('takes --team on every command of one team, and without it says so and lists the teams', async () => {
    fleet = new Fleet(dialect);
    const kenya = await fleet.add('kenya', { seed: 4, extra: 'audit: { enabled: true }' });
    await fleet.add('malawi', { seed: 5 });
    fleet.write();
    expect((await fleet.cli(['sync', '--team', 'kenya'])).code).toBe(0);
    expect((await fleet.cli(['sync', '--team', 'malawi'])).code).toBe(0);
    expect((await lastRunOf(kenya))?.status).toBe('ok');

    for (const argv of [
      ['sync'],
      ['runs'],
      ['reset', 'chats', '--yes'],
      ['audit', 'verify'],
      ['check'],
      ['config'],
    ]) {
      const result = await fleet.cli(argv);
      expect([argv, result.code]).toEqual([argv, 2]);
      expect(result.stderr).toContain(
        `${fleet.configFile} has a teams: list (kenya, malawi); this command works on one team: choose it with --team NAME.`,
      );
    }
    const unknown = await fleet.cli(['runs', '--team', 'kenia']);
    expect([unknown.code, unknown.stderr]).toEqual([
      2,
      expect.stringMatching(/--team "kenia" is not a team of .*did you mean "kenya"\?/),
    ]);
    expect((await fleet.cli(['runs', '--team', 'all'])).stderr).toMatch(
      /--team all works with sync, check, status and daemon/,
    );

    const runs = await fleet.cli(['runs', '--team', 'malawi', '--json']);
    expect(JSON.parse(runs.stdout)).toHaveLength(1);
    const reset = await fleet.cli(['reset', 'chats', '--team', 'malawi', '--yes']);
    expect([reset.code, reset.stdout]).toEqual([
      0,
      expect.stringMatching(/^Reset chats \(run 2\)/),
    ]);
    expect(
      JSON.parse((await fleet.cli(['runs', '--team', 'kenya', '--json'])).stdout),
    ).toHaveLength(1);

    const schema = await fleet.cli(['schema', '--team', 'kenya', '--format', 'json']);
    expect(schema.code).toBe(0);
    expect(JSON.parse(schema.stdout)).toBeTruthy();
    const files = await fleet.cli(['files', 'verify', '--team', 'malawi', '--json']);
    expect(files.code).toBe(0);
    expect(files.stdout).toContain('{');
    const verify = await fleet.cli(['audit', 'verify', '--team', 'kenya']);
    expect([verify.code, verify.stdout]).toEqual([0, expect.stringMatching(/intact/)]);
    const notAudited = await fleet.cli(['audit', 'verify', '--team', 'malawi']);
    expect(notAudited.code).toBe(1);

    const parquet = join(fleet.folder, 'parquet');
    const exported = await fleet.cli([
      'export',
      'parquet',
      parquet,
      '--team',
      'kenya',
      '--resources',
      'chats,users',
    ]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(readdirSync(parquet).sort()).toEqual(['chats.parquet', 'users.parquet']);

    const check = await fleet.cli(['check', '--team', 'all'], { OCS_MALAWI_API_KEY: '' });
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/^kenya:\n {2}✓ configuration/m);
    expect(check.stdout).toMatch(
      /^malawi:\n[\s\S]*✗ API key \(a team admin's\) +teams\[1\] \(malawi\)\.api_key_env: OCS_MALAWI_API_KEY is not set/m,
    );
    const config = await fleet.cli(['config', '--team', 'malawi', '--json']);
    expect(JSON.parse(config.stdout)).toMatchObject({
      team: { value: 'malawi' },
      api_key: { value: 'from env OCS_MALAWI_API_KEY' },
    });

    // serve --team: the team's warehouse as an export API.
    const stop = new AbortController();
    const port = await closedPort();
    const said: string[] = [];
    const publicKey = join(fleet.folder, 'restore-public.pem');
    writeFileSync(publicKey, teamKeys().publicKey);
    let ended: number | undefined;
    const argv = [
      'serve',
      '--team',
      'kenya',
      '--listen',
      `127.0.0.1:${port}`,
      '--public-key',
      publicKey,
    ];
    const serving = main(argv, {
      env: fleet.env({ OCS_SERVE_API_KEY: 'k'.repeat(40), OCS_LOG_LEVEL: 'warn' }),
      output: { out: (line) => said.push(line), err: (line) => said.push(line) },
      logStream: new Writable({ write: (_chunk, _encoding, done) => done() }),
      signal: stop.signal,
    }).then((code) => (ended = code));
    const manifest = await waitFor(
      async () => {
        if (ended !== undefined) throw new Error(`serve ended (${ended}): ${said.join('\n')}`);
        const response = await fetch(`http://127.0.0.1:${port}/api/export/manifest/`, {
          headers: { authorization: `Bearer ${'k'.repeat(40)}` },
        }).catch(() => undefined);
        return response?.status === 200 && ((await response.json()) as { entries: unknown[] });
      },
      'serve --team kenya',
      120_000,
    );
    expect(manifest.entries.length).toBeGreaterThan(20);
    stop.abort();
    expect(await serving).toBe(0);
  }, 180_000);

  it('the daemon: teams that can sync finish, exact, while one hangs, one is down and one refuses the key; SIGTERM stops them all', async () => {
    fleet = new Fleet(dialect);
    let hung = 0;
    const hang = await fleet.add('hang', {
      seed: 6,
      server: {
        beforePageTail: (info) => {
          if (info.resource !== 'chats') return Promise.resolve();
          hung += 1;
          return new Promise<void>(() => undefined);
        },
      },
      // Its requests never time out during the test: it hangs as long as the test wants.
      extra: 'http: { request_timeout_seconds: 3600 }',
    });
    const kenya = await fleet.add('kenya', { seed: 7 });
    await fleet.add('down', { seed: 8, server: false });
    await fleet.add('revoked', {
      seed: 9,
      server: { apiKeys: { admin: ['another-key'], nonAdmin: [] } },
    });
    const malawi = await fleet.add('malawi', { seed: 10 });
    // Two slots: the hanging team holds one for good; the four others share the other.
    fleet.write(
      "teams_at_once: 2\nschedule: '0 0 1 1 *'\nfull_refresh_schedule: 'off'\nhealth: { listen: '127.0.0.1:0' }",
    );
    const daemon = startCli(['daemon'], fleet.env({ OCS_LOG_LEVEL: 'info' }));
    const url = await daemon.healthUrl();
    const health = async (query = '') => {
      const response = await fetch(`${url}/healthz${query}`);
      return { status: response.status, body: (await response.json()) as HealthBody };
    };

    await waitFor(() => hung > 0, 'the hanging team to hang', 120_000);
    const done = await waitFor(
      async () => {
        const { body } = await health();
        const finished = ['kenya', 'malawi', 'down', 'revoked'].every(
          (team) => body.teams[team]!.lastRunStatus !== null,
        );
        return finished && body;
      },
      'the four other teams to finish',
      120_000,
    );
    // They finished while the hanging team still hangs, in its first run.
    expect(hung).toBe(1);
    expect(done.teams.hang).toMatchObject({ running: true, lastRunStatus: null, status: 'ok' });
    // Its last step: the page before the one it hangs on.
    expect(done.teams.hang!.stage).toMatch(/^syncing /);
    expect(done.teams.kenya).toMatchObject({ status: 'ok', lastRunStatus: 'ok' });
    expect(done.teams.malawi).toMatchObject({ status: 'ok', lastRunStatus: 'ok' });
    const all = await health();
    expect(all.status).toBe(503);
    expect(all.body.unhealthy).toEqual(['down', 'revoked']);
    expect(all.body.teams.revoked!.reason).toMatch(/The server refused the API key \(HTTP 401\)/);
    expect(all.body.teams.down!.reason).toMatch(/^The last run failed: /);
    expect((await health('?team=kenya')).status).toBe(200);
    expect((await health('?team=down')).status).toBe(503);
    expect((await health('?team=nope')).status).toBe(404);
    await expectWarehouseEqualsSource(kenya.warehouse, kenya.dataset);
    await expectWarehouseEqualsSource(malawi.warehouse, malawi.dataset);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^ocs_sync_runs_total\{kind="initial",status="ok",team="kenya"\} 1$/m);
    expect(metrics).toMatch(
      /^ocs_sync_runs_total\{kind="initial",status="failed",team="revoked"\} 1$/m,
    );
    expect(metrics).toMatch(/^ocs_sync_run_in_progress\{team="hang"\} 1$/m);

    expect(await daemon.stop()).toBe(0);
    expect((await lastRunOf(hang))?.status).toBe('interrupted');
    const failures = daemon
      .logs()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.msg === 'Sync run failed; the daemon keeps running');
    expect(failures.map((line) => line.team).sort()).toEqual(['down', 'revoked']);
  }, 180_000);
});

describe('choosing the teams a daemon runs', () => {
  it('runs those of --teams or of --shard i/n, and refuses what cannot be', async () => {
    fleet = new Fleet('sqlite');
    for (const [index, name] of ['kenya', 'malawi', 'uganda', 'tanzania'].entries()) {
      await fleet.add(name, { seed: 20 + index });
    }
    fleet.write(
      "schedule: '0 0 1 1 *'\nfull_refresh_schedule: 'off'\nhealth: { listen: '127.0.0.1:0' }",
    );
    const teamsOf = async (argv: string[]) => {
      const daemon = startCli(argv, fleet!.env({ OCS_LOG_LEVEL: 'info' }));
      const started = await waitFor(
        () => /"teams":(\[[^\]]*\]).*"msg":"Daemon started for/.exec(daemon.logs())?.[1],
        'the daemon to start',
        120_000,
      );
      expect(await daemon.stop()).toBe(0);
      return JSON.parse(started) as string[];
    };
    expect(await teamsOf(['daemon', '--teams', 'uganda,kenya'])).toEqual(['uganda', 'kenya']);
    // Shards by name (config/teams.ts, shardOfTeam): of 2, uganda and tanzania are 0.
    expect(await teamsOf(['daemon', '--shard', '0/2'])).toEqual(['uganda', 'tanzania']);
    expect(await teamsOf(['daemon', '--shard', '1/2'])).toEqual(['kenya', 'malawi']);
    expect(await teamsOf(['--team', 'malawi', 'daemon'])).toEqual(['malawi']);

    const refused = async (argv: string[]) => {
      const result = await fleet!.cli(argv);
      expect(result.code, result.stderr).toBe(2);
      return result.stderr;
    };
    expect(await refused(['daemon', '--teams', 'kenya', '--shard', '0/2'])).toMatch(
      /--teams and --shard each choose the teams to run; give one of them/,
    );
    expect(await refused(['daemon', '--shard', '2/2'])).toMatch(
      /--shard numbers shards from 0 to 1; got 2/,
    );
    expect(await refused(['daemon', '--teams', 'kenya,zambia'])).toMatch(
      /--team "zambia" is not a team/,
    );
    const single = await runCli(['daemon', '--shard', '0/2'], {
      OCS_BASE_URL: 'http://127.0.0.1:1',
      OCS_API_KEY: 'k',
    });
    expect(single.code).toBe(2);
    expect(single.stderr).toMatch(
      /--shard chooses teams of a configuration with a teams: list; this one has none/,
    );
    const noTeams = await runCli(['runs', '--team', 'kenya'], {});
    expect(noTeams.stderr).toMatch(/--team "kenya": this configuration has no teams: list/);
  }, 180_000);
});

describe.skipIf(!splitDialects.includes('postgres'))('a schema and roles per team', () => {
  it("the docs' PostgreSQL permissions keep one team's schema from another's roles", async () => {
    const [block] = docsSqlBlocks('teams-grants');
    expect(block).toBeDefined();
    const pg = (await import('pg')).default;
    const base = new URL(process.env.OCS_TEST_POSTGRES_URL!);
    const suffix = Math.random().toString(36).slice(2, 8);
    const database = `ocs_docs_teams_${suffix}`;
    const urlOf = (user?: string, password?: string) => {
      const url = new URL(base);
      url.pathname = `/${database}`;
      if (user !== undefined) {
        url.username = user;
        url.password = password ?? '';
      }
      return url.toString();
    };
    const admin = new pg.Client({ connectionString: base.toString() });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    const owner = new pg.Client({ connectionString: urlOf() });
    await owner.connect();
    const names = (team: string) => ({
      role: `ocs_${team}_${suffix}`,
      analysts: `${team}_analysts_${suffix}`,
      password: `pw-${team}-${suffix}`,
    });
    const asWritten = (team: string) =>
      block!
        .replace(/\bocs_kenya\b/g, names(team).role)
        .replace(/\bkenya_analysts\b/g, names(team).analysts)
        .replace(/\bkenya\b/g, team)
        .replace(/\bDATABASE ocs\b/g, `DATABASE ${database}`)
        .replace("'change-me'", `'${names(team).password}'`);
    fleet = new Fleet('postgres');
    try {
      for (const team of ['kenya', 'malawi']) await owner.query(asWritten(team));
      const kenya = await fleet.add('kenya', { seed: 30 });
      const malawi = await fleet.add('malawi', { seed: 31 });
      // Each team writes as its own role, its URL (and password) from a variable of its own.
      writeFileSync(
        fleet.configFile,
        [
          'files: { enabled: false }',
          `private_key_file: ${fleet.keyFile}`,
          'teams:',
          ...[kenya, malawi].map((team) =>
            [
              `  - name: ${team.name}`,
              `    base_url: ${team.baseUrl}`,
              `    api_key_env: ${keyVariable(team.name)}`,
              `    warehouse: { schema: ${team.name}, url_env: OCS_${team.name.toUpperCase()}_WAREHOUSE_URL }`,
            ].join('\n'),
          ),
        ].join('\n'),
      );
      const env = {
        OCS_KENYA_WAREHOUSE_URL: urlOf(names('kenya').role, names('kenya').password),
        OCS_MALAWI_WAREHOUSE_URL: urlOf(names('malawi').role, names('malawi').password),
      };
      const sync = await fleet.cli(['sync', '--team', 'all'], env);
      expect(sync.code, `${sync.stdout}${sync.stderr}`).toBe(0);
      expect(sync.stdout + sync.stderr + sync.logs).not.toContain(names('kenya').password);

      const asRole = async (team: string) => {
        const client = new pg.Client({
          connectionString: urlOf(names(team).role, names(team).password),
        });
        await client.connect();
        return client;
      };
      const kenyaWriter = await asRole('kenya');
      try {
        const [own] = (await kenyaWriter.query('SELECT count(*) AS n FROM kenya.chats')).rows;
        expect(Number(own.n)).toBe(kenya.dataset.count('chats'));
        for (const statement of [
          'SELECT count(*) FROM malawi.chats',
          'CREATE TABLE malawi.planted (id int)',
          'CREATE TABLE public.planted (id int)',
        ]) {
          await expect(kenyaWriter.query(statement), statement).rejects.toThrow(
            /permission denied/,
          );
        }
      } finally {
        await kenyaWriter.end();
      }
      // Kenya's analysts read kenya's tables and the views ocs-sync made later, and nothing else.
      await owner.query(`SET ROLE ${names('kenya').analysts}`);
      const [read] = (await owner.query('SELECT count(*) AS n FROM kenya.chats__live')).rows;
      expect(Number(read.n)).toBe(kenya.dataset.count('chats'));
      for (const statement of [
        'SELECT count(*) FROM malawi.chats',
        'UPDATE kenya.chats SET id = id WHERE false',
        'CREATE TABLE kenya.planted (id int)',
      ]) {
        await expect(owner.query(statement), statement).rejects.toThrow(/permission denied/);
      }
      await owner.query('RESET ROLE');
    } finally {
      await owner.end();
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      for (const team of ['kenya', 'malawi']) {
        await admin.query(`DROP ROLE IF EXISTS ${names(team).role}`);
        await admin.query(`DROP ROLE IF EXISTS ${names(team).analysts}`);
      }
      await admin.end();
    }
  }, 180_000);
});

describe('secrets written where a teams: configuration names their source', () => {
  it('are never shown, and a team entry refuses what may only come from the environment', async () => {
    fleet = new Fleet('sqlite');
    const key = 'AbCdEf12.s3cr3tKeyThatSatInTheFile';
    const password = 'Sup3rS3cretPW';
    const hexKey = 'abcdef0123456789abcdef0123456789';
    const passphrase = 'correct horse battery staple';
    writeFileSync(
      fleet.configFile,
      [
        'base_url: https://chat.example.org',
        'teams:',
        `  - { name: kenya, api_key_env: '${key}', warehouse: { url: ./k.db } }`,
        `  - { name: malawi, api_key_env: OCS_MALAWI_API_KEY, warehouse: { url_env: 'postgres://ocs:${password}@db/ocs' } }`,
        `  - { name: uganda, api_key_env: OCS_UGANDA_API_KEY, private_key_passphrase: '${passphrase}', warehouse: { url: ./u.db } }`,
        `  - { name: zambia, api_key_env: ${hexKey}, warehouse: { url_env: ${hexKey} } }`,
        '',
      ].join('\n'),
    );
    const result = await fleet.cli(['sync', '--team', 'all']);
    expect(result.code).toBe(1);
    const shown = result.stdout + result.stderr + result.logs;
    for (const secret of [key, password, passphrase, hexKey]) expect(shown).not.toContain(secret);
    expect(result.stderr).toContain(
      'teams.yaml:3: teams[0] (kenya).api_key_env must be the name of an environment variable (letters, digits and _), such as OCS_KENYA_API_KEY; the value is not shown, as it may be the key itself',
    );
    expect(result.stderr).toContain(
      'teams.yaml:4: teams[1] (malawi).warehouse.url_env must be the name of an environment variable (letters, digits and _), such as OCS_KENYA_WAREHOUSE_URL; the value is not shown, as it may be the URL itself',
    );
    expect(result.stderr).toContain(
      "teams.yaml:5: teams[2] (uganda).private_key_passphrase may only come from the environment (OCS_PRIVATE_KEY_PASSPHRASE, which every team shares), so that it never sits in a file; remove it from the team's entry",
    );
    // A name a shell could set, but not written as variables are: maybe a key; not shown.
    expect(result.stderr).toContain(
      "teams.yaml:6: teams[3] (zambia).warehouse.url_env: the variable it names (not shown) is not set; set it to the team's warehouse URL",
    );

    // The key's variable is read when the team syncs: named only when written as variables are.
    writeFileSync(
      fleet.configFile,
      [
        'teams:',
        `  - { name: zambia, base_url: https://chat.example.org, api_key_env: ${hexKey}, warehouse: { url: '${join(fleet.folder, 'z.db')}' }, files: { enabled: false } }`,
        `  - { name: kenya, base_url: https://chat.example.org, api_key_env: OCS_KENYA_KEY, warehouse: { url: '${join(fleet.folder, 'k.db')}' }, files: { enabled: false } }`,
        // A key where its file's path belongs: a path without a / is not shown either.
        `  - { name: malawi, base_url: https://chat.example.org, api_key_file: '${key}', warehouse: { url: '${join(fleet.folder, 'm.db')}' }, files: { enabled: false } }`,
        '',
      ].join('\n'),
    );
    const unset = await fleet.cli(['sync', '--team', 'all']);
    expect(unset.code).toBe(1);
    const text = unset.stdout + unset.stderr + unset.logs;
    expect(text).not.toContain(hexKey);
    expect(text).not.toContain(key);
    expect(text).toContain(
      'teams[2] (malawi).api_key_file: The API key file (name not shown: it has no / and may be a key written there by mistake; write a file of this folder as ./NAME) does not exist.',
    );
    expect(text).toContain(
      'teams[0] (zambia).api_key_env: the variable it names (not shown) is not set (or empty)',
    );
    expect(text).toContain('teams[1] (kenya).api_key_env: OCS_KENYA_KEY is not set (or empty)');
    const explained = await fleet.cli(['config', '--team', 'zambia']);
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).not.toContain(hexKey);
  });
});

describe('key files others may read', () => {
  it('are warned about by every sync that reads them, and shown by check, each with its chmod', async () => {
    fleet = new Fleet('sqlite');
    const kenya = await fleet.add('kenya', { seed: 40 });
    const apiKeyFile = join(fleet.folder, 'kenya-api-key');
    writeFileSync(apiKeyFile, `${ADMIN_KEY}\n`);
    expect((await runCli(['keygen', '--signing', '--out', fleet.folder], {})).code).toBe(0);
    const signingKeyFile = join(fleet.folder, 'ocs-audit-signing.key');
    writeFileSync(
      fleet.configFile,
      [
        'teams:',
        '  - name: kenya',
        `    base_url: ${kenya.baseUrl}`,
        `    api_key_file: ${apiKeyFile}`,
        `    private_key_file: ${fleet.keyFile}`,
        `    warehouse: { url: '${kenya.warehouse.env.OCS_WAREHOUSE_URL}' }`,
        `    files: { dir: '${kenya.warehouse.filesDir}' }`,
        `    audit: { enabled: true, signing_key_file: ${signingKeyFile}, checkpoint_file: ${join(fleet.folder, 'checkpoints.jsonl')} }`,
        '',
      ].join('\n'),
    );
    const keys = [
      { what: 'API key file', file: apiKeyFile, mode: 0o644 },
      { what: 'Private key file', file: fleet.keyFile, mode: 0o640 },
      { what: 'Audit signing key file', file: signingKeyFile, mode: 0o604 },
    ];
    for (const { file, mode } of keys) chmodSync(file, mode);
    const modeText = (mode: number) => `0${mode.toString(8)}`;

    for (const argv of [
      ['--team', 'kenya', 'sync'],
      ['sync', '--team', 'all'],
    ]) {
      const synced = await fleet.cli(argv);
      expect(synced.code, synced.logs.slice(-2000)).toBe(0);
      for (const { what, file, mode } of keys) {
        expect(synced.logs, `${argv.join(' ')}: ${what}`).toContain(
          `${what} ${file} is accessible to group or others (mode ${modeText(mode)}); restrict it with: chmod 600 ${file}`,
        );
      }
    }
    const checked = await fleet.cli(['check', '--team', 'all']);
    expect(checked.code, checked.stdout).toBe(0);
    for (const { what, file, mode } of keys) {
      expect(checked.stdout).toMatch(
        new RegExp(
          `^ {2}! key files private +${what} ${file} can be read by group or others \\(mode ${modeText(mode)}\\)\\n +fix: It holds a key: chmod 600 ${file}$`,
          'm',
        ),
      );
    }

    for (const { file } of keys) chmodSync(file, 0o600);
    const quiet = await fleet.cli(['--team', 'kenya', 'sync']);
    expect(quiet.code).toBe(0);
    expect(quiet.logs).not.toMatch(/accessible to group or others/);
    expect((await fleet.cli(['check', '--team', 'kenya'])).stdout).toMatch(
      /^ {2}✓ key files private +\S+kenya-api-key, \S+private\.pem, \S+ocs-audit-signing\.key$/m,
    );
  }, 60_000);
});

describe("a team's warehouse URL given only where it runs", () => {
  it('is needed by the commands that run the team, and by no other', async () => {
    fleet = new Fleet('sqlite');
    const kenya = await fleet.add('kenya', { seed: 50 });
    const malawi = await fleet.add('malawi', { seed: 51 });
    writeFileSync(
      fleet.configFile,
      [
        `private_key_file: ${fleet.keyFile}`,
        'files: { enabled: false }',
        'teams:',
        ...[kenya, malawi].map((team) =>
          [
            `  - name: ${team.name}`,
            `    base_url: ${team.baseUrl}`,
            `    api_key_env: ${keyVariable(team.name)}`,
            `    warehouse: { url_env: OCS_${team.name.toUpperCase()}_WAREHOUSE_URL }`,
          ].join('\n'),
        ),
        '',
      ].join('\n'),
    );
    // As kenya's job is given it: kenya's URL only.
    const env = { OCS_KENYA_WAREHOUSE_URL: kenya.warehouse.env.OCS_WAREHOUSE_URL! };
    const synced = await fleet.cli(['sync', '--team', 'kenya'], env);
    expect(synced.code, synced.stderr + synced.logs.slice(-1000)).toBe(0);
    expect((await lastRunOf(kenya))?.status).toBe('ok');
    expect(malawi.server!.requests).toHaveLength(0);
    const unset =
      "teams.yaml:11: teams[1] (malawi).warehouse.url_env: OCS_MALAWI_WAREHOUSE_URL is not set; set it to the team's warehouse URL";
    for (const argv of [
      ['sync', '--team', 'all'],
      ['sync', '--team', 'malawi'],
      ['daemon', '--teams', 'kenya,malawi'],
      ['status'],
    ]) {
      const refused = await fleet.cli(argv, env);
      expect(refused.code, argv.join(' ')).toBe(1);
      expect(refused.stderr.replaceAll(fleet.configFile, 'teams.yaml'), argv.join(' ')).toContain(
        unset,
      );
    }
    expect(malawi.server!.requests).toHaveLength(0);
  }, 60_000);
});
