/**
 * deploy/kubernetes, rendered with `kubectl kustomize` (the client only; no cluster), checked
 * object by object against what docs/operating.md ("Many teams") promises, and its command lines
 * run: the CronJob's `sync --team NAME` and the shard's `daemon --shard I/N`, with the rendered
 * arguments, environment, configuration and mounted keys (placeholders filled in, paths moved into
 * a temporary folder), against fake servers, on every dialect. One more run, as root where the
 * machine allows it, puts the CronJob's command in a mount namespace whose root is read-only but
 * for the volumes the manifest mounts, as user 1000. Skipped, saying why, without kubectl.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parseDocument } from 'yaml';
import { parseConfigText, resolveSetup } from '../src/config/load.js';
import { shardOfTeam, parseShard } from '../src/config/teams.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { projectRoot } from '../src/package-info.js';
import { openWarehouseReader } from '../src/warehouse/open.js';
import { freePort, missingPrograms, startPushgateway } from './prometheus-support.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3Server } from './s3-server.js';
import {
  ADMIN_KEY,
  CLI_FROM_SOURCE,
  createTestWarehouse,
  runCli,
  startCli,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  waitFor,
  type TestWarehouse,
} from './support.js';

type K8sObject = {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
} & Record<
  string,
  any // eslint-disable-line @typescript-eslint/no-explicit-any -- manifests are read as plain data
>;

const ROOT = projectRoot();
const pushgatewayMissing = missingPrograms('pushgateway');
const kubectl = (() => {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!kubectl)
  console.log(
    'deploy/kubernetes tests skipped: no kubectl on PATH (the client renders kustomize without a cluster)',
  );

type Layout = 'cronjobs' | 'shards' | 'cronjobs-bucket';

function render(layout: Layout): K8sObject[] {
  const text = execFileSync('kubectl', ['kustomize', join(ROOT, 'deploy/kubernetes', layout)], {
    encoding: 'utf8',
  });
  return parseAllDocuments(text).map((document) => document.toJS() as K8sObject);
}

const ofKind = (objects: K8sObject[], kind: string) =>
  objects.filter((object) => object.kind === kind);
const named = (objects: K8sObject[], kind: string, name: string) =>
  objects.find((object) => object.kind === kind && object.metadata.name === name);

/** The pod spec of a CronJob or a Deployment. */
const podOf = (object: K8sObject) =>
  object.kind === 'CronJob'
    ? object.spec.jobTemplate.spec.template.spec
    : object.spec.template.spec;

/** The figures docs/operating.md gives for a layout: CPU request, memory request and limit. */
function documentedResources(layout: string): string[] {
  const docs = readFileSync(join(ROOT, 'docs/operating.md'), 'utf8');
  const row = docs.split('\n').find((line) => line.startsWith(`| \`${layout}\``));
  expect(row, `docs/operating.md has a row for ${layout}`).toBeDefined();
  return row!
    .split('|')
    .map((cell) => cell.trim())
    .slice(-4, -1);
}

/** The fleet configuration the ConfigMap holds. */
function teamsYaml(objects: K8sObject[]): string {
  const [config] = ofKind(objects, 'ConfigMap').filter((object) =>
    object.metadata.name.startsWith('ocs-sync-teams'),
  );
  return config!.data['teams.yaml'] as string;
}

/** The teams of the configuration, in its order. */
const teamsOf = (objects: K8sObject[]) =>
  [...teamsYaml(objects).matchAll(/^ {2}- name: (\S+)$/gm)].map((match) => match[1]!);

/** The variable a team's warehouse URL (its own role's) is given in. */
const warehouseVariable = (team: string) => `OCS_${team.toUpperCase()}_WAREHOUSE_URL`;

/** The teams a workload runs: a CronJob's `--team`, a shard's by the shard rule. */
function teamsRunBy(workload: K8sObject, teams: string[]): string[] {
  const args = podOf(workload).containers[0].args as string[];
  const team = args.indexOf('--team');
  if (team >= 0) return [args[team + 1]!];
  const shard = parseShard(args[args.indexOf('--shard') + 1]!);
  if ('problem' in shard) throw new Error(shard.problem);
  return teams.filter((name) => shardOfTeam(name, shard.count) === shard.index);
}

