/**
 * A server (or the proxy in front of it, or the disk under the blob store) that misbehaves in
 * ordinary ways, through the CLI on every dialect: each run ends cleanly with its exit code and
 * one clear message, never a crash or a hang, leaves nothing behind, and the next run is exact.
 * - a file replaced between its `files` row and its bytes (a stale `content_size`, REFERENCE.md);
 * - a blob store that refuses the temporary file once the body has arrived;
 * - rate-limit headers a proxy made blank, zero, negative or not a number;
 * - line breaks (CR, LF, U+2028, U+2029, NEL) in a resource name and an error detail.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { sampleFileContent } from '../src/fake-server/file-contents.js';
import {
  FILE_CONTENT_ENDPOINT,
  startFakeServer,
  type FakeServer,
  type FakeServerOptions,
} from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  closeCliTestBed,
  expectWarehouseEqualsSource,
  openCliTestBed,
  runCli,
  syncEnv,
  teamKeys,
  splitDialects,
  type CliTestBed,
} from './support.js';
import { expectBlobsMatchServer, readLedger } from './files-support.js';

interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

function logLines(logs: string): LogLine[] {
  return logs
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);
}

/** Partial downloads under the blob store: none may outlive a run. */
function partialFiles(filesDir: string): string[] {
  const root = join(filesDir, 'sha256');
  return existsSync(root) ? readdirSync(root).filter((name) => name.startsWith('.partial-')) : [];
}

/** chattr +i: even root cannot create a file in the folder (EPERM), as EACCES does for others. */
function canMakeImmutable(): boolean {
  // Without arguments chattr prints its usage and fails; only a missing program is an error here.
  return (
    process.getuid?.() === 0 && spawnSync('chattr', [], { stdio: 'ignore' }).error === undefined
  );
}
const immutableFolders = canMakeImmutable();
if (!immutableFolders) {
  console.warn('The blob store refusal test is skipped: it needs chattr and root (chattr +i).');
}

