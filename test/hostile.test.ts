/**
 * A broken or hostile server, through the CLI (issue 26): every way it misbehaves ends with a
 * clear, specific error for that resource (or file), what was stored before stays stored, and
 * memory, disk and time stay bounded. Each test asserts on bytes, requests and outcomes, never
 * on wall-clock time.
 */
import { getEventListeners } from 'node:events';
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  closeCliTestBed,
  openCliTestBed,
  runCli,
  startCli,
  syncEnv,
  splitDialects,
  waitFor,
  type CliResult,
  type CliTestBed,
} from './support.js';
import {
  endlessPage,
  rowsByPk,
  sendJson,
  startHostileServer,
  tricklingPage,
  write,
  type HostileServer,
  type HostileServerOptions,
} from './hostile-server.js';
import { storedFiles } from './files-support.js';
import { printable, quotedName } from '../src/printable.js';
import { RequestDeadline } from '../src/source/deadline.js';
import { describeErrorBody } from '../src/source/http-source.js';
import { readLimitedBytes } from '../src/source/limited-body.js';
import { bodyText } from '../src/source/page-body.js';
import { CursorTrail } from '../src/sync/cursor-trail.js';
import { FailedKeyThrottle } from '../src/serve/failed-keys.js';
import { RESET_MARGIN_MS, pacingDelayMs, readRateLimitHeaders } from '../src/source/pacer.js';
import { MAX_SERVER_WAIT_MS, parseRetryAfterMs } from '../src/source/retry.js';

const MIB = 1024 * 1024;
/** What the hostile server writes at a time. */
const CHUNK = 64 * 1024;
/** A body is counted as it is handed over, a socket read at a time: this much at most. */
const ONE_READ = 256 * 1024;
/** Control characters that would act on a terminal (ESC, CR, C1's CSI), raw. */
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

function cutOffAfter(text: string): number {
  const match = /cut off after (\d+) bytes/.exec(text);
  if (!match) throw new Error(`no "cut off after N bytes" in: ${text.slice(0, 500)}`);
  return Number(match[1]);
}

