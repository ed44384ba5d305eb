/**
 * Running the CLI as a real process for the crash-only suites: from source (or with a fault
 * injected, run-cli-with-fault.ts), optionally as pid 1 of a PID namespace of its own, as a
 * container runs it (`unshare --pid --fork --kill-child`, which needs root).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import type { FakeServer } from '../src/fake-server/server.js';
import {
  CLI_FROM_SOURCE,
  expectWarehouseEqualsSource,
  runCli,
  waitFor,
  type TestWarehouse,
} from './support.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Why processes cannot run as pid 1 of their own PID namespace here, or undefined. */
export function pidNamespaceUnavailable(): string | undefined {
  const probe = spawnSync('unshare', ['--pid', '--fork', '--kill-child', 'true']);
  return probe.status === 0
    ? undefined
    : 'unshare --pid --fork (root, util-linux) is not available: the restart-as-pid-1 tests are skipped';
}

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliProcess {
  child: ChildProcess;
  finished: Promise<Finished>;
  /** Resolves once stderr holds a match of `pattern`. */
  stderrMatches(pattern: RegExp): Promise<void>;
  /** Sends `signal` to the CLI itself (unshare does not pass signals on). */
  signal(signal: NodeJS.Signals): void;
  /** kill -9 the CLI itself (pid 1 of its namespace too), and wait until it is gone. */
  killHard(): Promise<void>;
}

export function startCliProcess(
  args: string[],
  env: Record<string, string>,
  options: { pidNamespace?: boolean; fault?: string } = {},
): CliProcess {
  const entry = options.fault
    ? [CLI_FROM_SOURCE[0]!, 'test/run-cli-with-fault.ts']
    : CLI_FROM_SOURCE;
  const command = [process.execPath, ...entry, ...args];
  const child = options.pidNamespace
    ? spawn('unshare', ['--pid', '--fork', '--kill-child', ...command], spawnOptions(env, options))
    : spawn(command[0]!, command.slice(1), spawnOptions(env, options));
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const finished = new Promise<Finished>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return {
    child,
    finished,
    stderrMatches: (pattern) =>
      waitFor(() => pattern.test(stderr), `stderr to match ${pattern}`, 50_000).then(
        () => undefined,
      ),
    signal: (signal) => {
      const cli = options.pidNamespace ? childOf(child.pid!) : child.pid;
      if (cli !== undefined) process.kill(cli, signal);
    },
    killHard: async () => {
      const cli = options.pidNamespace ? childOf(child.pid!) : child.pid!;
      // Under unshare --kill-child the CLI gets SIGKILL when unshare dies, but kill it first.
      if (cli !== undefined) process.kill(cli, 'SIGKILL');
      child.kill('SIGKILL');
      if (cli !== undefined) await gone(cli);
      await finished;
    },
  };
}

function spawnOptions(env: Record<string, string>, options: { fault?: string }) {
  return {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...(options.fault ? { TEST_FAULT: options.fault } : {}),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'] as Array<'ignore' | 'pipe'>,
  };
}

/** The one child of `pid` (unshare's forked CLI). */
function childOf(pid: number): number | undefined {
  const file = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(file)) return undefined;
  const [first] = readFileSync(file, 'utf8').trim().split(/\s+/);
  return first ? Number(first) : undefined;
}

/** Until the process is gone or a zombie: its descriptors, and so its locks, are released. */
async function gone(pid: number): Promise<void> {
  await waitFor(() => {
    try {
      return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
    } catch {
      return true;
    }
  }, `process ${pid} to end`);
}

/** Holds the server's answer to the first page of `resource` until `release`. */
export function holdAPage(
  server: FakeServer,
  resource = 'chat_messages',
): { reached: Promise<void>; release: () => void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let reached!: () => void;
  const reachedNow = new Promise<void>((resolve) => (reached = resolve));
  server.options.onPageServed = async (page) => {
    if (page.resource !== resource) return;
    reached();
    await held;
  };
  return { reached: reachedNow, release };
}

/**
 * After a full refresh (run 2, after a first sync) that did not complete: `ocs-sync daemon`
 * restarted as a platform does, its weekly full refresh days away, runs it again at start and
 * marks what the server deleted (`gone`, of chat_messages). Stopped once that run ended.
 */
export async function expectDaemonStartToRedoFullRefresh(
  env: Record<string, string>,
  warehouse: TestWarehouse,
  dataset: FakeDataset,
  gone: unknown[],
): Promise<void> {
  const runs = () => warehouse.query('SELECT id, kind, status, error FROM "_ocs_runs" ORDER BY id');
  const stop = new AbortController();
  const daemon = runCli(
    ['daemon'],
    {
      ...env,
      OCS_SCHEDULE: '0 0 1 1 *',
      OCS_FULL_REFRESH_SCHEDULE: '0 3 * * 0',
      OCS_HEALTH_LISTEN: 'off',
    },
    { signal: stop.signal },
  );
  try {
    await waitFor(
      async () => (await runs()).some((run) => Number(run.id) === 3 && run.status !== 'running'),
      "the daemon's first run",
      60_000,
    );
  } finally {
    stop.abort();
  }
  const stopped = await daemon;
  expect(stopped.code, stopped.logs).toBe(0);
  const [, unfinished, restarted] = await runs();
  expect(stopped.logs).toContain(
    `The last full refresh (run 2) ended ${String(unfinished?.status)}: this start runs a full refresh`,
  );
  expect(unfinished).toMatchObject({ kind: 'full_refresh', status: 'interrupted' });
  expect(restarted).toMatchObject({ kind: 'full_refresh', status: 'ok' });
  await expectWarehouseEqualsSource(warehouse, dataset);
  const marked = await warehouse.query(
    'SELECT id FROM "chat_messages" WHERE "_deleted_at" IS NOT NULL ORDER BY id',
  );
  expect(marked.map((row) => Number(row.id))).toEqual(gone.map(Number));
}
