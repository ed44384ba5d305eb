/**
 * The monitoring ocs-sync ships: deploy/prometheus (the alert rules, the same as a PrometheusRule,
 * their `promtool test rules` unit test, an example Prometheus configuration, the ServiceMonitor)
 * and deploy/grafana/ocs-sync.json. Checked with Debian's promtool (skipped, saying so, without
 * it) and kubectl kustomize; every metric they name is one ocs-sync exports, every runbook link a
 * section of docs/operating.md. test/prometheus.long.test.ts runs them in a real Prometheus.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { SyncMetrics } from '../src/daemon/metrics.js';
import { projectRoot } from '../src/package-info.js';
import { missingPrograms } from './prometheus-support.js';

const ROOT = projectRoot();
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
interface RuleGroup {
  name: string;
  rules: Rule[];
}

const rulesFile = parse(read('deploy/prometheus/ocs-sync.rules.yaml')) as { groups: RuleGroup[] };
const rules = rulesFile.groups.flatMap((group) => group.rules);

/** A panel of the dashboard with its queries. */
interface Panel {
  type: string;
  title: string;
  id: number;
  datasource?: { uid: string };
  targets?: Array<{ expr: string; refId: string; datasource?: { uid: string } }>;
}
export const dashboard = JSON.parse(read('deploy/grafana/ocs-sync.json')) as {
  uid: string;
  panels: Panel[];
  templating: {
    list: Array<{ name: string; type: string; query: unknown; includeAll?: boolean }>;
  };
};

/** Every name ocs-sync exports (a daemon of a fleet's team), histograms' series included. */
async function exportedNames(): Promise<Set<string>> {
  const metrics = new SyncMetrics({ team: 'kenya', fleet: true });
  const names = new Set<string>();
  for (const metric of await metrics.registry.getMetricsAsJSON()) {
    names.add(metric.name);
    for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
  }
  return names;
}

const promtoolMissing = missingPrograms('promtool');
if (promtoolMissing) console.log(`promtool checks skipped: ${promtoolMissing}`);

const kubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

