/**
 * The shipped monitoring against the real thing: Debian's Prometheus and Pushgateway on loopback
 * ports, Prometheus configured by deploy/prometheus/prometheus.yml (its targets moved to the
 * test's, its intervals shortened to a second) with deploy/prometheus/ocs-sync.rules.yaml loaded
 * as shipped. A fleet's daemon runs one team and is scraped; two teams run as CronJobs do, a
 * `sync --team NAME` that pushes at its end. One team's server starts failing: its
 * OcsSyncRunsFailing turns firing in /api/v1/alerts, then resolves after a good run. Every query
 * of every panel of deploy/grafana/ocs-sync.json, and its team variable, returns series. The
 * daemon pushes its runs too, so its team is both scraped and pushed, as the alerts allow. Nothing
 * is timed: each step polls Prometheus with a generous deadline. Skipped, saying so, without the
 * programs.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { projectRoot } from '../src/package-info.js';
import { makeAuditKeys } from './audit-support.js';
import {
  freePort,
  missingPrograms,
  startPrometheus,
  startPushgateway,
  type ChildServer,
  type PrometheusServer,
} from './prometheus-support.js';
import {
  ADMIN_KEY,
  runCli,
  startCli,
  teamKeys,
  temporaryDirectory,
  waitFor,
  type BackgroundCli,
} from './support.js';

const ROOT = projectRoot();
const skipReason = missingPrograms('prometheus', 'pushgateway');
if (skipReason) console.log(`The real Prometheus test is skipped: ${skipReason}`);

const TEAMS = ['kenya', 'malawi', 'uganda'] as const;
type Team = (typeof TEAMS)[number];
/** Long enough for a loaded machine; nothing waits for it unless something is wrong. */
const DEADLINE_MS = 120_000;

