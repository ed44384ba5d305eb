/**
 * Metrics that outlive a run: `sync` pushes its run's gauges to a real Pushgateway (Debian's
 * `prometheus-pushgateway`, on a loopback port) and writes them for node_exporter's textfile
 * collector, through the CLI on every dialect. A group is the team's latest run, and a failed run
 * still carries the last success the warehouse records; a Pushgateway that is down, silent or
 * refuses is one warning and never fails the run; a run refused for the writer lock is no run
 * and sends nothing.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { openWarehouse } from '../src/warehouse/open.js';
import {
  closeCliTestBed,
  openCliTestBed,
  runCli,
  splitDialects,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  type CliTestBed,
} from './support.js';
import {
  freePort,
  missingPrograms,
  startPushgateway,
  type ChildServer,
} from './prometheus-support.js';

const skipReason = missingPrograms('pushgateway');
if (skipReason) console.log(`Pushgateway tests skipped: ${skipReason}`);

const CONFIG =
  'http:\n  min_retry_delay_ms: 5\n  max_retry_delay_seconds: 1\n  max_attempts: 2\nlock:\n  wait_seconds: 0\nmetrics:\n  push_timeout_seconds: 2\n';

/** One group's samples from a Pushgateway's /metrics: `name{labels but job, team, instance}`. */
async function groupOf(gateway: ChildServer, team: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
    if (!match) continue;
    const labels = [...match[2]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(
      ([, name, value]) => [name!, value!] as const,
    );
    const of = Object.fromEntries(labels);
    if (of.job !== 'ocs-sync' || of.team !== team) continue;
    const rest = labels
      .filter(([name]) => !['job', 'team', 'instance'].includes(name))
      .map(([name, value]) => `${name}="${value}"`)
      .join(',');
    samples.set(rest === '' ? match[1]! : `${match[1]}{${rest}}`, Number(match[3]));
  }
  return samples;
}

/** The warnings a run logged about its metrics (its data's own, such as files the server lacks, aside). */
const warnings = (logs: string) =>
  logs
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .filter((line) => line.level >= 40 && /metrics|Pushgateway/.test(line.msg));