describe('the alert rules', () => {
  it.skipIf(promtoolMissing !== undefined)(
    'pass promtool check rules, and the example configuration loads them',
    () => {
      const folder = join(ROOT, 'deploy/prometheus');
      const rulesCheck = spawnSync('promtool', ['check', 'rules', 'ocs-sync.rules.yaml'], {
        cwd: folder,
        encoding: 'utf8',
      });
      expect(rulesCheck.status, rulesCheck.stdout + rulesCheck.stderr).toBe(0);
      expect(rulesCheck.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
      const configCheck = spawnSync('promtool', ['check', 'config', 'prometheus.yml'], {
        cwd: folder,
        encoding: 'utf8',
      });
      expect(configCheck.status, configCheck.stdout + configCheck.stderr).toBe(0);
    },
  );

  it.skipIf(promtoolMissing !== undefined)(
    'pass their promtool unit tests, which test every alert',
    () => {
      const folder = join(ROOT, 'deploy/prometheus');
      const result = spawnSync('promtool', ['test', 'rules', 'ocs-sync.rules.test.yaml'], {
        cwd: folder,
        encoding: 'utf8',
      });
      expect(result.status, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toContain('SUCCESS');
      const tested = new Set(
        [...read('deploy/prometheus/ocs-sync.rules.test.yaml').matchAll(/alertname: (\w+)/g)].map(
          (match) => match[1],
        ),
      );
      expect(rules.map((rule) => rule.alert).filter((alert) => !tested.has(alert))).toEqual([]);
    },
  );

  it('are the same in the PrometheusRule as in the plain rules file', () => {
    const [resource] = parseAllDocuments(read('deploy/prometheus/prometheus-rule.yaml')).map(
      (document) => document.toJS() as { kind: string; spec: { groups: RuleGroup[] } },
    );
    expect(resource!.kind).toBe('PrometheusRule');
    expect(resource!.spec.groups).toEqual(rulesFile.groups);
  });

  it('each have a summary, a description, a severity and a runbook that docs/operating.md has', () => {
    const docs = read('docs/operating.md');
    const slug = (heading: string) =>
      heading
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-');
    const anchors = new Set([...docs.matchAll(/^#+ (.+)$/gm)].map((match) => slug(match[1]!)));
    expect(rules.length).toBeGreaterThanOrEqual(9);
    for (const rule of rules) {
      expect(rule.alert, rule.alert).toMatch(/^OcsSync[A-Za-z]+$/);
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      expect(rule.annotations.description, rule.alert).toBeTruthy();
      const url = new URL(rule.annotations.runbook_url!);
      expect(url.pathname, rule.alert).toBe('/docs/operating.md');
      const anchor = url.hash.slice(1);
      expect(anchors.has(anchor), `${rule.alert}: docs/operating.md#${anchor}`).toBe(true);
      // Its runbook entry is headed with its name.
      expect(anchor, rule.alert).toBe(rule.alert.toLowerCase());
    }
  });

  it('name only metrics ocs-sync exports, and the Pushgateway’s and Prometheus’s own', async () => {
    const exported = await exportedNames();
    const named = (text: string) =>
      [...text.matchAll(/\b(ocs_sync_\w+)/g)].map((match) => match[1]!);
    const unknown = [
      ...rules.flatMap((rule) => named(rule.expr)),
      ...dashboard.panels.flatMap((panel) =>
        (panel.targets ?? []).flatMap((target) => named(target.expr)),
      ),
    ].filter((name) => !exported.has(name));
    expect(unknown).toEqual([]);
    for (const rule of rules) {
      const others = [...rule.expr.matchAll(/\b([a-z_]+)\{/g)]
        .map((match) => match[1]!)
        .filter((name) => !name.startsWith('ocs_sync_'));
      for (const name of others) {
        expect(['up', 'push_time_seconds', 'push_failure_time_seconds'], rule.alert).toContain(
          name,
        );
      }
    }
  });
});

describe('the Grafana dashboard', () => {
  it('has a data source and a team variable, and every panel queries its team', () => {
    const variables = new Map(
      dashboard.templating.list.map((variable) => [variable.name, variable]),
    );
    expect(variables.get('datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    expect(variables.get('team')).toMatchObject({ type: 'query', includeAll: true });
    expect(JSON.stringify(variables.get('team')!.query)).toContain(
      'label_values(ocs_sync_last_run_timestamp_seconds, team)',
    );
    const panels = dashboard.panels.filter((panel) => panel.type !== 'row');
    expect(new Set(dashboard.panels.map((panel) => panel.id)).size).toBe(dashboard.panels.length);
    for (const panel of panels) {
      expect(panel.datasource?.uid, panel.title).toBe('${datasource}');
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets!) {
        expect(target.datasource?.uid, panel.title).toBe('${datasource}');
        if (!target.expr.startsWith('up{')) expect(target.expr, panel.title).toContain('$team');
      }
    }
    // What the issue asks it to show.
    const titles = panels.map((panel) => panel.title).join('\n');
    for (const title of [
      'Last run',
      'Rows per second',
      "Newest row's age",
      'Resource errors (last run)',
      'HTTP retries',
      'Files by status',
      'Audit archive',
      'Since the last push',
    ]) {
      expect(titles).toContain(title);
    }
  });
});

describe.skipIf(!kubectl)('deploy/prometheus, rendered', () => {
  it('holds the PrometheusRule and a ServiceMonitor that scrapes the shards’ Service as ocs-sync-daemon', () => {
    const render = (path: string) =>
      parseAllDocuments(
        execFileSync('kubectl', ['kustomize', join(ROOT, path)], { encoding: 'utf8' }),
      ).map(
        (document) =>
          document.toJS() as {
            kind: string;
            metadata: { name: string; labels?: Record<string, string> };
            spec: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- manifests are read as plain data
          },
      );
    const objects = render('deploy/prometheus');
    expect(objects.map((object) => object.kind).sort()).toEqual([
      'PrometheusRule',
      'ServiceMonitor',
    ]);
    const rule = objects.find((object) => object.kind === 'PrometheusRule')!;
    expect(rule.spec.groups).toEqual(rulesFile.groups);
    const monitor = objects.find((object) => object.kind === 'ServiceMonitor')!;
    const service = render('deploy/kubernetes/shards').find(
      (object) => object.kind === 'Service' && object.metadata.name === 'ocs-sync-metrics',
    )!;
    for (const [label, value] of Object.entries(
      monitor.spec.selector.matchLabels as Record<string, string>,
    )) {
      expect(service.metadata.labels?.[label], label).toBe(value);
    }
    expect(monitor.spec.endpoints).toEqual([
      expect.objectContaining({
        port: service.spec.ports[0].name,
        path: '/metrics',
        relabelings: [{ targetLabel: 'job', replacement: 'ocs-sync-daemon' }],
      }),
    ]);
  });
});