describe.skipIf(!kubectl)('deploy/kubernetes, rendered', () => {
  const layouts: Record<Layout, K8sObject[]> = { cronjobs: [], shards: [], 'cronjobs-bucket': [] };
  beforeAll(() => {
    for (const layout of Object.keys(layouts) as Layout[]) layouts[layout] = render(layout);
  });

  it('holds a valid fleet configuration, each team with a Secret of its own: its keys and its own database role', () => {
    for (const [layout, objects] of Object.entries(layouts)) {
      const bucket = layout === 'cronjobs-bucket';
      const teams = teamsOf(objects);
      // As the team's pod is given it: from its own Secret.
      const env = Object.fromEntries(
        teams.map((team) => [
          warehouseVariable(team),
          named(objects, 'Secret', `ocs-sync-team-${team}`)!.stringData['warehouse-url'] as string,
        ]),
      );
      const { file, fileLines } = parseConfigText(teamsYaml(objects), 'teams.yaml');
      const setup = resolveSetup({ file, fileLines, env }, { server: true });
      expect(setup.kind).toBe('fleet');
      if (setup.kind !== 'fleet') return;
      expect(setup.fleet.teams.map((team) => team.name)).toEqual(teams);
      const roles = new Set<string>();
      for (const team of setup.fleet.teams) {
        const url = new URL(team.config.warehouse.url);
        expect(url.protocol).toBe('postgres:');
        expect(url.username).toBe(`ocs_${team.name}`);
        roles.add(url.username);
        expect(team.config.warehouse.schema).toBe(team.name);
        expect(team.apiKey).toEqual({ file: `/run/secrets/ocs-sync/${team.name}/api-key` });
        expect(team.config.privateKeyFile).toBe(`/run/secrets/ocs-sync/${team.name}/private.pem`);
        // Its own folder of the files volume, or its own prefix of the bucket, and the
        // credentials that reach it.
        expect(team.config.files.dir).toBe(
          bucket ? `s3://ocs-archive/${team.name}/files` : `/data/files/${team.name}`,
        );
        const secret = named(objects, 'Secret', `ocs-sync-team-${team.name}`);
        expect(Object.keys(secret!.stringData).sort()).toEqual([
          'api-key',
          ...(bucket ? ['aws-access-key-id', 'aws-secret-access-key'] : []),
          'private.pem',
          'warehouse-url',
        ]);
      }
      // A role per team, and no Secret that is not a team's (no URL every team shares).
      expect(roles.size).toBe(teams.length);
      expect(
        ofKind(objects, 'Secret')
          .map((secret) => secret.metadata.name)
          .sort(),
      ).toEqual(teams.map((team) => `ocs-sync-team-${team}`).sort());
    }
  });

  it("gives no pod another team's Secret, database role or files: only those of the teams it runs", () => {
    for (const objects of Object.values(layouts)) {
      const teams = teamsOf(objects);
      const config = parseDocument(teamsYaml(objects)).toJS() as {
        teams: Array<{ name: string; warehouse: { url_env: string }; files: { dir: string } }>;
      };
      const runners = new Map<string, string[]>(teams.map((team) => [team, []]));
      const dirOf = (team: string) => config.teams.find((entry) => entry.name === team)!.files.dir;
      // A folder or a prefix per team, none inside another's.
      const dirs = teams.map((team) => `${dirOf(team)}/`);
      for (const dir of dirs) {
        expect(
          dirs.filter((other) => other.startsWith(dir)),
          dir,
        ).toEqual([dir]);
      }
      if (dirs.every((dir) => dir.startsWith('s3://'))) {
        expect(ofKind(objects, 'PersistentVolumeClaim')).toEqual([]);
      }
      for (const workload of [...ofKind(objects, 'CronJob'), ...ofKind(objects, 'Deployment')]) {
        const where = workload.metadata.name;
        const own = teamsRunBy(workload, teams);
        expect(own.length, where).toBeGreaterThan(0);
        for (const team of own) runners.get(team)!.push(where);
        const pod = podOf(workload);
        // Not even by name: nothing of the pod's spec names a team it does not run.
        const text = JSON.stringify(pod).toLowerCase();
        for (const other of teams.filter((team) => !own.includes(team))) {
          expect(text.includes(other), `${where} names ${other}`).toBe(false);
        }
        const volumes = new Map<string, K8sObject>(
          pod.volumes.map((volume: K8sObject) => [volume.name, volume]),
        );
        const secrets = [
          ...pod.volumes.flatMap((volume: K8sObject) => [
            ...(volume.secret ? [volume.secret.secretName] : []),
            ...(volume.projected?.sources ?? []).flatMap((source: K8sObject) =>
              source.secret ? [source.secret.name] : [],
            ),
          ]),
          ...[...(pod.initContainers ?? []), ...pod.containers].flatMap((container: K8sObject) => [
            ...(container.env ?? []).flatMap((entry: K8sObject) =>
              entry.valueFrom?.secretKeyRef ? [entry.valueFrom.secretKeyRef.name] : [],
            ),
            ...(container.envFrom ?? []).flatMap((entry: K8sObject) =>
              entry.secretRef ? [entry.secretRef.name] : [],
            ),
          ]),
        ];
        expect(new Set(secrets), where).toEqual(
          new Set(own.map((team) => `ocs-sync-team-${team}`)),
        );
        for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
          // Each database URL given is a team's own, from its own Secret.
          const urls = (container.env ?? []).filter((entry: K8sObject) =>
            entry.name.endsWith('_WAREHOUSE_URL'),
          );
          expect(urls.map((entry: K8sObject) => entry.name).sort(), where).toEqual(
            own.map(warehouseVariable).sort(),
          );
          for (const entry of urls) {
            const team = own.find((candidate) => warehouseVariable(candidate) === entry.name)!;
            expect(entry.valueFrom, where).toEqual({
              secretKeyRef: { name: `ocs-sync-team-${team}`, key: 'warehouse-url' },
            });
          }
          // The files volume only ever by a team's folder, at the place its files.dir names.
          const files = (container.volumeMounts ?? []).filter(
            (mount: K8sObject) =>
              volumes.get(mount.name)?.persistentVolumeClaim?.claimName === 'ocs-sync-files',
          );
          const inFolders = own.filter((team) => !dirOf(team).startsWith('s3://'));
          expect(files.map((mount: K8sObject) => mount.subPath).sort(), where).toEqual(
            inFolders.sort(),
          );
          // Bucket credentials only from the team's own Secret (the Secrets' check above).
          const credentials = (container.env ?? []).filter((entry: K8sObject) =>
            entry.name.startsWith('AWS_'),
          );
          expect(credentials.length, where).toBe(own.length - inFolders.length === 0 ? 0 : 2);
          for (const mount of files) {
            const entry = config.teams.find((team) => team.name === mount.subPath)!;
            expect(mount.mountPath, where).toBe(entry.files.dir);
          }
        }
        for (const team of own) {
          const entry = config.teams.find((candidate) => candidate.name === team)!;
          expect(entry.warehouse.url_env).toBe(warehouseVariable(team));
        }
      }
      // Every team runs somewhere, in one workload.
      for (const [team, where] of runners) expect(where, team).toHaveLength(1);
    }
  });

  it('runs every workload as a non-root user on a read-only root, writing only to its volumes', () => {
    for (const [layout, objects] of Object.entries(layouts)) {
      const volumeLayout = layout !== 'cronjobs-bucket';
      const workloads = [...ofKind(objects, 'CronJob'), ...ofKind(objects, 'Deployment')];
      expect(workloads.length).toBeGreaterThan(0);
      for (const workload of workloads) {
        const pod = podOf(workload);
        const where = workload.metadata.name;
        expect(pod.automountServiceAccountToken, where).toBe(false);
        expect(pod.securityContext, where).toMatchObject({
          runAsNonRoot: true,
          runAsUser: 1000,
          seccompProfile: { type: 'RuntimeDefault' },
        });
        const [container] = pod.containers;
        expect(container.securityContext, where).toEqual({
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
        });
        const env = Object.fromEntries(
          container.env.map((entry: { name: string; value?: string; valueFrom?: unknown }) => [
            entry.name,
            entry.value ?? entry.valueFrom,
          ]),
        );
        expect(env.TMPDIR, where).toBe('/tmp');
        expect(env.OCS_WAREHOUSE_URL, where).toBeUndefined();
        const volumes = new Map(
          pod.volumes.map((volume: { name: string }) => [volume.name, volume]),
        );
        const mounts = new Map<string, { name: string; readOnly?: boolean }>(
          container.volumeMounts.map((mount: { mountPath: string }) => [mount.mountPath, mount]),
        );
        expect(volumes.get(mounts.get('/tmp')!.name), where).toMatchObject({ emptyDir: {} });
        for (const team of teamsRunBy(workload, teamsOf(objects))) {
          // With a bucket, no volume: what it writes goes to the bucket (and /tmp).
          if (!volumeLayout) continue;
          const files = mounts.get(`/data/files/${team}`)!;
          expect(files, where).toMatchObject({ subPath: team });
          expect(volumes.get(files.name), where).toMatchObject({
            persistentVolumeClaim: { claimName: 'ocs-sync-files' },
          });
          expect(files.readOnly, where).toBeUndefined();
        }
        const writable = [...mounts.values()].filter((mount) => !mount.readOnly);
        expect(writable.length, where).toBe(
          1 + (volumeLayout ? teamsRunBy(workload, teamsOf(objects)).length : 0),
        );
        expect(mounts.get('/etc/ocs-sync'), where).toMatchObject({ readOnly: true });
        expect(mounts.get('/run/secrets/ocs-sync'), where).toMatchObject({ readOnly: true });
        expect(container.args.slice(0, 2), where).toEqual(['--config', '/etc/ocs-sync/teams.yaml']);
      }
      if (volumeLayout) {
        expect(named(objects, 'PersistentVolumeClaim', 'ocs-sync-files')!.spec.accessModes).toEqual(
          ['ReadWriteMany'],
        );
      }
    }
  });

  it('has a CronJob per team, syncing that team alone with only its own keys, one run at a time', () => {
    const objects = layouts.cronjobs;
    const teams = [...teamsYaml(objects).matchAll(/^ {2}- name: (\S+)$/gm)].map(
      (match) => match[1],
    );
    const cronJobs = ofKind(objects, 'CronJob');
    expect(cronJobs.map((job) => job.metadata.name).sort()).toEqual(
      teams.map((team) => `ocs-sync-${team}`).sort(),
    );
    for (const job of cronJobs) {
      const team = job.metadata.labels!['ocs-sync/team']!;
      const pod = podOf(job);
      expect(job.spec).toMatchObject({ concurrencyPolicy: 'Forbid', timeZone: 'Etc/UTC' });
      expect(job.spec.jobTemplate.spec).toMatchObject({
        backoffLimit: 0,
        activeDeadlineSeconds: 21600,
      });
      expect(pod.restartPolicy).toBe('Never');
      // Each run pushes its metrics where the ConfigMap says, with its CronJob's schedule.
      const [container] = pod.containers;
      expect(container.env).toContainEqual({ name: 'OCS_SCHEDULE', value: job.spec.schedule });
      const [from] = container.envFrom as Array<{ configMapRef: { name: string } }>;
      const metricsMap = named(objects, 'ConfigMap', from!.configMapRef.name)!;
      expect(metricsMap.metadata.name).toMatch(/^ocs-sync-metrics-/);
      expect(new URL(metricsMap.data.OCS_METRICS_PUSH_URL).protocol).toBe('http:');
      expect(pod.containers[0].args).toEqual([
        '--config',
        '/etc/ocs-sync/teams.yaml',
        'sync',
        '--team',
        team,
      ]);
      const keys = pod.volumes.find((volume: { name: string }) => volume.name === 'team-keys');
      expect(keys.projected.sources).toEqual([
        {
          secret: {
            name: `ocs-sync-team-${team}`,
            items: [
              { key: 'api-key', path: `${team}/api-key` },
              { key: 'private.pem', path: `${team}/private.pem` },
            ],
          },
        },
      ]);
      const [cpu, memory, limit] = documentedResources('cronjobs');
      expect(pod.containers[0].resources).toEqual({
        requests: { cpu, memory },
        limits: { memory: limit },
      });
      expect(pod.containers[0].livenessProbe).toBeUndefined();
    }
  });

  it('has a Deployment per shard that together run every team once, probed on /livez, scraped on /metrics', () => {
    const objects = layouts.shards;
    const teams = [...teamsYaml(objects).matchAll(/^ {2}- name: (\S+)$/gm)].map(
      (match) => match[1]!,
    );
    const deployments = ofKind(objects, 'Deployment');
    const shards = deployments.map((deployment) => {
      const args = podOf(deployment).containers[0].args as string[];
      expect(args.slice(2, 4)).toEqual(['daemon', '--shard']);
      const shard = parseShard(args[4]!);
      if ('problem' in shard) throw new Error(shard.problem);
      return shard;
    });
    expect(shards.map((shard) => shard.index).sort()).toEqual(deployments.map((_, index) => index));
    expect(new Set(shards.map((shard) => shard.count))).toEqual(new Set([deployments.length]));
    // Every team in exactly one shard; no shard idle in the example.
    const byShard = shards.map((shard) =>
      teams.filter((team) => shardOfTeam(team, shard.count) === shard.index),
    );
    expect(byShard.flat().sort()).toEqual([...teams].sort());
    for (const inShard of byShard) expect(inShard.length).toBeGreaterThan(0);

    const [cpu, memory, limit] = documentedResources('shards');
    const service = named(objects, 'Service', 'ocs-sync-metrics')!;
    for (const deployment of deployments) {
      expect(deployment.spec).toMatchObject({ replicas: 1, strategy: { type: 'Recreate' } });
      const pod = podOf(deployment);
      const [container] = pod.containers;
      expect(container.env).toContainEqual({ name: 'OCS_HEALTH_LISTEN', value: '0.0.0.0:9464' });
      expect(container.ports).toEqual([{ name: 'metrics', containerPort: 9464 }]);
      expect(container.livenessProbe.httpGet).toEqual({ path: '/livez', port: 'metrics' });
      expect(container.readinessProbe).toBeUndefined();
      expect(container.resources).toEqual({ requests: { cpu, memory }, limits: { memory: limit } });
      // The keys of the shard's teams, and no other team's.
      const keys = pod.volumes.find((volume: { name: string }) => volume.name === 'team-keys');
      expect(
        keys.projected.sources.map((source: { secret: { name: string } }) => source.secret.name),
      ).toEqual(teamsRunBy(deployment, teams).map((team) => `ocs-sync-team-${team}`));
      for (const [label, value] of Object.entries(
        service.spec.selector as Record<string, string>,
      )) {
        expect(deployment.spec.template.metadata.labels[label]).toBe(value);
      }
    }
    expect(service.spec.ports).toEqual([{ name: 'metrics', port: 9464, targetPort: 'metrics' }]);
  });
});