describe.skipIf(skipReason !== undefined)(
  'the shipped rules and dashboard in a real Prometheus',
  () => {
    const folder = temporaryDirectory();
    const servers = new Map<Team, FakeServer>();
    let gateway: ChildServer | undefined;
    let prometheus: PrometheusServer | undefined;
    let daemon: BackgroundCli | undefined;
    let configFile: string;
    let env: Record<string, string>;

    /** A CronJob's run: `sync --team NAME`, pushing where its ConfigMap says. */
    const cronJobRun = (team: Team) =>
      runCli(['--config', configFile, 'sync', '--team', team], {
        ...env,
        OCS_METRICS_PUSH_URL: gateway!.url,
      });

    beforeAll(async () => {
      for (const [index, team] of TEAMS.entries()) {
        servers.set(
          team,
          await startFakeServer({
            dataset: createSampleDataset({ rowsPerResource: 4, seed: 450 + index }),
            teamPublicKeyPem: teamKeys().publicKey,
          }),
        );
      }
      const keys = await makeAuditKeys(folder.path);
      configFile = join(folder.path, 'teams.yaml');
      writeFileSync(
        configFile,
        [
          'http: { min_retry_delay_ms: 5, max_retry_delay_seconds: 1, max_attempts: 2 }',
          'lock: { wait_seconds: 0 }',
          'teams:',
          ...TEAMS.map((team) =>
            [
              `  - name: ${team}`,
              `    base_url: ${servers.get(team)!.url}`,
              '    api_key_env: OCS_TEAM_API_KEY',
              `    warehouse: { url: ${join(folder.path, `${team}.db`)} }`,
              // The daemon's team runs every 5 seconds, and keeps an audit archive.
              ...(team === 'kenya'
                ? [
                    "    schedule: '*/5 * * * * *'",
                    `    audit: { enabled: true, signing_key_file: ${keys.privateKeyFile}, checkpoint_file: ${keys.checkpointFile} }`,
                  ]
                : []),
            ].join('\n'),
          ),
        ].join('\n') + '\n',
      );
      env = {
        OCS_TEAM_API_KEY: ADMIN_KEY,
        OCS_PRIVATE_KEY: teamKeys().privateKey,
        OCS_LOG_LEVEL: 'warn',
      };
      gateway = await startPushgateway();

      // The daemon's team: a first sync and an audit verify, then the daemon, scraped.
      expect((await runCli(['--config', configFile, 'sync', '--team', 'kenya'], env)).code).toBe(0);
      const verified = await runCli(
        ['--config', configFile, 'audit', 'verify', '--team', 'kenya'],
        env,
      );
      expect(verified.code, verified.stdout + verified.stderr).toBe(0);
      const listen = `127.0.0.1:${await freePort()}`;
      daemon = startCli(['--config', configFile, 'daemon', '--teams', 'kenya'], {
        ...env,
        OCS_LOG_LEVEL: 'info',
        OCS_HEALTH_LISTEN: listen,
        // It pushes after each run too: scraped and pushed, its team still alerts once.
        OCS_METRICS_PUSH_URL: gateway.url,
      });
      await daemon.healthUrl();

      // The CronJobs' first runs: malawi's good, uganda's partial (its server refuses one resource).
      servers
        .get('uganda')!
        .faults.failNext(10_000, { kind: 'status', status: 400 }, { resource: 'tags' });
      expect((await cronJobRun('malawi')).code).toBe(0);
      expect((await cronJobRun('uganda')).code).toBe(3);

      // Prometheus as deploy/prometheus/prometheus.yml configures it, moved to these ports.
      const config = parse(
        readFileSync(join(ROOT, 'deploy/prometheus/prometheus.yml'), 'utf8'),
      ) as {
        global: Record<string, string>;
        rule_files: string[];
        scrape_configs: Array<{ job_name: string; static_configs: Array<{ targets: string[] }> }>;
      };
      config.global = { scrape_interval: '1s', evaluation_interval: '1s' };
      config.rule_files = config.rule_files.map((file) => `RULES_DIR/${file}`);
      const targets: Record<string, string> = {
        'ocs-sync-daemon': listen,
        pushgateway: new URL(gateway.url).host,
      };
      for (const job of config.scrape_configs) {
        expect(targets[job.job_name], job.job_name).toBeDefined();
        job.static_configs = [{ targets: [targets[job.job_name]!] }];
      }
      prometheus = await startPrometheus(stringify(config), {
        'ocs-sync.rules.yaml': readFileSync(
          join(ROOT, 'deploy/prometheus/ocs-sync.rules.yaml'),
          'utf8',
        ),
      });
    }, 300_000);

    afterAll(async () => {
      await daemon?.stop();
      await prometheus?.stop();
      await gateway?.stop();
      for (const server of servers.values()) await server.close();
      folder.remove();
    });

    /** Polls a query until it returns series. */
    const series = (expression: string, what = expression) =>
      waitFor(
        async () => {
          const result = await prometheus!.query(expression);
          return result.length > 0 && result;
        },
        what,
        DEADLINE_MS,
      );

    const runsFailing = async (team: Team) =>
      (await prometheus!.alerts()).filter(
        (alert) => alert.labels.alertname === 'OcsSyncRunsFailing' && alert.labels.team === team,
      );

    it('scrapes the daemon and the pushed groups of the CronJobs’ runs', async () => {
      const up = await series('up{job="ocs-sync-daemon"} == 1', 'the daemon scraped');
      expect(up).toHaveLength(1);
      const last = await series(
        'ocs_sync_last_run_status{team=~"malawi|uganda"}',
        'the pushed groups',
      );
      expect(
        last
          .map(({ metric }) => `${metric.job} ${metric.team} ${metric.kind} ${metric.status}`)
          .sort(),
      ).toEqual(['ocs-sync malawi initial ok', 'ocs-sync uganda initial partial']);
      const daemonRun = await series(
        'ocs_sync_last_run_status{job="ocs-sync-daemon",team="kenya"}',
        "the daemon's runs",
      );
      expect(daemonRun[0]!.metric.status).toBe('ok');
      const daemonPushed = await series(
        'ocs_sync_last_run_status{job="ocs-sync",team="kenya"}',
        "the daemon's runs pushed",
      );
      expect(daemonPushed[0]!.metric.status).toBe('ok');
    });

    it('fires OcsSyncRunsFailing when a team’s server starts failing, and resolves it after a good run', async () => {
      const malawi = servers.get('malawi')!;
      const [before] = await series(
        'ocs_sync_last_success_timestamp_seconds{team="malawi"} > 0',
        "malawi's last success",
      );
      expect(await runsFailing('malawi')).toEqual([]);

      malawi.faults.failNext(10_000, { kind: 'status', status: 503 }, { resource: 'manifest' });
      for (let run = 0; run < 2; run += 1) expect((await cronJobRun('malawi')).code).toBe(1);
      const [firing] = await waitFor(
        async () => {
          const alerts = await runsFailing('malawi');
          return alerts.some((alert) => alert.state === 'firing') && alerts;
        },
        'OcsSyncRunsFailing to fire for malawi',
        DEADLINE_MS,
      );
      console.log(`Observed in /api/v1/alerts: ${JSON.stringify(firing)}`);
      expect(firing).toMatchObject({
        state: 'firing',
        labels: { alertname: 'OcsSyncRunsFailing', team: 'malawi', severity: 'warning' },
        annotations: {
          summary: 'ocs-sync (malawi): the last 2 runs failed',
          runbook_url: 'https://ocs-sync.example.org/docs/operating.md#ocssyncrunsfailing',
        },
      });
      // The failed runs' pushes kept the last success, and said what failed them.
      expect(
        (await prometheus!.query('ocs_sync_last_success_timestamp_seconds{team="malawi"}'))[0]!
          .value[1],
      ).toBe(before!.value[1]);
      await series(
        'ocs_sync_last_run_status{team="malawi",status="failed",error="unavailable"}',
        'the failed run pushed',
      );
      // No other team's runs are failing.
      for (const team of ['kenya', 'uganda'] as const) expect(await runsFailing(team)).toEqual([]);

      malawi.faults.clear();
      expect((await cronJobRun('malawi')).code).toBe(0);
      await waitFor(
        async () => (await runsFailing('malawi')).length === 0,
        'OcsSyncRunsFailing to resolve for malawi',
        DEADLINE_MS,
      );
      console.log(
        'Observed: OcsSyncRunsFailing for malawi gone from /api/v1/alerts after a good run',
      );
      await series(
        'ocs_sync_last_run_status{team="malawi",kind="incremental",status="ok"}',
        'the good run pushed',
      );
    });

    it('answers every query of every dashboard panel, and the team variable, with series', async () => {
      const dashboard = JSON.parse(
        readFileSync(join(ROOT, 'deploy/grafana/ocs-sync.json'), 'utf8'),
      ) as {
        panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }>;
      };
      const queries = dashboard.panels
        .filter((panel) => panel.type !== 'row')
        .flatMap((panel) =>
          panel.targets!.map((target) => ({ panel: panel.title, expr: target.expr })),
        );
      expect(queries.length).toBeGreaterThan(15);
      // Polled together, until each has answered once (or the deadline, naming those that never did).
      const unanswered = new Set(
        queries.map(
          ({ panel, expr }) =>
            `${panel}\t${expr.replaceAll('$team', TEAMS.join('|')).replaceAll('$__rate_interval', '15s')}`,
        ),
      );
      await waitFor(
        async () => {
          for (const query of [...unanswered]) {
            const result = await prometheus!.query(query.split('\t')[1]!);
            if (result.length > 0) unanswered.delete(query);
          }
          return unanswered.size === 0;
        },
        'every panel to show data',
        DEADLINE_MS,
      ).catch(() => undefined);
      expect([...unanswered]).toEqual([]);
      const response = await fetch(
        `${prometheus!.url}/api/v1/label/team/values?match[]=${encodeURIComponent('ocs_sync_last_run_timestamp_seconds')}`,
      );
      const values = (await response.json()) as { data: string[] };
      expect(values.data.sort()).toEqual([...TEAMS]);
    }, 300_000);
  },
);
