/**
 * The image the Dockerfile builds runs the command line deploy/kubernetes renders: the
 * CronJob's `ocs-sync --config … sync --team NAME`, as user `node`, with the rendered
 * configuration, the team's keys laid out as its Secret volume would be, and the built-in fake
 * export server (started in the container) as the team's server. Built and run with podman by
 * `../shared/tools/container-smoke.sh` (minutes: a long suite). Skipped, saying why, without
 * podman, kubectl, root, or `../shared`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { projectRoot } from '../src/package-info.js';

const ROOT = projectRoot();
const SMOKE = resolve(
  dirname(fileURLToPath(import.meta.url)),
  '../../shared/tools/container-smoke.sh',
);

const found = (command: string, args: string[]) => {
  try {
    execFileSync(command, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const skipReason = !existsSync(SMOKE)
  ? `${SMOKE} is absent`
  : process.getuid?.() !== 0
    ? 'the container smoke needs root (rootful podman)'
    : !found('podman', ['--version'])
      ? 'podman is not installed'
      : !found('kubectl', ['version', '--client'])
        ? 'kubectl is not installed (it renders deploy/kubernetes)'
        : undefined;
if (skipReason) console.log(`container smoke skipped: ${skipReason}`);

/** Single quotes for sh. */
const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

describe.skipIf(skipReason !== undefined)('the image runs the rendered command line', () => {
  it("a team's CronJob command syncs its team inside the image, as user node", async () => {
    const rendered = execFileSync(
      'kubectl',
      ['kustomize', join(ROOT, 'deploy/kubernetes/cronjobs')],
      { encoding: 'utf8' },
    );
    const objects = parseAllDocuments(rendered).map((document) => document.toJS());
    const job = objects.find(
      (object) => object.kind === 'CronJob' && object.metadata.name === 'ocs-sync-kenya',
    );
    const config = objects.find(
      (object) => object.kind === 'ConfigMap' && object.metadata.name.startsWith('ocs-sync-teams'),
    );
    const [container] = job.spec.jobTemplate.spec.template.spec.containers;
    const team = 'kenya';
    // The pod's paths, moved under /tmp/pod (the image's root is not the user's to write); the
    // server, the fake one started below; each team's warehouse, a SQLite file on the volume.
    const move = (path: string) => path.replace(/^\//, '/tmp/pod/');
    let teams = (config.data['teams.yaml'] as string)
      .replaceAll('/run/secrets/ocs-sync/', move('/run/secrets/ocs-sync/'))
      .replaceAll('/data/files/', move('/data/files/'))
      .replaceAll('https://chat.example.org', 'http://127.0.0.1:8765');
    teams = teams.replace(
      /warehouse: \{ schema: (\S+) \}/g,
      'warehouse: { url: /tmp/pod/data/files/$1.db }',
    );
    const args = (container.args as string[]).map((arg) => (arg.startsWith('/') ? move(arg) : arg));
    const env = (container.env as Array<{ name: string; value?: string }>)
      .filter((entry) => entry.value !== undefined)
      .map((entry) => `export ${entry.name}=${quote(entry.value!)}`);
    const script = [
      'set -e',
      `mkdir -p /tmp/pod/etc/ocs-sync /tmp/pod/run/secrets/ocs-sync/${team} /tmp/pod/data/files`,
      `cat > /tmp/pod/etc/ocs-sync/teams.yaml <<'EOF'\n${teams}\nEOF`,
      'node /app/bin/ocs-sync.js fake-server --port 8765 --rows 30 --key-dir /tmp/pod > /tmp/pod/server.out 2>&1 &',
      'for i in $(seq 1 600); do grep -q OCS_PRIVATE_KEY_FILE /tmp/pod/server.out && break; sleep 0.1; done',
      'eval "$(grep -E "^ *export OCS_" /tmp/pod/server.out)"',
      // The team's Secret, as the projected volume lays it out.
      `printf %s "$OCS_API_KEY" > /tmp/pod/run/secrets/ocs-sync/${team}/api-key`,
      `cp "$OCS_PRIVATE_KEY_FILE" /tmp/pod/run/secrets/ocs-sync/${team}/private.pem`,
      'unset OCS_API_KEY OCS_PRIVATE_KEY_FILE OCS_BASE_URL',
      ...env,
      'export OCS_WAREHOUSE_URL=postgres://unused@127.0.0.1:1/unused',
      'id -un',
      `node /app/bin/ocs-sync.js ${args.map(quote).join(' ')}`,
      `node /app/bin/ocs-sync.js --config /tmp/pod/etc/ocs-sync/teams.yaml status --team ${team}`,
    ].join('\n');
    // Asynchronously: a build takes minutes, and the test's process must go on answering vitest.
    const child = spawn(
      'bash',
      [SMOKE, ROOT, 'localhost/ocs-sync:k8s-smoke', '--', 'sh', '-c', script],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const result = { stdout: '', stderr: '', status: null as number | null };
    child.stdout.on('data', (chunk) => (result.stdout += chunk));
    child.stderr.on('data', (chunk) => (result.stderr += chunk));
    result.status = await new Promise<number | null>((done) => child.on('exit', done));
    const output = `${result.stdout}\n${result.stderr}`;
    expect(result.status, output.slice(-6000)).toBe(0);
    expect(result.stdout).toMatch(/^node$/m);
    expect(result.stdout).toMatch(/^Run 1 \(initial\): ok, /m);
    expect(result.stdout).toMatch(/^Health: +ok$/m);
  }, 3_600_000);
});
