/**
 * Faults only a real `ocs-sync` process meets, on every dialect, each ending cleanly (its exit
 * code, one clear message or none, no stack, nothing left behind) with the next run exact. Each
 * starts processes from source (seconds apiece), so this suite runs in `npm run test:long`:
 * - SIGTERM while the server answers 503 with `Retry-After: 600` (the wait is cut short);
 * - `serve` when importers hang up mid-file (descriptors counted in /proc/PID/fd);
 * - a reader that closes stdout or stderr early (`| head -c 1`): EPIPE.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset, sampleFixture } from '../src/fake-server/fixture.js';
import { datasetFromFixture } from '../src/fake-server/field-values.js';
import { sampleFileContent } from '../src/fake-server/file-contents.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  CLI_FROM_SOURCE,
  createTestWarehouse,
  expectWarehouseEqualsSource,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  testDialects,
  waitFor,
  type TestWarehouse,
} from './support.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MIB = 1024 * 1024;
/** A Node stack frame, as an unhandled error prints it. */
const STACK_FRAME = /^\s+at .+[:(]/m;
const SERVE_KEY = 'process-faults-serve-key-0123456789abcdef';
/**
 * A process from source takes seconds to start, many more on a loaded machine; a test's own
 * timeout stays far below the 600 s the server asks the stopped run to wait.
 */
const STARTING_MS = 90_000;
const TEST_MS = 150_000;

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

function startCli(
  command: string,
  args: string[],
  env: Record<string, string>,
  stdio: StdioOptions = ['ignore', 'pipe', 'pipe'],
): { child: ChildProcess; finished: Promise<Finished> } {
  const child = spawn(command, args, {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio,
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const finished = new Promise<Finished>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { child, finished };
}

/** `ocs-sync ARGS` from source, as its own process. */
function ocsSync(args: string[], env: Record<string, string>) {
  return startCli(process.execPath, [...CLI_FROM_SOURCE, ...args], env);
}

/** A shell pipeline's first command's exit status, then the pipeline's stdout and stderr. */
async function pipeline(script: string, env: Record<string, string>) {
  const { finished } = startCli('bash', ['-c', `${script}; echo "exit \${PIPESTATUS[0]}"`], env);
  const result = await finished;
  const exit = /exit (\d+)\n$/.exec(result.stdout);
  return { exit: exit ? Number(exit[1]) : undefined, stderr: result.stderr };
}

/** The first file the sample has bytes for. */
function bigFileId(dataset: FakeDataset) {
  return dataset.rows('files').find((row) => sampleFileContent(row) !== null)!.id;
}

const cliCommand = `${JSON.stringify(process.execPath)} ${CLI_FROM_SOURCE.map((part) => JSON.stringify(part)).join(' ')}`;

describe.each(testDialects)('faults a real ocs-sync process meets (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let directory: ReturnType<typeof temporaryDirectory>;
  let running: ChildProcess | undefined;

  const start = async (options: { dataset?: FakeDataset; bigFile?: boolean } = {}) => {
    dataset = options.dataset ?? createSampleDataset({ rowsPerResource: 5, seed: 34 });
    server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      // One file far larger than what the sockets between serve and its client can hold.
      ...(options.bigFile
        ? {
            fileContent: (row) =>
              row.id === bigFileId(dataset)
                ? { size: 32 * MIB, seed: `big:${String(row.id)}` }
                : sampleFileContent(row),
          }
        : {}),
    });
  };
  const env = () => syncEnv(server.url, warehouse.env);
  const lockFreeConfig = () => {
    const file = join(directory.path, 'no-lock-wait.yaml');
    writeFileSync(file, 'lock:\n  wait_seconds: 0\n');
    return file;
  };
  /** The next run takes the lock at once (nothing holds it) and leaves the warehouse exact. */
  const expectNextRunExact = async () => {
    const next = await runCli(['--config', lockFreeConfig(), 'sync'], env());
    expect(next.code, next.stdout + next.stderr).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  };
  const runStatuses = async () =>
    (await warehouse.query('SELECT status FROM "_ocs_runs" ORDER BY id')).map((run) => run.status);

  beforeEach(async () => {
    warehouse = await createTestWarehouse(dialect);
    directory = temporaryDirectory();
  });
  afterEach(async () => {
    running?.kill('SIGKILL');
    running = undefined;
    await server?.close();
    await warehouse.dispose();
    directory.remove();
  });

  it.each([
    ['sync', 130],
    ['daemon', 0],
  ] as const)(
    '%s: SIGTERM while the server answers 503 with Retry-After: 600 ends it at once (exit %i); the run is interrupted, the lock free, the next run exact',
    async (command, exitCode) => {
      await start();
      server.faults.failNext(1000, { kind: 'status', status: 503, retryAfterSeconds: 600 });
      const { child, finished } = ocsSync([command], {
        ...env(),
        OCS_HEALTH_LISTEN: '127.0.0.1:0',
        OCS_SCHEDULE: '0 0 1 1 *',
        OCS_FULL_REFRESH_SCHEDULE: 'off',
      });
      running = child;
      // The manifest got its 503: the process is waiting the 600 s out.
      await waitFor(() => server.requests.length > 0, 'the first request', STARTING_MS);
      child.kill('SIGTERM');
      // This test's timeout (TEST_MS) is a small part of the 600 s the server asked for.
      const result = await finished;
      expect(result.code, result.stderr).toBe(exitCode);
      expect(result.stderr).not.toMatch(STACK_FRAME);
      if (command === 'sync') {
        const said = result.stderr.split('\n').filter((line) => line.startsWith('ocs-sync: '));
        expect(said).toEqual([
          'ocs-sync: The run was interrupted; every committed page is kept and the next run resumes from there.',
        ]);
      }
      // Asked once: the wait was cut short, not waited out and asked again.
      expect(server.requests).toHaveLength(1);
      expect(await runStatuses()).toEqual(['interrupted']);
      server.faults.clear();
      await expectNextRunExact();
    },
    TEST_MS,
  );

  it(
    'serve: 40 downloads dropped mid-file leave no file descriptor open',
    async () => {
      await start({ bigFile: true });
      expect((await runCli(['sync'], env())).code).toBe(0);
      const [big] = await warehouse.query(
        `SELECT CAST(file_id AS TEXT) AS id FROM "_ocs_files" WHERE size = ${32 * MIB}`,
      );
      expect(big).toBeDefined();
      const publicKeyFile = join(directory.path, 'restore.pub');
      writeFileSync(publicKeyFile, teamKeys().publicKey);
      const { child, finished } = ocsSync(
        ['serve', '--listen', '127.0.0.1:0', '--public-key', publicKeyFile],
        { ...warehouse.env, OCS_SERVE_API_KEY: SERVE_KEY },
      );
      running = child;
      let url = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        url ||= /at (http:\/\/127\.0\.0\.1:\d+)/.exec(chunk.toString())?.[1] ?? '';
      });
      await waitFor(() => url, 'serve to listen', STARTING_MS);
      const path = `/api/files/${String(big!.id)}/content`;
      const download = async () => {
        const response = await request(`${url}${path}`, { headers: { 'x-api-key': SERVE_KEY } });
        let bytes = 0;
        for await (const chunk of response.body) bytes += (chunk as Buffer).length;
        return { status: response.statusCode, bytes };
      };
      // A whole download first: whatever serving a file opens once is open before counting.
      expect(await download()).toEqual({ status: 200, bytes: 32 * MIB });
      const descriptors = () => readdirSync(`/proc/${child.pid}/fd`).length;
      const before = descriptors();

      // An importer that hangs up as soon as the file starts to arrive, 40 times.
      for (let drop = 0; drop < 40; drop += 1) {
        await new Promise<void>((resolve, reject) => {
          const socket = connect(Number(new URL(url).port), '127.0.0.1');
          socket.on('error', reject);
          socket.once('data', () => {
            socket.destroy();
            resolve();
          });
          socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${SERVE_KEY}\r\n\r\n`);
        });
      }
      // Closing is asynchronous on the server's side: wait for it, with a constant slack (never 40).
      const settled = await waitFor(
        () => (descriptors() <= before + 3 ? descriptors() : false),
        `serve's descriptors back near the ${before} it had before the drops`,
        15_000,
      );
      expect(settled).toBeLessThanOrEqual(before + 3);
      expect(await download()).toEqual({ status: 200, bytes: 32 * MIB });

      child.kill('SIGTERM');
      const result = await finished;
      expect(result.code).toBe(0);
      expect(result.stderr).not.toMatch(STACK_FRAME);
      expect(result.stderr).not.toContain('cannot answer');
      await expectNextRunExact();
    },
    TEST_MS,
  );

  it(
    '`| head -c 1`: a reader that closes stdout (schema --format json) or stderr (a sync logging) ends it quietly, exit 141; the sync still ends ok',
    async () => {
      // Twice the sample's tables: a schema larger than a pipe holds (64 KiB), so the writer
      // surely meets the closed pipe.
      const fixture = [0, 1].flatMap((copy) =>
        sampleFixture().map((resource) =>
          copy === 0
            ? resource
            : {
                ...resource,
                resource: `${resource.resource}_${copy}`,
                model: `${resource.model}${copy}`,
              },
        ),
      );
      await start({ dataset: datasetFromFixture(fixture, { seed: 34, rowsPerResource: 1 }) });
      expect((await runCli(['sync'], env())).code).toBe(0);
      const schema = await runCli(['schema', '--format', 'json'], warehouse.env);
      expect(schema.stdout.length).toBeGreaterThan(96 * 1024);

      const stdoutClosed = await pipeline(
        `${cliCommand} schema --format json | head -c 1 >/dev/null`,
        warehouse.env,
      );
      expect(stdoutClosed).toEqual({ exit: 141, stderr: '' });

      // Logs for people, every event: the reader of stderr leaves after one byte, the sync goes on.
      dataset.insert('chat_messages', 5);
      for (const format of ['pretty', 'json']) {
        const stderrClosed = await pipeline(
          `${cliCommand} --log-format ${format} --log-level debug sync --resources users,chat_messages,sessions 2>&1 >/dev/null | head -c 1 >/dev/null`,
          env(),
        );
        expect(stderrClosed, format).toEqual({ exit: 141, stderr: '' });
      }
      expect(await runStatuses()).toEqual(['ok', 'ok', 'ok']);
      await expectNextRunExact();
    },
    TEST_MS,
  );
});
