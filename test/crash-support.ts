/**
 * Running the CLI as a real process for the crash-only suites: from source (or with a fault
 * injected, run-cli-with-fault.ts), optionally as pid 1 of a PID namespace of its own, as a
 * container runs it (`unshare --pid --fork --kill-child`, which needs root).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI_FROM_SOURCE, waitFor } from './support.js';

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