describe.each(splitDialects)('a hostile server, through the CLI (%s)', (dialect) => {
  let bed: CliTestBed;
  let server: HostileServer | undefined;

  beforeEach(async () => {
    bed = await openCliTestBed(dialect);
    server = undefined;
  });
  afterEach(() => closeCliTestBed(bed, server));

  const start = async (options: HostileServerOptions) => {
    server = await startHostileServer(options);
    return server;
  };
  const sync = (env: Record<string, string> = {}, args: string[] = []): Promise<CliResult> =>
    runCli(['--config', bed.configFile, 'sync', ...args], {
      ...syncEnv(server!.url, bed.warehouse.env),
      OCS_PAGE_SIZE: '2',
      ...env,
    });
  const requestsTo = (resource: string) =>
    server!.requests.filter((path) => path === `/api/export/${resource}/`).length;
  const resourceState = async (resource: string) =>
    (
      await bed.warehouse.query(
        `SELECT cursor, last_error FROM _ocs_resources WHERE resource = '${resource}'`,
      )
    )[0] as { cursor: string | null; last_error: string | null };

  it('a page that never ends is cut off at http.max_page_mib while it streams; that resource fails, its pages before and the other resources are kept', async () => {
    await start({
      resources: [
        { name: 'before', pages: rowsByPk(3) },
        {
          name: 'flood',
          pages: (request, response, stream) =>
            request.index === 0
              ? rowsByPk(10)(request, response, stream)
              : endlessPage()(request, response, stream),
        },
        {
          name: 'declared',
          // A Content-Length past the limit: refused before a byte of the body is read.
          pages: (_request, response) => {
            response.writeHead(200, {
              'content-type': 'application/json',
              'content-length': String(2 * MIB),
            });
            response.end();
          },
        },
        { name: 'after', pages: rowsByPk(3) },
      ],
    });
    const result = await sync({ OCS_MAX_PAGE_MIB: '1' });
    expect(result.code, result.stdout + result.logs.slice(-2000)).toBe(3);
    expect(result.stdout).toContain(
      'failed flood: GET flood/ answered more than the 1 MiB a page may hold (http.max_page_mib (OCS_MAX_PAGE_MIB)): cut off after',
    );
    expect(result.stdout).toContain(
      'failed declared: GET declared/ answered more than the 1 MiB a page may hold (http.max_page_mib (OCS_MAX_PAGE_MIB)): its Content-Length said 2097152 bytes; nothing was read',
    );
    expect(result.stdout).toContain('raise http.max_page_mib (OCS_MAX_PAGE_MIB)');
    // Counted as the body arrived: never more than the limit and one chunk was held.
    const seen = cutOffAfter(result.stdout);
    expect(seen).toBeGreaterThan(MIB);
    expect(seen).toBeLessThanOrEqual(MIB + ONE_READ);
    // The client hung up on the endless body (the server would stream it forever), once.
    const flood = server!.streams.filter((stream) => stream.path === '/api/export/flood/');
    expect(flood).toHaveLength(2);
    expect(flood[1]!.closedByClient).toBe(true);
    expect(requestsTo('flood')).toBe(2);
    expect(requestsTo('declared')).toBe(1);
    // Nothing committed is lost: the first page of flood, and the other resources whole.
    expect((await bed.warehouse.readTable('flood')).map((row) => row.id)).toEqual([1, 2]);
    expect((await resourceState('flood')).cursor).toBe('2');
    expect((await resourceState('flood')).last_error).toContain('http.max_page_mib');
    expect(await bed.warehouse.readTable('before')).toHaveLength(3);
    expect(await bed.warehouse.readTable('after')).toHaveLength(3);
  });

  it('a file that never ends, streamed without Content-Length, is cut off at files.max_file_mib whatever its row says; its temporary file is removed; the other files are stored privately', async () => {
    const rows = [
      { id: 1, file: 'says-ten.txt', content_size: 10 },
      { id: 2, file: 'says-nothing.txt', content_size: null },
      { id: 3, file: 'honest.txt', content_size: 5 },
      { id: 4, file: 'says-zero.txt', content_size: 0 },
    ];
    await start({
      resources: [
        {
          name: 'files',
          pages: (_request, response) =>
            sendJson(response, 200, { cursor: null, has_more: false, results: rows }),
        },
      ],
      files: async (fileId, response, stream) => {
        if (fileId === '3' || fileId === '4') {
          response.writeHead(200, { 'content-type': 'text/plain' });
          response.end(fileId === '3' ? 'hello' : 'small, but its row says 0');
          return;
        }
        // No Content-Length, and no end.
        response.writeHead(200, { 'content-type': 'application/octet-stream' });
        const chunk = Buffer.alloc(CHUNK, 7);
        while (await write(response, stream, chunk)) {
          // Until the client hangs up.
        }
      },
    });
    const result = await sync({ OCS_FILES_MAX_FILE_MIB: '1' });
    expect(result.code, result.stdout + result.logs.slice(-2000)).toBe(3);
    const ledger = (await bed.warehouse.query(
      'SELECT cast(file_id as text) AS file_id, status, size, error FROM _ocs_files ORDER BY file_id',
    )) as Array<{ file_id: string; status: string; size: unknown; error: string | null }>;
    expect(ledger.map((row) => [row.file_id, row.status])).toEqual([
      ['1', 'failed'],
      ['2', 'failed'],
      ['3', 'ok'],
      ['4', 'ok'],
    ]);
    // The row's content_size (10 for file 1) bounds nothing: the bytes are trusted up to the
    // ceiling (REFERENCE.md, File contents); file 4, longer than its row's 0, is stored whole.
    for (const [index, id] of [
      [0, 1],
      [1, 2],
    ] as const) {
      expect(ledger[index]!.error).toContain(
        `file ${id}: the server sent more than the 1 MiB files.max_file_mib (OCS_FILES_MAX_FILE_MIB) allows: cut off after`,
      );
      expect(cutOffAfter(ledger[index]!.error!)).toBeGreaterThan(MIB);
      expect(cutOffAfter(ledger[index]!.error!)).toBeLessThanOrEqual(MIB + ONE_READ);
      expect(ledger[index]!.error).toContain('raise files.max_file_mib (OCS_FILES_MAX_FILE_MIB)');
    }
    // Both endless bodies were abandoned by the client, and asked for once each.
    const endless = server!.streams.filter((stream) => /files\/[12]\//.test(stream.path));
    expect(endless.map((stream) => stream.closedByClient)).toEqual([true, true]);
    // The disk holds the two honest files and no partial download.
    const blobs = storedFiles(bed.warehouse.filesDir);
    expect(blobs).toHaveLength(2);
    const sha256Dir = join(bed.warehouse.filesDir, 'sha256');
    expect(readdirSync(sha256Dir).filter((name) => name.startsWith('.partial-'))).toEqual([]);
    // Private: 0600 blobs in 0700 folders.
    for (const blob of blobs) expect(statSync(blob).mode & 0o777).toBe(0o600);
    for (const folder of [bed.warehouse.filesDir, sha256Dir]) {
      expect(statSync(folder).mode & 0o777).toBe(0o700);
    }
  });

  it('cursors that lead back (A, B, A) stop that resource naming the cycle, after three requests', async () => {
    const cursors = ['A', 'B', 'A'];
    await start({
      resources: [
        {
          name: 'cycle',
          pages: ({ index }, response) =>
            sendJson(response, 200, {
              cursor: cursors[index] ?? 'C',
              has_more: true,
              results: [{ id: index + 1, name: `row ${index + 1}` }],
            }),
        },
        { name: 'after', pages: rowsByPk(3) },
      ],
    });
    const result = await sync();
    expect(result.code, result.stdout + result.logs.slice(-2000)).toBe(3);
    expect(result.stdout).toContain(
      'failed cycle: GET cycle/ led back to a cursor this walk already followed: page 3 handed out the cursor page 2 was fetched with (A), a cycle of 2 page(s); stopping to avoid a loop.',
    );
    expect(requestsTo('cycle')).toBe(3);
    // The pages before the cycle are stored, and the cursor stays where they ended.
    expect((await bed.warehouse.readTable('cycle')).map((row) => row.id)).toEqual([1, 2]);
    expect((await resourceState('cycle')).cursor).toBe('B');
    expect(await bed.warehouse.readTable('after')).toHaveLength(3);
  });

  it('a body that trickles one byte at a time is cut off by http.request_timeout_seconds, a deadline for the whole request', async () => {
    writeFileSync(
      bed.configFile,
      'http:\n  request_timeout_seconds: 1\n  max_attempts: 2\n  min_retry_delay_ms: 5\n  max_retry_delay_seconds: 1\n',
    );
    await start({
      resources: [
        { name: 'before', pages: rowsByPk(3) },
        // A byte every 100 ms: never idle for a second, never done.
        { name: 'slow', pages: tricklingPage(100) },
      ],
    });
    const result = await sync();
    expect(result.code, result.stderr + result.logs.slice(-2000)).toBe(1);
    expect(result.stderr).toContain(
      'GET slow/ failed after 2 attempts: no complete answer within 1 s (http.request_timeout_seconds)',
    );
    const slow = server!.streams.filter((stream) => stream.path === '/api/export/slow/');
    expect(slow).toHaveLength(2);
    expect(slow.every((stream) => stream.closedByClient && !stream.finished)).toBe(true);
    expect(await bed.warehouse.readTable('before')).toHaveLength(3);
    const [run] = (await bed.warehouse.query(
      'SELECT status, error FROM _ocs_runs ORDER BY id DESC LIMIT 1',
    )) as Array<{ status: string; error: string }>;
    expect(run).toMatchObject({ status: 'failed' });
    expect(run!.error).toContain('no complete answer within 1 s');
  });

  it('JSON nested thousands deep with an id past 2^53 fails that resource at once: no retry, no stack overflow', async () => {
    const depth = 5000;
    const deep = `${'['.repeat(depth)}9007199254740993${']'.repeat(depth)}`;
    await start({
      resources: [
        {
          name: 'deep',
          pages: (_request, response) =>
            sendJson(
              response,
              200,
              `{"cursor":null,"has_more":false,"results":[{"id":1,"data":${deep}}]}`,
            ),
        },
        { name: 'after', pages: rowsByPk(3) },
      ],
    });
    const result = await sync();
    expect(result.code, result.stdout + result.logs.slice(-2000)).toBe(3);
    expect(result.stdout).toContain(
      'failed deep: GET deep/ answered JSON nested more than 1000 levels deep, which no real page does',
    );
    expect(result.logs).not.toContain('retrying');
    expect(requestsTo('deep')).toBe(1);
    expect(await bed.warehouse.readTable('after')).toHaveLength(3);
  });

  it('a 401 full of terminal escapes, and names with ESC, reach neither the terminal nor the warehouse raw', async () => {
    const hostile = `\u001b[2J\u001b[1;1Hyou have been\r\nowned\u009b31m ${'A'.repeat(5000)}`;
    await start({
      resources: [
        { name: 'plain', pages: rowsByPk(2) },
        { name: 'evil\u001b[2Jname\u202e', pages: rowsByPk(2) },
      ],
    });
    // Names with ESC: refused, and shown escaped (log lines for people too).
    const named = await sync({}, ['--log-format', 'pretty']);
    expect(named.code, named.stdout).toBe(3);
    for (const text of [named.stdout, named.stderr, named.logs]) {
      expect(text).not.toMatch(RAW_CONTROL);
      expect(text).not.toContain('\u202e');
    }
    // Escaped once where the manifest is read (the summary's label), then quoted as JSON in the
    // refusal logged (its backslashes escaped in turn): never raw.
    expect(named.stdout).toContain(
      'skipped evil\\u001b[2Jname\\u202e: not a name a table may have (names must match ^[a-z][a-z0-9_]{0,62}$)',
    );
    expect(named.logs).toContain('"evil\\\\u001b[2Jname\\\\u202e"');

    // A 401 whose detail would clear the screen: one line, escaped, cut short.
    await server!.close();
    await start({
      resources: [{ name: 'plain', pages: rowsByPk(2) }],
      team: (response) =>
        sendJson(response, 401, { detail: hostile }, { 'www-authenticate': 'Api-Key' }),
    });
    const refused = await sync();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'The server refused the API key (HTTP 401): \\u001b[2J\\u001b[1;1Hyou have been\\r\\nowned\\u009b31m AAA',
    );
    expect(refused.stderr).toContain('… (4735 more characters)');
    expect(refused.stderr.length).toBeLessThan(1000);
    for (const text of [refused.stdout, refused.stderr, refused.logs]) {
      expect(text).not.toMatch(RAW_CONTROL);
    }
    const runs = (await bed.warehouse.query('SELECT error FROM _ocs_runs ORDER BY id')) as Array<{
      error: string | null;
    }>;
    const stored = runs[runs.length - 1]!.error!;
    expect(stored).toContain('\\u001b[2J');
    expect(stored).not.toMatch(RAW_CONTROL);
    expect(stored.length).toBeLessThanOrEqual(2000);

    // What status and runs show, narrow and wide.
    const env = bed.warehouse.env;
    for (const args of [['status'], ['status', '--wide'], ['runs'], ['runs', 'show', '2']]) {
      const shown = await runCli(args, env);
      expect(shown.stdout, args.join(' ')).not.toMatch(RAW_CONTROL);
      // Where the whole error is shown, it is shown escaped (and cut when it was stored).
      if (args.length > 1) expect(shown.stdout, args.join(' ')).toContain('\\u001b[2J');
    }
  });

  it('a manifest of thousands of names no table may have, new ones every run: the daemon keeps as many metric series, and says it in one log line a run', async () => {
    await start({
      resources: [{ name: 'plain', pages: rowsByPk(2) }],
      // 2000 names a fetch, each 170 characters, none a table name, none listed twice.
      manifestNames: (fetch) =>
        Array.from({ length: 2000 }, (_, index) => `Made-Up-${fetch}-${index}-${'x'.repeat(150)}`),
    });
    const daemon = startCli(['--config', bed.configFile, 'daemon'], {
      ...syncEnv(server!.url, bed.warehouse.env),
      OCS_SCHEDULE: '* * * * * *',
      OCS_FULL_REFRESH_SCHEDULE: 'off',
      OCS_HEALTH_LISTEN: '127.0.0.1:0',
      OCS_LOG_LEVEL: 'info',
    });
    try {
      const url = await daemon.healthUrl();
      const series = (text: string) =>
        text
          .split('\n')
          .filter((line) => line.startsWith('ocs_sync_'))
          .map((line) => line.split(' ')[0]!);
      const runs = (text: string) =>
        text
          .split('\n')
          .filter((line) => line.startsWith('ocs_sync_runs_total{'))
          .reduce((sum, line) => sum + Number(line.split(' ')[1]), 0);
      const afterRuns = (count: number) =>
        waitFor(
          async () => {
            const text = await (await fetch(`${url}/metrics`)).text();
            return runs(text) >= count && text;
          },
          `${count} runs`,
          120_000,
        );
      // The first run is the warehouse's initial load, a kind of its own; from the second on,
      // every run is an incremental one like it.
      const first = await afterRuns(2);
      const later = await afterRuns(4);
      expect(series(later)).toEqual(series(first));
      expect(series(later).filter((name) => name.includes('Made-Up'))).toEqual([]);
      const invalid =
        /^ocs_sync_resource_problems_total\{resource="invalid",status="skipped"\} (\d+)$/m;
      expect(Number(invalid.exec(later)![1])).toBeGreaterThanOrEqual(4 * 2000);
      expect(later).toMatch(/^ocs_sync_rows_synced_total\{resource="plain"\} \d+$/m);
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
    const lines = daemon.logs().split('\n');
    const finished = lines.filter((line) => line.includes('"msg":"Sync partial"')).length;
    const said = lines.filter((line) => line.includes('resource names that cannot be tables'));
    expect(finished).toBeGreaterThanOrEqual(4);
    expect(said.length).toBeGreaterThanOrEqual(finished);
    expect(said.length).toBeLessThanOrEqual(finished + 1);
    expect(said[0]).toContain('The manifest lists 2000 resource names that cannot be tables');
    for (const line of said) expect(line.length).toBeLessThan(3000);
    // The run's last line names ten skipped resources at most; no other line names any.
    const others = lines.filter(
      (line) =>
        line.includes('Made-Up') && !said.includes(line) && !line.includes('"msg":"Sync partial"'),
    );
    expect(others).toEqual([]);
    for (const line of lines.filter((line) => line.includes('"msg":"Sync partial"'))) {
      expect(line).toContain('"and 1990 more"');
    }
  }, 180_000);

  it('names like constructor, __proto__ and toString are names, never Object.prototype members', async () => {
    const fields = (id: number) => ({
      constructor: `c${id}`,
      tostring: `t${id}`,
      ['__proto__']: { polluted: true },
      hasOwnProperty: 'h',
      valueOf: 1,
    });
    await start({
      resources: [
        { name: 'constructor', pages: rowsByPk(3, fields) },
        { name: 'valueof', pages: rowsByPk(2) },
        { name: 'hasownproperty', pages: rowsByPk(2) },
        { name: '__proto__', pages: rowsByPk(2) },
        { name: 'toString', pages: rowsByPk(2) },
      ],
    });
    writeFileSync(
      bed.configFile,
      [
        'http: {min_retry_delay_ms: 5, max_retry_delay_seconds: 1, max_attempts: 2}',
        'exclude_fields: {constructor: [tostring], valueof: [name]}',
        'history: [constructor]',
        'secrets: {resources: {valueof: drop}}',
        '',
      ].join('\n'),
    );
    const result = await sync();
    expect(result.code, result.stdout + result.logs.slice(-2000)).toBe(3);
    expect(result.stdout).not.toContain('is not iterable');
    // The refused names are named, and nothing else went wrong.
    expect(result.stdout).toContain('skipped __proto__, toString: not a name a table may have');
    expect(result.stdout).toContain('Refusing field name "__proto__" in constructor');
    expect(result.stdout).toContain('Refusing field name "hasOwnProperty" in constructor');
    expect(result.stdout).not.toMatch(/failed (constructor|valueof|hasownproperty)/);
    const rows = await bed.warehouse.readTable('constructor');
    expect(rows).toEqual([1, 2, 3].map((id) => ({ id, name: `row ${id}`, constructor: `c${id}` })));
    expect(await bed.warehouse.query('SELECT count(*) AS n FROM constructor__history')).toEqual([
      { n: 3n },
    ]);
    expect((await bed.warehouse.readTable('valueof'))[0]).toEqual({ id: 1 });
    expect(await bed.warehouse.readTable('hasownproperty')).toHaveLength(2);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();

    const status = await runCli(['status', '--json'], bed.warehouse.env);
    const resources = (JSON.parse(status.stdout) as { resources: Array<{ resource: string }> })
      .resources;
    expect(resources.map((resource) => resource.resource)).toEqual(
      expect.arrayContaining(['constructor', 'valueof', 'hasownproperty']),
    );

    // The same names as keys of the configuration: checked as names, nothing polluted.
    writeFileSync(
      bed.configFile,
      'exclude_fields: {__proto__: [polluted], constructor: [constructor]}\nsecrets: {resources: {__proto__: drop}}\n',
    );
    const config = await sync();
    expect(config.code).toBe(1);
    expect(config.stderr).toContain('"__proto__" is not a resource name');
    expect(config.stderr).toContain('secrets.resources.__proto__');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const fromEnv = await sync({ OCS_EXCLUDE_FIELDS: 'constructor.constructor,__proto__.x' });
    expect(fromEnv.code).toBe(1);
    expect(fromEnv.stderr).toContain('"__proto__" is not a resource name');
  });
});

describe('the pieces that bound what a server can do', () => {
  it('printable escapes every control character as JSON does, keeps emoji, and cuts long text', () => {
    expect(printable('a\u001b[2Jb\r\nc\u009b1m\u202eend')).toBe(
      'a\\u001b[2Jb\\r\\nc\\u009b1m\\u202eend',
    );
    expect(printable('line\nbreak\ttab', { keepNewlines: true })).toBe('line\nbreak\\ttab');
    // A family emoji holds zero-width joiners: it stays whole.
    expect(printable('👨‍👩‍👧')).toBe('👨‍👩‍👧');
    expect(printable('x'.repeat(310))).toBe(`${'x'.repeat(300)}… (10 more characters)`);
    // Inside a JSON string, the escaped text is the same JSON value.
    const json = JSON.stringify({ detail: 'a\u009bb\u202ec' });
    expect(JSON.parse(printable(json, { max: Infinity }))).toEqual({ detail: 'a\u009bb\u202ec' });
    expect(quotedName('evil\u001bname')).toBe('"evil\\u001bname"');
    // An error body quoted back: escaped, cut, and a 64-bit number in it no obstacle.
    expect(describeErrorBody({ detail: 'no\u001b[2J' }, '')).toBe('no\\u001b[2J');
    expect(describeErrorBody({ id: 12345678901234567890n }, '')).toBe(
      '{"id":"12345678901234567890"}',
    );
    expect(describeErrorBody(undefined, `<html><title>\u001b]0;x\u0007</title></html>`)).toBe(
      '\\u001b]0;x\\u0007',
    );
  });

  it('a body past its limit is abandoned after at most one more chunk: memory holds the limit, not the body', async () => {
    let pulled = 0;
    let closed = false;
    const endless = (async function* () {
      try {
        for (;;) {
          pulled += CHUNK;
          yield new Uint8Array(CHUNK);
        }
      } finally {
        closed = true;
      }
    })();
    await expect(
      readLimitedBytes(endless, MIB, (seen) => new Error(`seen ${seen.bytes}`)),
    ).rejects.toThrow(`seen ${MIB + CHUNK}`);
    expect(pulled).toBe(MIB + CHUNK);
    expect(closed).toBe(true);
    // A Content-Length past the limit: nothing is pulled at all.
    let touched = false;
    const declared = (async function* () {
      touched = true;
      yield new Uint8Array(1);
    })();
    await expect(
      readLimitedBytes(declared, MIB, (seen) => new Error(`declared ${seen.declared}`), 2 * MIB),
    ).rejects.toThrow(`declared ${2 * MIB}`);
    expect(touched).toBe(false);
    // Within the limit: the bytes in a buffer of their own (movable to another thread), whose
    // text drops a BOM.
    const small = (async function* () {
      yield Buffer.from('\ufeff{"a":', 'utf8');
      yield Buffer.from('1}', 'utf8');
    })();
    const bytes = await readLimitedBytes(small, MIB, () => new Error('too large'));
    expect(bytes.byteOffset).toBe(0);
    expect(bytes.buffer.byteLength).toBe(bytes.byteLength);
    expect(bodyText(bytes)).toBe('{"a":1}');
  });

  it('a request deadline leaves no listener on the long-lived signal it follows, and aborts when it passes', async () => {
    const run = new AbortController();
    for (let index = 0; index < 100; index += 1) {
      const deadline = new RequestDeadline(60_000, run.signal);
      deadline.release();
    }
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(0);

    const expiring = new RequestDeadline(1, run.signal);
    await new Promise((resolve) => expiring.signal.addEventListener('abort', resolve));
    expect(expiring.expired).toBe(true);
    expiring.release();
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(0);

    const followed = new RequestDeadline(60_000, run.signal);
    run.abort(new Error('stopping'));
    expect(followed.signal.aborted).toBe(true);
    expect(followed.expired).toBe(false);
    followed.release();
  });

  it('a cursor trail catches any cursor followed before in the walk, keeping a short hash of each', () => {
    const trail = new CursorTrail('things', 'start');
    trail.follow('A');
    trail.follow('B');
    expect(() => trail.follow('start')).toThrow(
      'page 3 handed out the cursor page 1 was fetched with (start), a cycle of 3 page(s)',
    );
    // However long a cursor is, the trail keeps a fixed-size hash of it.
    const long = new CursorTrail('things', null);
    const huge = 'x'.repeat(MIB);
    long.follow(huge);
    expect(() => long.follow(huge)).toThrow(/led back to a cursor this walk already followed/);
    expect(() => long.follow(huge)).toThrow(`(${'x'.repeat(60)}… (${MIB - 60} more characters))`);
  });
});

describe('serve: wrong keys, for the whole process', () => {
  it('take turns a few a second, are refused past the cap, and keep no state per address', async () => {
    let now = 0;
    const waits: number[] = [];
    const throttle = new FailedKeyThrottle({
      now: () => now,
      sleep: async (ms) => {
        waits.push(ms);
      },
      perSecond: 2,
      maxDelayMs: 2000,
    });
    // Six wrong keys at once, from anywhere: the first answered at once, the next four in turns
    // half a second apart up to the cap, the sixth refused without waiting.
    const turns = await Promise.all([1, 2, 3, 4, 5, 6].map(() => throttle.failed()));
    expect(turns).toEqual([true, true, true, true, true, false]);
    expect(waits).toEqual([500, 1000, 1500, 2000]);
    expect(throttle.retryAfterSeconds()).toBe(1);
    // Once their turns have passed, a wrong key is answered at once again.
    now += 2500;
    waits.length = 0;
    expect(await throttle.failed()).toBe(true);
    expect(waits).toEqual([]);
  });
});

describe('waits the server asks for', () => {
  it('are honoured up to 10 minutes, never longer', () => {
    expect(parseRetryAfterMs('999999999', undefined, 0)).toBe(MAX_SERVER_WAIT_MS);
    expect(parseRetryAfterMs('Fri, 01 Jan 2100 00:00:00 GMT', undefined, 0)).toBe(
      MAX_SERVER_WAIT_MS,
    );
    expect(parseRetryAfterMs(undefined, 1e12, 0)).toBe(MAX_SERVER_WAIT_MS);
    expect(parseRetryAfterMs('7', undefined, 0)).toBe(7000);
    const { reading } = readRateLimitHeaders({
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '1000000000',
    });
    expect(reading.resetSeconds).toBe(600);
    const delay = pacingDelayMs({
      now: 0,
      lastRequestAt: 0,
      reading: { ...reading, at: 0 },
      maxRequestsPerMinute: 0,
    });
    expect(delay).toBe(MAX_SERVER_WAIT_MS + RESET_MARGIN_MS);
  });
});
