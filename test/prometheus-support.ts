/**
 * Debian's Prometheus, Pushgateway and promtool, for the tests of metrics that outlive a run, of
 * the shipped alert rules and of the dashboard: each server started on a loopback port of its
 * own, in a temporary folder, and stopped by the test. `.ci/run` installs the packages
 * (`prometheus`, `prometheus-pushgateway`); without them the tests say so and skip.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { temporaryDirectory, waitFor } from './support.js';

/** Whether a program is on PATH. */
function onPath(program: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${program}`], { stdio: 'ignore' }).status === 0;
}

export const HAS_PROMTOOL = onPath('promtool');
export const HAS_PUSHGATEWAY = onPath('prometheus-pushgateway');
export const HAS_PROMETHEUS = onPath('prometheus');

/** Why a suite that needs these programs is skipped, or undefined when it can run. */
export function missingPrograms(...programs: Array<'promtool' | 'pushgateway' | 'prometheus'>) {
  const present = {
    promtool: HAS_PROMTOOL,
    pushgateway: HAS_PUSHGATEWAY,
    prometheus: HAS_PROMETHEUS,
  };
  const missing = programs.filter((program) => !present[program]);
  if (missing.length === 0) return undefined;
  const packages = missing.map((program) =>
    program === 'pushgateway' ? 'prometheus-pushgateway' : 'prometheus',
  );
  return `${missing.join(', ')} not installed (Debian packages ${[...new Set(packages)].join(', ')}; .ci/run installs them)`;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address();
  await new Promise<void>((done) => server.close(() => done()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

/** A server of ours running as a child process, its output kept for failure messages. */
export interface ChildServer {
  url: string;
  output(): string;
  stop(): Promise<void>;
}

async function startChild(
  command: string,
  args: string[],
  url: string,
  what: string,
  cleanup: () => void,
): Promise<ChildServer> {
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let exited: number | null | undefined;
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const ended = new Promise<void>((resolve) =>
    child.on('exit', (code) => {
      exited = code;
      resolve();
    }),
  );
  const stop = async () => {
    if (exited === undefined) child.kill('SIGTERM');
    await ended;
    cleanup();
  };
  try {
    await waitFor(
      async () => {
        if (exited !== undefined) throw new Error(`${what} exited ${exited}:\n${output}`);
        const ready = await fetch(`${url}/-/ready`).catch(() => undefined);
        return ready?.ok === true;
      },
      `${what} to be ready`,
      60_000,
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, output: () => output, stop };
}

/** A Pushgateway on a loopback port, keeping nothing on disk. */
export async function startPushgateway(): Promise<ChildServer> {
  const port = await freePort();
  return startChild(
    'prometheus-pushgateway',
    [`--web.listen-address=127.0.0.1:${port}`, '--persistence.file=', '--log.level=warn'],
    `http://127.0.0.1:${port}`,
    'the Pushgateway',
    () => undefined,
  );
}

export interface PrometheusServer extends ChildServer {
  /** An instant query: its result vector. */
  query(
    expression: string,
  ): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
  /** The alerts Prometheus holds now (`/api/v1/alerts`). */
  alerts(): Promise<
    Array<{ labels: Record<string, string>; annotations: Record<string, string>; state: string }>
  >;
}

/**
 * A Prometheus on a loopback port with `config` (YAML text; `RULES_DIR` in it stands for the
 * folder `rules` are written to), its data in a temporary folder removed when it stops.
 */
export async function startPrometheus(
  config: string,
  rules: Record<string, string>,
): Promise<PrometheusServer> {
  const folder = temporaryDirectory();
  const rulesDir = join(folder.path, 'rules');
  mkdirSync(rulesDir);
  for (const [name, text] of Object.entries(rules)) writeFileSync(join(rulesDir, name), text);
  const configFile = join(folder.path, 'prometheus.yml');
  writeFileSync(configFile, config.replaceAll('RULES_DIR', rulesDir));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = await startChild(
    'prometheus',
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(folder.path, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    url,
    'Prometheus',
    () => folder.remove(),
  );
  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${url}${path}`);
    const body = (await response.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? response.status}`);
    return body.data;
  };
  return {
    ...server,
    query: async (expression) =>
      (
        await api<{ result: Array<{ metric: Record<string, string>; value: [number, string] }> }>(
          `/api/v1/query?query=${encodeURIComponent(expression)}`,
        )
      ).result,
    alerts: async () =>
      (
        await api<{
          alerts: Array<{
            labels: Record<string, string>;
            annotations: Record<string, string>;
            state: string;
          }>;
        }>('/api/v1/alerts')
      ).alerts,
  };
}

/** The samples of a Prometheus text exposition: `name{labels}` to value. */
export function samplesOf(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    samples.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return samples;
}