describe.skipIf(skipReason !== undefined).each(splitDialects)(
  'the metrics of a run that exits (%s)',
  (dialect) => {
    let gateway: ChildServer;
    let server: FakeServer;
    let bed: CliTestBed;
    const dataset = createSampleDataset({ rowsPerResource: 3, seed: 45 });

    beforeAll(async () => {
      gateway = await startPushgateway();
    });
    afterAll(async () => gateway?.stop());
    beforeEach(async () => {
      server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
      bed = await openCliTestBed(dialect, CONFIG);
    });
    afterEach(() => closeCliTestBed(bed, server));

    const sync = (extra: Record<string, string> = {}, argv: string[] = []) =>
      runCli(
        ['--config', bed.configFile, 'sync', ...argv],
        syncEnv(server.url, bed.warehouse.env, {
          OCS_PAGE_SIZE: '5',
          OCS_SCHEDULE: '*/10 * * * *',
          OCS_METRICS_PUSH_URL: gateway.url,
          ...extra,
        }),
      );

    it('pushes each run as its team’s group, replacing the last; a failed run keeps the last success', async () => {
      const team = `kenya-${dialect}`;
      const first = await sync({ OCS_METRICS_TEAM: team });
      expect(first.code, first.stderr).toBe(0);
      expect(warnings(first.logs)).toEqual([]);
      let group = await groupOf(gateway, team);
      expect(group.get('ocs_sync_last_run_status{kind="initial",status="ok"}')).toBe(1);
      const success = group.get('ocs_sync_last_success_timestamp_seconds')!;
      expect(success).toBeGreaterThan(1_700_000_000);
      expect(group.get('ocs_sync_last_run_timestamp_seconds')).toBe(success);
      expect(group.get('ocs_sync_last_run_rows')).toBeGreaterThan(50);
      expect(group.get('ocs_sync_last_run_pages')).toBeGreaterThan(10);
      expect(group.get('ocs_sync_consecutive_failures')).toBe(0);
      expect(group.get('ocs_sync_schedule_interval_seconds')).toBe(600);
      expect(group.get('ocs_sync_resource_rows{resource="chat_messages"}')).toBe(
        dataset.count('chat_messages'),
      );
      expect(
        group.get('ocs_sync_resource_newest_row_timestamp_seconds{resource="chat_messages"}'),
      ).toBeGreaterThan(0);
      expect(
        group.get('ocs_sync_resource_last_success_timestamp_seconds{resource="chat_messages"}'),
      ).toBeGreaterThan(0);
      expect(group.get('ocs_sync_files{status="ok"}')).toBeGreaterThan(0);
      // Gauges only: a counter pushed by a process that then ends would restart at every push.
      expect([...group.keys()].filter((name) => /_total|_bucket|_count\b/.test(name))).toEqual([]);

      // A resource the server refuses: a partial run, the resource's error by kind.
      server.faults.failNext(1, { kind: 'status', status: 400 }, { resource: 'tags' });
      expect((await sync({ OCS_METRICS_TEAM: team })).code).toBe(3);
      group = await groupOf(gateway, team);
      expect(group.get('ocs_sync_last_run_status{kind="incremental",status="partial"}')).toBe(1);
      expect(group.get('ocs_sync_resource_last_error{kind="http",resource="tags"}')).toBe(1);
      const partialSuccess = group.get('ocs_sync_last_success_timestamp_seconds')!;
      expect(partialSuccess).toBeGreaterThanOrEqual(success);

      // The server goes down: the group says so, and still holds the last success.
      server.faults.failNext(50, { kind: 'status', status: 503 }, { resource: 'manifest' });
      const down = await sync({ OCS_METRICS_TEAM: team });
      expect(down.code).toBe(1);
      group = await groupOf(gateway, team);
      expect(
        group.get(
          'ocs_sync_last_run_status{error="unavailable",kind="incremental",status="failed"}',
        ),
      ).toBe(1);
      expect(group.get('ocs_sync_last_success_timestamp_seconds')).toBe(partialSuccess);
      expect(group.get('ocs_sync_last_run_timestamp_seconds')).toBeGreaterThan(partialSuccess);
      expect(group.get('ocs_sync_consecutive_failures')).toBe(1);
      // Replaced, not added to: the partial run's resource error is gone with its push.
      expect(
        [...group.keys()].some((name) => name.startsWith('ocs_sync_resource_last_error')),
      ).toBe(false);
      expect(
        [...group.keys()].filter((name) => name.startsWith('ocs_sync_last_run_status')),
      ).toHaveLength(1);
      server.faults.clear();
      expect((await sync({ OCS_METRICS_TEAM: team })).code).toBe(0);
      group = await groupOf(gateway, team);
      expect(group.get('ocs_sync_consecutive_failures')).toBe(0);
      expect(group.get('ocs_sync_last_success_timestamp_seconds')).toBeGreaterThan(partialSuccess);
    });

    it('writes the textfile whole and renames it into place, with data_file_mode', async () => {
      const folder = join(bed.directory.path, 'textfile');
      mkdirSync(folder);
      const textfile = join(folder, 'ocs-sync.prom');
      const extra = {
        OCS_METRICS_PUSH_URL: '',
        OCS_METRICS_TEXTFILE: textfile,
        OCS_DATA_FILE_MODE: '0640',
      };
      const run = await sync(extra);
      expect(run.code, run.stderr).toBe(0);
      expect(statSync(textfile).mode & 0o777).toBe(0o640);
      const text = readFileSync(textfile, 'utf8');
      expect(text).toMatch(/^ocs_sync_last_run_status\{kind="initial",status="ok"\} 1$/m);
      expect(text).toMatch(/^# TYPE ocs_sync_last_success_timestamp_seconds gauge$/m);
      // No team label without metrics.team: a configuration of one team.
      expect(text).not.toContain('team=');
      server.faults.failNext(50, { kind: 'status', status: 503 }, { resource: 'manifest' });
      expect((await sync(extra)).code).toBe(1);
      expect(readFileSync(textfile, 'utf8')).toMatch(
        /^ocs_sync_last_run_status\{kind="incremental",status="failed",error="unavailable"\} 1$/m,
      );
      // Nothing left beside it.
      expect(readdirSync(folder)).toEqual(['ocs-sync.prom']);

      const nowhere = join(bed.directory.path, 'no-such-folder', 'ocs-sync.prom');
      server.faults.clear();
      const missing = await sync({ ...extra, OCS_METRICS_TEXTFILE: nowhere });
      expect(missing.code).toBe(0);
      const said = warnings(missing.logs);
      expect(said).toHaveLength(1);
      expect(said[0]!.msg).toMatch(
        /^Could not write the run's metrics to .*no-such-folder.*ENOENT/,
      );
      expect(existsSync(nowhere)).toBe(false);
    });

    it('is one warning, never a failed run, when the Pushgateway is down, silent or refuses', async () => {
      // Down: nothing listens.
      const closed = `http://127.0.0.1:${await freePort()}`;
      let run = await sync({ OCS_METRICS_PUSH_URL: closed });
      expect(run.code).toBe(0);
      let said = warnings(run.logs);
      expect(said).toHaveLength(1);
      expect(said[0]!.msg).toMatch(
        /^Could not push the run's metrics to the Pushgateway at .*ECONNREFUSED/,
      );

      // Silent: it takes the connection and never answers; the push gives up after its timeout.
      const sockets = new Set<Socket>();
      const silent: Server = createServer((socket) => void sockets.add(socket));
      await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
      const port = (silent.address() as { port: number }).port;
      try {
        run = await sync({ OCS_METRICS_PUSH_URL: `http://ocs:s3cret-pw@127.0.0.1:${port}` });
        expect(run.code).toBe(0);
        said = warnings(run.logs);
        expect(said).toHaveLength(1);
        expect(said[0]!.msg).toMatch(/no answer within 2 s/);
        expect(run.logs + run.stdout + run.stderr).not.toContain('s3cret-pw');
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((done) => silent.close(() => done()));
      }

      // Refuses: a group of another job holds one of our names as another type first, which the
      // Pushgateway's consistency check will not have beside ours.
      const strict = await startPushgateway();
      try {
        const conflicting = await fetch(`${strict.url}/metrics/job/other`, {
          method: 'PUT',
          body: '# TYPE ocs_sync_last_run_rows counter\nocs_sync_last_run_rows 1\n',
        });
        expect(conflicting.status).toBe(200);
        run = await sync({ OCS_METRICS_PUSH_URL: strict.url, OCS_METRICS_TEAM: 'refused' });
        expect(run.code).toBe(0);
        said = warnings(run.logs);
        expect(said).toHaveLength(1);
        expect(said[0]!.msg).toMatch(/push failed with status 400/);
        // The Pushgateway keeps none of it, and says when it refused (the PushRejected alert).
        const group = await groupOf(strict, 'refused');
        expect([...group.keys()].filter((name) => name.startsWith('ocs_sync_'))).toEqual([]);
        expect(group.get('push_failure_time_seconds')).toBeGreaterThan(
          group.get('push_time_seconds') ?? 0,
        );
      } finally {
        await strict.stop();
      }
    });

    it('is checked by `check`: the Pushgateway ready, the textfile’s folder writable; a warning otherwise', async () => {
      const metricsCheck = async (extra: Record<string, string>) => {
        const result = await runCli(
          ['--config', bed.configFile, 'check', '--json'],
          syncEnv(server.url, bed.warehouse.env, extra),
        );
        const checks = (JSON.parse(result.stdout) as { checks: Array<Record<string, string>> })
          .checks;
        return {
          code: result.code,
          check: checks.find((check) => check.name === 'metrics export'),
        };
      };
      expect((await metricsCheck({})).check).toBeUndefined();
      const textfile = join(bed.directory.path, 'ocs-sync.prom');
      const ready = await metricsCheck({
        OCS_METRICS_PUSH_URL: gateway.url.replace('http://', 'http://ocs:pw@'),
        OCS_METRICS_TEXTFILE: textfile,
      });
      expect(ready.code).toBe(0);
      expect(ready.check).toEqual({
        name: 'metrics export',
        status: 'ok',
        detail: `the Pushgateway at ${gateway.url} is ready; each run writes ${textfile}`,
      });
      const down = await metricsCheck({
        OCS_METRICS_PUSH_URL: `http://127.0.0.1:${await freePort()}`,
        OCS_METRICS_TEXTFILE: join(bed.directory.path, 'missing', 'ocs-sync.prom'),
      });
      expect(down.code).toBe(0);
      expect(down.check).toMatchObject({ status: 'warning' });
      expect(down.check!.detail).toMatch(
        /^the Pushgateway at http:\/\/127\.0\.0\.1:\d+: it cannot be reached: ECONNREFUSED; the textfile .*: its folder .*missing does not exist$/,
      );
      // check writes nothing: no file, no group.
      expect(existsSync(textfile)).toBe(false);
    });

    it('sends nothing for a run refused for the writer lock: no run, no group', async () => {
      expect((await sync({ OCS_METRICS_TEAM: `holder-${dialect}` })).code).toBe(0);
      const holder = await openWarehouse({
        url: bed.warehouse.env.OCS_WAREHOUSE_URL!,
        schema: bed.warehouse.env.OCS_WAREHOUSE_SCHEMA,
      });
      const lock = await holder.acquireLock(0);
      try {
        const refused = await sync({ OCS_METRICS_TEAM: `refused-lock-${dialect}` });
        expect(refused.code).toBe(3);
        expect(
          warnings(refused.logs)
            .map((line) => line.msg)
            .join('\n'),
        ).not.toMatch(/metrics/);
        expect((await groupOf(gateway, `refused-lock-${dialect}`)).size).toBe(0);
      } finally {
        await lock.release();
        await holder.close();
      }
    });
  },
);

describe.skipIf(skipReason !== undefined)('the metrics of `sync --team all`', () => {
  it('pushes a group per team, each labelled with its name (one team of the list too), and refuses metrics.team with teams:', async () => {
    const gateway = await startPushgateway();
    const folder = temporaryDirectory();
    const server = await startFakeServer({
      dataset: createSampleDataset({ rowsPerResource: 3, seed: 46 }),
      teamPublicKeyPem: teamKeys().publicKey,
    });
    try {
      const config = join(folder.path, 'teams.yaml');
      const teams = (extra: string) =>
        `${extra}teams:\n${['north', 'south']
          .map(
            (name) =>
              `  - name: ${name}\n    api_key_env: OCS_TEAM_KEY\n    warehouse: { url: ${join(folder.path, `${name}.db`)} }\n`,
          )
          .join('')}`;
      writeFileSync(config, teams(''));
      const env = {
        ...syncEnv(server.url, {}),
        OCS_API_KEY: '',
        OCS_TEAM_KEY: syncEnv(server.url, {}).OCS_API_KEY!,
        OCS_METRICS_PUSH_URL: gateway.url,
      };
      const run = await runCli(['--config', config, 'sync', '--team', 'all'], env);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      for (const team of ['north', 'south']) {
        const group = await groupOf(gateway, team);
        expect(group.get('ocs_sync_last_run_status{kind="initial",status="ok"}'), team).toBe(1);
      }
      // One team of the list, as a CronJob runs it: its group, labelled with its name.
      const one = await runCli(['--config', config, 'sync', '--team', 'north'], env);
      expect(one.code, one.stderr).toBe(0);
      expect(
        (await groupOf(gateway, 'north')).get(
          'ocs_sync_last_run_status{kind="incremental",status="ok"}',
        ),
      ).toBe(1);
      writeFileSync(config, teams('metrics:\n  team: north\n'));
      const refused = await runCli(['--config', config, 'sync', '--team', 'all'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /teams\.yaml:2: metrics\.team: with teams:, each team's metrics are labelled with its name/,
      );
    } finally {
      await server.close();
      await gateway.stop();
      folder.remove();
    }
  });
});