describe.each(splitDialects)('a misbehaving server, through the CLI (%s)', (dialect) => {
  let bed: CliTestBed;
  let server: FakeServer | undefined;
  let dataset: FakeDataset;

  const start = async (options: Partial<FakeServerOptions> = {}) => {
    dataset = createSampleDataset({ rowsPerResource: 12, seed: 34 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey, ...options });
  };
  const env = () => syncEnv(server!.url, bed.warehouse.env);
  const sync = (args: string[] = [], globals: string[] = []) =>
    runCli([...globals, '--config', bed.configFile, 'sync', ...args], env());
  /** The next run ends ok and leaves the warehouse (rows and file contents) equal to the server. */
  const expectNextRunExact = async (args: string[] = []) => {
    const next = await sync(args);
    expect(next.code, next.stdout + next.logs.slice(-2000)).toBe(0);
    await expectWarehouseEqualsSource(bed.warehouse, dataset);
    await expectBlobsMatchServer(bed.warehouse, dataset, (row) => server!.fileContent(row));
    expect(partialFiles(bed.warehouse.filesDir)).toEqual([]);
  };

  beforeEach(async () => {
    bed = await openCliTestBed(dialect);
  });
  afterEach(async () => {
    await closeCliTestBed(bed, server);
    server = undefined;
  });

  it('a small file replaced after its row was read (content_size now smaller than the body, sent whole) is stored as received, with one note; a full refresh of files is exact', async () => {
    await start();
    // A small file whose row gives a size (ids ending 1, 2, 4, 6 or 8 in the sample).
    const target = dataset
      .rows('files')
      .find((row) => [1n, 2n, 4n, 6n, 8n].includes(BigInt(row.id) % 10n))!;
    const staleSize = Number(target.content_size);
    expect(sampleFileContent(target)).not.toBeNull();
    server!.faults.failNext(
      1,
      { kind: 'replace_file', extraBytes: 300 },
      { resource: FILE_CONTENT_ENDPOINT, fileId: String(target.id) },
    );

    const first = await sync();
    expect(first.code, first.stdout + first.logs.slice(-2000)).toBe(0);
    expect(first.stderr).toBe('');
    // The warehouse holds the row as it was read, the ledger the bytes as they came.
    const [row] = await bed.warehouse.query(
      `SELECT content_size FROM files WHERE id = ${String(target.id)}`,
    );
    expect(Number(row!.content_size)).toBe(staleSize);
    const ledger = (await readLedger(bed.warehouse)).find(
      (record) => record.file_id === String(target.id),
    );
    expect(ledger).toMatchObject({ status: 'ok', size: staleSize + 300, error: null });
    // A note, not a failure: one line, naming the file and both sizes.
    const notes = logLines(first.logs).filter((line) => line.msg.includes('content_size'));
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({
      level: 30,
      fileId: String(target.id),
      contentSize: staleSize,
      size: staleSize + 300,
    });
    expect(partialFiles(bed.warehouse.filesDir)).toEqual([]);

    // `files` pages by id: a full refresh of it re-reads the row (REFERENCE.md, File contents).
    await expectNextRunExact(['--full-refresh', 'files']);
  });

  it.skipIf(!immutableFolders)(
    'a blob store that refuses the temporary file once the body has arrived fails that file, named, and stops the files step; no crash, nothing left behind; the next run stores it',
    async () => {
      await start();
      expect((await sync()).code).toBe(0);
      const [added] = dataset.insert('files', [{ id: 100_001, name: 'new.txt' }]);
      expect(sampleFileContent(added!)).not.toBeNull();
      const folder = join(bed.warehouse.filesDir, 'sha256');
      execFileSync('chattr', ['+i', folder]);
      let refused;
      try {
        refused = await sync();
      } finally {
        execFileSync('chattr', ['-i', folder]);
      }
      expect(refused.code, refused.stdout + refused.logs.slice(-2000)).toBe(3);
      expect(refused.stderr).toBe('');
      expect(refused.stdout).toContain(
        `failed: file 100001: Cannot write file contents to files.dir (${bed.warehouse.filesDir}): EPERM: operation not permitted, open`,
      );
      expect(refused.stdout).toContain(
        'hint: Make files.dir (OCS_FILES_DIR) writable by the user ocs-sync runs as',
      );
      expect(refused.stdout).toContain('problem: The files step stopped early: at file 100001');
      const ledger = (await readLedger(bed.warehouse)).find(
        (record) => record.file_id === '100001',
      );
      expect(ledger).toMatchObject({ status: 'failed', sha256: null });
      expect(ledger!.error).toContain('EPERM');
      expect(partialFiles(bed.warehouse.filesDir)).toEqual([]);
      const runs = await bed.warehouse.query('SELECT status FROM "_ocs_runs" ORDER BY id');
      expect(runs.map((run) => run.status)).toEqual(['ok', 'partial']);

      await expectNextRunExact();
    },
  );

  it('blank, zero, negative and non-numeric rate-limit headers are no reading, said once a run: no run hangs or crawls', async () => {
    await start({ rateLimit: { limit: 5000, windowSeconds: 300 } });
    // With nothing left and a window that ends at once, a limit that cannot be used used to
    // leave the pacer waiting for an answer while nothing was in flight: a run that never ended.
    const spent = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '0' };
    const cases: Array<[string, string, Record<string, string>]> = [
      ['X-RateLimit-Limit', '', spent],
      ['X-RateLimit-Limit', '0', spent],
      ['X-RateLimit-Limit', '-5', spent],
      ['X-RateLimit-Limit', 'lots', spent],
      ['X-RateLimit-Remaining', '', {}],
      ['X-RateLimit-Remaining', '-1', {}],
      ['X-RateLimit-Reset', 'soon', { 'x-ratelimit-remaining': '0' }],
    ];
    for (const [header, value, others] of cases) {
      server!.options.proxyHeaders = { ...others, [header.toLowerCase()]: value };
      dataset.insert('chat_messages', 3);
      const run = await sync();
      const label = `${header}: ${JSON.stringify(value)}`;
      expect(run.code, `${label}\n${run.stdout}${run.logs.slice(-2000)}`).toBe(0);
      expect(run.stderr, label).toBe('');
      const said = logLines(run.logs).filter((line) => line.msg.includes('rate-limit headers'));
      expect(said, label).toHaveLength(1);
      expect(said[0]!.level, label).toBe(40);
      expect(said[0]!.msg, label).toContain(`${header}: ${JSON.stringify(value)}`);
      expect(said[0]!.msg, label).toContain('http.max_requests_per_minute');
      // Every answer carried them, and none was waited for.
      expect(run.stdout, label).toMatch(/Run \d+ \((initial|incremental)\): ok/);
    }
    server!.options.proxyHeaders = undefined;
    await expectNextRunExact();
  });

  it('CR, LF, U+2028, U+2029 and NEL in a resource name and an error detail never start a line of their own: pretty logs, the summary, status and runs', async () => {
    const forged = '\r\nFAKE LOG\u2028FAKE\u2029FAKE\u0085FAKE\nFAKE\rFAKE';
    const evil = `evil${forged}`;
    await start({
      transformManifest: (manifest) => ({
        ...manifest,
        entries: [
          ...manifest.entries,
          { model: `evil.model${forged}`, resource: evil, cursor: 'pk', secret: false },
        ],
      }),
    });
    server!.faults.failNext(
      1,
      { kind: 'status', status: 400, body: { detail: `bad page${forged}` } },
      { resource: 'users' },
    );
    const first = await runCli(
      ['--log-format', 'pretty', '--config', bed.configFile, 'sync'],
      env(),
      { terminal: true },
    );
    expect(first.code, first.stdout).toBe(3);
    const status = await runCli(['status'], bed.warehouse.env);
    const wide = await runCli(['status', '--wide'], bed.warehouse.env);
    const runs = await runCli(['runs'], bed.warehouse.env);
    const run = await runCli(['runs', 'show', '1'], bed.warehouse.env);
    const shown = {
      'sync stdout': first.stdout,
      'sync stderr': first.stderr,
      'pretty log lines': first.logs,
      status: status.stdout,
      'status --wide': wide.stdout,
      runs: runs.stdout,
      'runs show': run.stdout,
    };
    const escaped = '\\r\\nFAKE LOG\\u2028FAKE\\u2029FAKE\\u0085FAKE\\nFAKE\\rFAKE';
    for (const [where, text] of Object.entries(shown)) {
      // A raw line break (the live area's own `\r` + clear-line included) never precedes them.
      // eslint-disable-next-line no-control-regex -- the live area's clear-line escape
      expect(text, where).not.toMatch(/[\r\n\u2028\u2029\u0085](\u001b\[2K)?FAKE/);
      expect(text, where).not.toMatch(/[\u2028\u2029\u0085]/);
    }
    expect(first.stdout).toContain(`skipped evil${escaped}: `);
    expect(first.stdout).toContain(
      `failed users: GET users/ answered HTTP 400: bad page${escaped}`,
    );
    expect(first.logs).toContain(`GET users/ answered HTTP 400: bad page${escaped}`);
    expect(wide.stdout).toContain(`bad page${escaped}`);
    expect(run.stdout).toContain(`bad page${escaped}`);

    // The server stops sending them: the next run is exact.
    server!.options.transformManifest = undefined;
    await expectNextRunExact();
  });
});