// ---------------------------------------------------------------------------------------------
// The rendered command lines, run.

/** A pod's world in a temporary folder: the config, the keys, the volumes; paths moved there. */
class PodStandIn {
  readonly folder = temporaryDirectory();
  readonly servers = new Map<string, FakeServer>();
  readonly warehouses = new Map<string, TestWarehouse>();

  private objects: K8sObject[] = [];

  constructor(readonly dialect: 'sqlite' | 'postgres') {}

  /** Where a pod path is here. */
  path(podPath: string): string {
    return join(this.folder.path, podPath);
  }

  async prepare(objects: K8sObject[], teams: string[]): Promise<void> {
    this.objects = objects;
    for (const team of teams) {
      const dataset = createSampleDataset({ rowsPerResource: 4, seed: teams.indexOf(team) + 40 });
      this.servers.set(
        team,
        await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey }),
      );
      this.warehouses.set(team, await createTestWarehouse(this.dialect));
    }
    // The configuration as rendered, its placeholders filled in: paths, servers, schemas (each
    // team's URL is its Secret's, given by commandOf).
    let text = teamsYaml(objects)
      .replaceAll('/run/secrets/ocs-sync/', `${this.path('/run/secrets/ocs-sync')}/`)
      .replaceAll('/data/files/', `${this.path('/data/files')}/`);
    for (const team of teams) {
      const warehouse = this.warehouses.get(team)!;
      text = text.replace(
        new RegExp(`(- name: ${team}\\n    base_url: )https://chat\\.example\\.org`),
        `$1${this.servers.get(team)!.url}`,
      );
      if (this.dialect === 'postgres') {
        text = text.replace(
          `warehouse: { schema: ${team},`,
          `warehouse: { schema: ${warehouse.env.OCS_WAREHOUSE_SCHEMA},`,
        );
      }
      // Each team's folder of the files volume, as the kubelet makes it for its subPath.
      mkdirSync(this.path(`/data/files/${team}`), { recursive: true });
    }
    mkdirSync(this.path('/etc/ocs-sync'), { recursive: true });
    writeFileSync(this.path('/etc/ocs-sync/teams.yaml'), text);
    mkdirSync(this.path('/tmp'), { recursive: true });
    // The keys as the kubelet lays out the projected volume (a `..data` link to a timestamped
    // folder, 0400 plus group read for the pod's fsGroup), the Secrets' placeholders filled in.
    const volume = this.path('/run/secrets/ocs-sync');
    const payload = join(volume, '..2026_01_05_10_00_00.000000001');
    for (const team of teams) {
      const secret = named(objects, 'Secret', `ocs-sync-team-${team}`)!;
      expect(Object.keys(secret.stringData)).toEqual(
        expect.arrayContaining(['api-key', 'private.pem', 'warehouse-url']),
      );
      mkdirSync(join(payload, team), { recursive: true });
      writeFileSync(join(payload, team, 'api-key'), `${ADMIN_KEY}\n`, { mode: 0o440 });
      writeFileSync(join(payload, team, 'private.pem'), teamKeys().privateKey, { mode: 0o440 });
      symlinkSync(join('..data', team), join(volume, team));
    }
    symlinkSync(basename(payload), join(volume, '..data'));
  }

  /**
   * The container's command line and environment, moved here: each variable from a team's Secret
   * is that team's warehouse (its `warehouse-url`) or the test store's credentials (its
   * `aws-*`), and nothing else is given.
   */
  commandOf(workload: K8sObject): { argv: string[]; env: Record<string, string> } {
    const [container] = podOf(workload).containers;
    const argv = (container.args as string[]).map((arg) =>
      arg.startsWith('/') ? this.path(arg) : arg,
    );
    const env: Record<string, string> = { OCS_LOG_LEVEL: 'warn' };
    for (const from of (container.envFrom ?? []) as Array<{ configMapRef: { name: string } }>) {
      Object.assign(env, named(this.objects, 'ConfigMap', from.configMapRef.name)!.data);
    }
    for (const entry of container.env as Array<{
      name: string;
      value?: string;
      valueFrom?: { secretKeyRef: { name: string; key: string } };
    }>) {
      if (entry.value !== undefined) {
        env[entry.name] = entry.value.startsWith('/') ? this.path(entry.value) : entry.value;
      } else {
        const { name, key } = entry.valueFrom!.secretKeyRef;
        const team = name.replace(/^ocs-sync-team-/, '');
        // The team's bucket credentials: here, the test store's.
        const credentials: Record<string, string> = {
          'aws-access-key-id': S3_ACCESS_KEY,
          'aws-secret-access-key': S3_SECRET_KEY,
        };
        expect(['warehouse-url', ...Object.keys(credentials)]).toContain(key);
        env[entry.name] = credentials[key] ?? this.warehouseUrl(team);
      }
    }
    return { argv, env };
  }

  /** A team's warehouse here: its schema of the test database, or a SQLite file in its folder. */
  warehouseUrl(team: string): string {
    return this.dialect === 'postgres'
      ? this.warehouses.get(team)!.env.OCS_WAREHOUSE_URL!
      : this.path(`/data/files/${team}/warehouse.db`);
  }

  async rowsOf(team: string): Promise<number> {
    const { env } = this.warehouses.get(team)!;
    const reader = await openWarehouseReader({
      url: this.warehouseUrl(team),
      schema: env.OCS_WAREHOUSE_SCHEMA ?? 'ocs',
    });
    try {
      return (await reader.status()).reduce((sum, status) => sum + status.rows, 0);
    } finally {
      await reader.close();
    }
  }

  async close(): Promise<void> {
    for (const server of this.servers.values()) await server.close();
    for (const warehouse of this.warehouses.values()) await warehouse.dispose();
    this.folder.remove();
  }
}

