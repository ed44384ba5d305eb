/**
 * Child processes of the benchmark: the fake server and each measured stage run in their own
 * process, so the server's CPU never shares the syncer's event loop and every stage has its own
 * peak RSS (`resourceUsage().maxRSS` of a fresh process).
 *
 * Built (`dist/bench/*.js`) they run under plain node; from source (the smoke test under vitest)
 * they run the `.ts` file through vite-node, which needs no build.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(import.meta.url);
const benchDirectory = dirname(here);
const fromSource = extname(here) === '.ts';

/** Messages a child sends back: a result, or a failure described as text. */
export type ChildReply<T> = { ok: true; value: T } | { ok: false; error: string };

function viteNodeCli(): string {
  const require = createRequire(import.meta.url);
  const cli = join(dirname(require.resolve('vite-node/package.json')), 'vite-node.mjs');
  if (!existsSync(cli))
    throw new Error(`vite-node is needed to run the benchmark from source (${cli} is missing).`);
  return cli;
}

/**
 * How to run `bench/<name>` (.js built, .ts from source): the module node runs, its arguments,
 * and the folder to run it in. Also for a child started otherwise than by `fork` (chaos.ts).
 */
export function benchChildCommand(
  name: string,
  args: string[] = [],
): { module: string; args: string[]; cwd?: string } {
  const script = join(benchDirectory, `${name}${fromSource ? '.ts' : '.js'}`);
  if (!fromSource) return { module: script, args };
  // vite-node resolves the project from the working directory: the repository root.
  return { module: viteNodeCli(), args: [script, ...args], cwd: resolve(benchDirectory, '..') };
}

/** Starts `bench/<name>` (.js built, .ts from source) with an IPC channel. */
export function startBenchChild(
  name: string,
  options: {
    nodeOptions?: string[];
    args?: string[];
    env?: NodeJS.ProcessEnv;
    /** Where the child's stderr goes (default: this process's). */
    stderr?: 'inherit' | 'pipe';
    /** `advanced` lets messages carry bigint (structured clone); default JSON. */
    serialization?: 'json' | 'advanced';
  } = {},
): ChildProcess {
  const { nodeOptions: execArgv = [], env, serialization } = options;
  const stdio = ['ignore', 'inherit', options.stderr ?? 'inherit', 'ipc'] as const;
  const command = benchChildCommand(name, options.args);
  return fork(command.module, command.args, {
    execArgv,
    stdio: [...stdio],
    env,
    serialization,
    cwd: command.cwd,
  });
}

/** Sends one request and waits for the child's next reply (rejects when it exits first). */
export function ask<T>(child: ChildProcess, message: unknown): Promise<T> {
  return new Promise<T>((resolvePromise, reject) => {
    if (!child.connected) {
      reject(new Error('The benchmark child process is no longer running.'));
      return;
    }
    const onMessage = (reply: ChildReply<T>) => {
      cleanup();
      if (reply.ok) resolvePromise(reply.value);
      else reject(new Error(reply.error));
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      cleanup();
      reject(
        new Error(
          `The benchmark child process exited (${signal ?? `code ${code}`}) before answering.`,
        ),
      );
    };
    const cleanup = () => {
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.on('exit', onExit);
    child.send(message as object);
  });
}

/** Resolves when the child has exited (at once when it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolvePromise) => child.once('exit', () => resolvePromise()));
}

/** In a child: answer each request from the parent with `handle`'s result; exit when it disconnects. */
export function serveParent<Request>(handle: (request: Request) => Promise<unknown>): void {
  if (!process.send)
    throw new Error('This module is a benchmark child process; run `npm run bench`.');
  process.on('message', (request: Request) => {
    handle(request).then(
      (value) => process.send?.({ ok: true, value } satisfies ChildReply<unknown>),
      (error: unknown) =>
        process.send?.({
          ok: false,
          error: error instanceof Error ? (error.stack ?? error.message) : String(error),
        } satisfies ChildReply<unknown>),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