describe.skipIf(!kubectl).each(splitDialects)(
  'deploy/kubernetes command lines, run (%s)',
  (dialect) => {
    let pod: PodStandIn | undefined;
    afterAll(async () => pod?.close());

    it("a team's CronJob: its rendered command syncs its team, exactly its team", async () => {
      const objects = render('cronjobs');
      const teams = [...teamsYaml(objects).matchAll(/^ {2}- name: (\S+)$/gm)].map(
        (match) => match[1]!,
      );
      pod = new PodStandIn(dialect);
      await pod.prepare(objects, teams);
      const job = named(objects, 'CronJob', 'ocs-sync-malawi')!;
      const { argv, env } = pod.commandOf(job);
      // The ConfigMap's Pushgateway, here: a real one when installed, else one that is down.
      const gateway = pushgatewayMissing ? undefined : await startPushgateway();
      try {
        env.OCS_METRICS_PUSH_URL = gateway?.url ?? `http://127.0.0.1:${await freePort()}`;
        const result = await runCli(argv, env);
        expect(result.code, `${result.stdout}${result.stderr}`).toBe(0);
        // Keys mounted from a Secret are group-readable by design (fsGroup): no warning about it.
        expect(result.logs).not.toMatch(/accessible to group or others/);
        expect(await pod.rowsOf('malawi')).toBeGreaterThan(50);
        expect(pod.servers.get('kenya')!.requests).toHaveLength(0);
        if (gateway) {
          const pushed = await (await fetch(`${gateway.url}/metrics`)).text();
          expect(pushed).toMatch(
            /^ocs_sync_last_run_status\{instance="",job="ocs-sync",kind="initial",status="ok",team="malawi"\} 1$/m,
          );
          expect(pushed).toMatch(
            /^ocs_sync_schedule_interval_seconds\{instance="",job="ocs-sync",team="malawi"\} 900$/m,
          );
        } else {
          expect(result.logs).toMatch(/Could not push the run's metrics to the Pushgateway/);
        }
      } finally {
        await gateway?.stop();
      }
    }, 180_000);

    it("a team's CronJob with a bucket: its rendered command keeps its files under its own prefix", async () => {
      const objects = render('cronjobs-bucket');
      const teams = teamsOf(objects);
      const store = await startS3Server({ buckets: ['ocs-archive'] });
      const bucketPod = new PodStandIn(dialect);
      try {
        await bucketPod.prepare(objects, teams);
        const { argv, env } = bucketPod.commandOf(named(objects, 'CronJob', 'ocs-sync-malawi')!);
        // Where the bucket is here (the manifests leave it to AWS).
        const { OCS_S3_ENDPOINT, OCS_S3_FORCE_PATH_STYLE } = store.env();
        const result = await runCli(argv, { ...env, OCS_S3_ENDPOINT, OCS_S3_FORCE_PATH_STYLE });
        expect(result.code, `${result.stdout}${result.stderr}`).toBe(0);
        expect(await bucketPod.rowsOf('malawi')).toBeGreaterThan(50);
        const keys = store.keys('ocs-archive');
        expect(keys.length).toBeGreaterThan(0);
        for (const key of keys)
          expect(key).toMatch(/^malawi\/files\/sha256\/[0-9a-f]{2}\/[0-9a-f]{64}$/);
        expect(existsSync(bucketPod.path('/data/files/malawi/sha256'))).toBe(false);
      } finally {
        await bucketPod.close();
        await store.close();
      }
    }, 180_000);

    it("a shard's Deployment: its rendered daemon runs its shard's teams, healthy and live", async () => {
      const objects = render('shards');
      const teams = [...teamsYaml(objects).matchAll(/^ {2}- name: (\S+)$/gm)].map(
        (match) => match[1]!,
      );
      await pod?.close();
      pod = new PodStandIn(dialect);
      await pod.prepare(objects, teams);
      const deployment = named(objects, 'Deployment', 'ocs-sync-shard-1')!;
      const { argv, env } = pod.commandOf(deployment);
      env.OCS_HEALTH_LISTEN = '127.0.0.1:0';
      env.OCS_LOG_LEVEL = 'info';
      const daemon = startCli(argv, env);
      const url = await daemon.healthUrl();
      const inShard = teams.filter((team) => shardOfTeam(team, 2) === 1);
      const health = await waitFor(
        async () => {
          const response = await fetch(`${url}/healthz`);
          const body = (await response.json()) as {
            teams: Record<string, { lastRunStatus: string | null }>;
          };
          const synced = Object.values(body.teams).every((team) => team.lastRunStatus === 'ok');
          return response.status === 200 && synced && body;
        },
        'every team of the shard to sync',
        120_000,
      );
      expect(Object.keys(health.teams).sort()).toEqual([...inShard].sort());
      expect((await fetch(`${url}/livez`)).status).toBe(200);
      expect(await daemon.stop()).toBe(0);
      for (const team of teams) {
        if (inShard.includes(team)) expect(await pod.rowsOf(team)).toBeGreaterThan(50);
        else expect(pod.servers.get(team)!.requests).toHaveLength(0);
      }
    }, 180_000);
  },
);

/** Whether this machine lets us make a mount namespace with a read-only root (root, util-linux). */
const readOnlyRootReason = (() => {
  if (process.getuid?.() !== 0) return 'not root';
  try {
    execFileSync(
      'unshare',
      [
        '-m',
        '--propagation',
        'private',
        'sh',
        '-c',
        'mount -o remount,bind,ro / && ! touch /ocs-ro-probe 2>/dev/null',
      ],
      { stdio: 'ignore' },
    );
    execFileSync('setpriv', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'unshare or setpriv cannot make a read-only root here';
  }
})();
if (kubectl && readOnlyRootReason)
  console.log(`the read-only root run is skipped: ${readOnlyRootReason}`);

describe.skipIf(!kubectl || readOnlyRootReason !== undefined)(
  'deploy/kubernetes on a read-only root',
  () => {
    it("a team's CronJob command runs as user 1000 with / read-only but for the manifest's volumes", async () => {
      const objects = render('cronjobs');
      const teams = [...teamsYaml(objects).matchAll(/^ {2}- name: (\S+)$/gm)].map(
        (match) => match[1]!,
      );
      const pod = new PodStandIn(splitDialects.includes('postgres') ? 'postgres' : 'sqlite');
      try {
        await pod.prepare(objects, teams);
        const job = named(objects, 'CronJob', 'ocs-sync-kenya')!;
        const { argv, env } = pod.commandOf(job);
        // What user 1000 reads, readable; what it writes, its own (as fsGroup makes a volume).
        for (const path of [
          pod.folder.path,
          pod.path('/etc/ocs-sync'),
          pod.path('/run/secrets/ocs-sync'),
        ])
          chmodSync(path, 0o755);
        chmodSync(pod.path('/etc/ocs-sync/teams.yaml'), 0o644);
        // The kubelet's fsGroup: the keys stay root's, their group the pod's.
        const payload = join(pod.path('/run/secrets/ocs-sync'), '..2026_01_05_10_00_00.000000001');
        chmodSync(payload, 0o755);
        for (const team of teams) {
          chownSync(join(payload, team), 0, 1000);
          chmodSync(join(payload, team), 0o750);
          for (const file of readdirSync(join(payload, team))) {
            chownSync(join(payload, team, file), 0, 1000);
          }
        }
        // Writable: what the manifest mounts writable (kenya's folder of the files volume, /tmp),
        // and no other team's folder.
        const mounted = (podOf(job).containers[0].volumeMounts as K8sObject[])
          .filter((mount) => mount.readOnly !== true)
          .map((mount) => pod.path(mount.mountPath as string));
        expect(mounted.sort()).toEqual([pod.path('/data/files/kenya'), pod.path('/tmp')]);
        for (const volume of mounted) chownSync(volume, 1000, 1000);
        // The writable volumes bound over themselves before / turns read-only keep their own flags.
        const writable = [
          ...mounted,
          join(ROOT, 'node_modules/.cache'),
          join(ROOT, 'node_modules/.vite'),
        ];
        mkdirSync(writable[writable.length - 1]!, { recursive: true });
        const script = [
          'set -e',
          ...writable.map((path) => `mount --bind '${path}' '${path}'`),
          'mount -o remount,bind,ro /',
          ...writable.map((path) => `mount -o remount,bind,rw '${path}'`),
          `exec setpriv --reuid=1000 --regid=1000 --clear-groups -- '${process.execPath}' ${CLI_FROM_SOURCE.map((part) => `'${part}'`).join(' ')} ${argv.map((arg) => `'${arg}'`).join(' ')}`,
        ].join('\n');
        // node_modules/.cache and .vite: where running from source (not the image) keeps its caches.
        for (const path of writable.slice(-2)) execFileSync('chmod', ['a+rwx', path]);
        const child = spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script], {
          cwd: ROOT,
          env: { PATH: process.env.PATH!, HOME: pod.path('/tmp'), ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        child.stdout.on('data', (chunk) => (output += chunk));
        child.stderr.on('data', (chunk) => (output += chunk));
        const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
        expect(code, output).toBe(0);
        expect(output).not.toMatch(/EROFS|read-only file system/i);
        expect(output).not.toMatch(/accessible to group or others/);
        expect(await pod.rowsOf('kenya')).toBeGreaterThan(50);
      } finally {
        await pod.close();
      }
    }, 120_000);
  },
);
