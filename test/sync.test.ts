/**
 * End-to-end sync against the fake export server, through the CLI (`main`) and the engine's
 * public API, into a real SQLite warehouse.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { datasetFromOpenApi } from '../src/fake-server/openapi.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  ADMIN_KEY,
  MEMBER_KEY,
  SHARED_EXPORT_DIR,
  createTestWarehouse,
  expectWarehouseEqualsSource,
  hasSharedExport,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  sourceRowsAsStored,
  splitDialects,
  type TestWarehouse,
  closeCliTestBed,
  openCliTestBed,
} from './support.js';

const SMALL_PAGES = { OCS_PAGE_SIZE: '7' };

describe.each(splitDialects)('sync against the fake export server (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let directory: ReturnType<typeof temporaryDirectory>;
  let warehouse: TestWarehouse;
  let configFile: string;

  const start = async (options: Partial<Parameters<typeof startFakeServer>[0]> = {}) => {
    dataset = options.dataset ?? createSampleDataset({ rowsPerResource: 20, seed: 7 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey, ...options });
  };
  const sync = (extraArgs: string[] = [], env: Record<string, string> = {}) =>
    runCli(['--config', configFile, 'sync', ...extraArgs], {
      ...syncEnv(server.url, warehouse.env, SMALL_PAGES),
      ...env,
    });
  const pageRequests = () => server.requests.filter((request) => request.resource !== undefined);

  beforeEach(async () => {
    ({ directory, warehouse, configFile } = await openCliTestBed(dialect));
  });
  afterEach(() => closeCliTestBed({ directory, warehouse, configFile }, server));

  it('copies every resource exactly, then an unchanged rerun costs one page request per resource', async () => {
    await start();
    const first = await sync();
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);

    const resources = dataset.resources().length;
    server.requests.length = 0;
    const second = await sync();
    expect(second.code).toBe(0);
    expect(pageRequests()).toHaveLength(resources);
    expect(new Set(pageRequests().map((request) => request.resource)).size).toBe(resources);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('walks a resource from the start, with a warning, when its stored cursor is of another kind than the server’s', async () => {
    await start();
    expect((await sync()).code).toBe(0);
    const resource = 'chat_messages';
    const other = dataset.cursorKind(resource) === 'pk' ? 'updated_at_id' : 'pk';
    await warehouse.query(
      `UPDATE "_ocs_resources" SET cursor_kind = '${other}' WHERE resource = '${resource}'`,
    );
    dataset.insert(resource, 3);
    server.requests.length = 0;
    const rerun = await sync();
    expect(rerun.code).toBe(0);
    expect(rerun.logs).toContain(
      'The cursor kind changed on the server; walking this resource from the start',
    );
    const walked = pageRequests().filter((request) => request.resource === resource);
    expect(walked[0]?.query.cursor).toBeUndefined();
    expect(walked.length).toBe(Math.ceil(dataset.count(resource) / 7));
    await expectWarehouseEqualsSource(warehouse, dataset);
    const [state] = await warehouse.query(
      `SELECT cursor_kind FROM "_ocs_resources" WHERE resource = '${resource}'`,
    );
    expect(state?.cursor_kind).toBe(dataset.cursorKind(resource));
  });

  it('picks up inserts and edits incrementally', async () => {
    await start();
    expect((await sync()).code).toBe(0);
    dataset.insert('chat_messages', 15);
    dataset.insert('users', 3);
    const [firstMessage] = dataset.ids('chat_messages');
    dataset.edit('chat_messages', [firstMessage!], { content: 'edited after the first sync' });
    const [firstParticipant] = dataset.ids('participants');
    dataset.edit('participants', [firstParticipant!]);

    server.requests.length = 0;
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    // Only the new pages were asked for: far fewer requests than a full walk.
    expect(pageRequests().filter((r) => r.resource === 'chat_messages').length).toBeLessThanOrEqual(
      4,
    );
  });

  it('keeps the latest version of rows edited while paging', async () => {
    await start();
    let edited = false;
    server.options.onPageServed = ({ resource, pageIndex }) => {
      if (resource === 'chat_messages' && pageIndex === 0 && !edited) {
        edited = true;
        const ids = dataset.ids('chat_messages').slice(0, 3);
        dataset.edit('chat_messages', ids, { content: 'edited while paging' });
      }
    };
    expect((await sync()).code).toBe(0);
    expect(edited).toBe(true);
    await expectWarehouseEqualsSource(warehouse, dataset);
    const contents = (await warehouse.readTable('chat_messages')).map((row) => row.content);
    expect(contents.filter((content) => content === 'edited while paging')).toHaveLength(3);
  });

  it('resumes after a crash at any page with the exact source and no duplicates', async () => {
    await start({ dataset: createSampleDataset({ rowsPerResource: 12, seed: 3 }) });
    // Fail every page request after the Nth, for N across the whole walk: each run dies at a
    // different page, the next run resumes from the last committed one.
    let crashes = 0;
    for (let allowed = 1; allowed < 200; allowed += 9) {
      let served = 0;
      server.options.onPageServed = () => {
        served += 1;
        if (served === allowed)
          server.faults.failNext(1000, { kind: 'status', status: 400, body: ['simulated crash'] });
      };
      const result = await sync();
      server.faults.clear();
      server.options.onPageServed = undefined;
      if (result.code === 0) break;
      crashes += 1;
      dataset.insert('chat_messages', 2);
    }
    expect(crashes).toBeGreaterThan(3);
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('stops cleanly when interrupted mid-walk and resumes from the last committed page', async () => {
    await start();
    const controller = new AbortController();
    let pages = 0;
    server.options.onPageServed = () => {
      if (++pages === 6) controller.abort();
    };
    const interrupted = await runCli(
      ['--config', configFile, 'sync'],
      syncEnv(server.url, warehouse.env, SMALL_PAGES),
      { signal: controller.signal },
    );
    expect(interrupted.code).toBe(130);
    expect(interrupted.stderr).toMatch(/interrupted; every committed page is kept/);
    server.options.onPageServed = undefined;
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('waits out 429 with Retry-After and retries 5xx, dropped connections, truncated JSON and HTML pages', async () => {
    await start();
    server.faults.failNext(1, { kind: 'rate_limit', retryAfterSeconds: 1 }, { resource: 'users' });
    server.faults.failNext(1, { kind: 'status', status: 502, html: true }, { resource: 'chats' });
    server.faults.failNext(1, { kind: 'status', status: 500 }, { resource: 'chats' });
    server.faults.failNext(1, { kind: 'drop' }, { resource: 'sessions' });
    server.faults.failNext(1, { kind: 'truncate' }, { resource: 'chat_messages' });
    const result = await sync();
    expect(result.code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    const statuses = server.requests.map((request) => request.status);
    expect(statuses).toContain(429);
    expect(statuses).toContain(502);
    expect(statuses).toContain(500);
    expect(result.logs).toMatch(/retrying/);
  });

  it('gives up after the configured attempts and exits 1', async () => {
    await start();
    server.faults.failNext(100, { kind: 'status', status: 503 }, { resource: 'users' });
    const result = await sync();
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/users\/ failed after 4 attempts: HTTP 503/);
  });

  it('stops on 401 and 403 with the server detail and a hint', async () => {
    await start();
    const wrongKey = await runCli(['sync'], {
      ...syncEnv(server.url, warehouse.env),
      OCS_API_KEY: 'not-a-key',
    });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toMatch(/refused the API key \(HTTP 401\): Invalid token\./);
    expect(wrongKey.stderr).toMatch(/hint: Check OCS_API_KEY/);
    expect(wrongKey.stderr + wrongKey.logs).not.toContain('not-a-key');

    const member = await runCli(['sync'], {
      ...syncEnv(server.url, warehouse.env),
      OCS_API_KEY: MEMBER_KEY,
    });
    expect(member.code).toBe(1);
    expect(member.stderr).toMatch(/\(HTTP 403\): You do not have permission/);
    expect(member.stderr).toMatch(/team admin/);
  });

  it('skips a resource the server does not know (404) and one it refuses (400), and exits 3', async () => {
    await start();
    server.faults.failNext(
      1,
      { kind: 'status', status: 404, body: { detail: 'Unknown resource.' } },
      { resource: 'tags' },
    );
    server.faults.failNext(
      1,
      { kind: 'status', status: 400, body: ['`limit` must be an integer.'] },
      { resource: 'traces' },
    );
    const result = await sync();
    expect(result.code).toBe(3);
    expect(result.stdout).toMatch(
      /skipped tags: the server does not export it \(HTTP 404: Unknown resource\.\)/,
    );
    expect(result.stdout).toMatch(
      /failed traces: GET traces\/ answered HTTP 400: `limit` must be an integer\./,
    );
    await expectWarehouseEqualsSource(warehouse, dataset, { skip: ['tags', 'traces'] });
    const status = await runCli(['status', '--json'], warehouse.env);
    const statuses = (
      JSON.parse(status.stdout) as {
        resources: Array<{ resource: string; last_error: string | null }>;
      }
    ).resources;
    // In the manifest's order, team first, as an operator reads the server's list.
    expect(statuses.map((row) => row.resource)).toEqual([
      'team',
      ...server.manifest().entries.map((entry) => entry.resource),
    ]);
    const tags = statuses.find((row) => row.resource === 'tags');
    expect(tags?.last_error).toMatch(/404/);
    // The next run picks them up.
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('accepts bare JSON array pages and derives the cursor from the last row', async () => {
    await start({ bareArrayPages: true });
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    dataset.insert('chat_messages', 4);
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('types columns from rows when the server does not publish its schema', async () => {
    await start({ serveOpenApi: false });
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('never logs the API key or key material', async () => {
    await start();
    const result = await sync([], { OCS_LOG_LEVEL: 'trace' });
    expect(result.code).toBe(0);
    const everything = result.stdout + result.stderr + result.logs;
    expect(everything).not.toContain(ADMIN_KEY);
    expect(everything).not.toContain('PRIVATE KEY');
    expect(everything).not.toMatch(/MII[A-Za-z0-9+/]{20}/);
    expect(result.logs).toMatch(/"msg":"chat_messages: \d+ rows"/);
    expect(result.logs).toMatch(/"msg":"Sync ok"/);
  });

  it('records the schema checksum and reports when it changes', async () => {
    await start();
    expect((await sync()).code).toBe(0);
    const [stored] = await warehouse.query(
      `SELECT value FROM "_ocs_state" WHERE key = 'schema_checksum'`,
    );
    expect(stored?.value).toBe(server.manifest().schema_checksum);
  });
});

describe('hostile names from the server', () => {
  it('refuses unsafe resource and field names and never puts them into SQL', async () => {
    const warehouse = await createTestWarehouse('sqlite');
    const dataset = createSampleDataset({ rowsPerResource: 5, seed: 11 });
    const server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      transformManifest: (manifest) => ({
        ...manifest,
        entries: [
          ...manifest.entries,
          { model: 'x.y', resource: 'bad"; DROP TABLE users; --', cursor: 'pk', secret: false },
        ],
      }),
      transformRow: (resource, row) =>
        resource === 'users' ? { ...row, 'Robert"); --': 'x' } : row,
    });
    try {
      const result = await runCli(['sync'], syncEnv(server.url, warehouse.env));
      expect(result.code).toBe(3);
      expect(result.stdout).toContain(
        'skipped bad"; DROP TABLE users; --: not a name a table may have (names must match',
      );
      // The log line quotes it as JSON, in a JSON line.
      expect(result.logs).toContain(
        String.raw`Refusing resource name \"bad\\\"; DROP TABLE users; --\" in the manifest`,
      );
      expect(result.stdout).toMatch(/Refusing field name "Robert\\"\); --"/);
      await expectWarehouseEqualsSource(warehouse, dataset);
    } finally {
      await server.close();
      await warehouse.dispose();
    }
  });
});

describe.skipIf(!hasSharedExport).each(splitDialects)(
  'conformance with the real manifest and OpenAPI as served (../shared/ocs-export) (%s)',
  (dialect) => {
    const realDocuments = () => ({
      openApi: JSON.parse(readFileSync(join(SHARED_EXPORT_DIR, 'openapi.json'), 'utf8')) as unknown,
      manifest: JSON.parse(readFileSync(join(SHARED_EXPORT_DIR, 'manifest.json'), 'utf8')) as {
        entries: Array<{ resource: string; secret: boolean }>;
      },
    });

    /** A fake serving the real documents, sealing with a test key pair; a fresh warehouse. */
    const setUp = async (options: { serveOpenApi?: boolean; publicKey?: boolean } = {}) => {
      const { openApi, manifest } = realDocuments();
      const dataset = datasetFromOpenApi(openApi, manifest, { rowsPerResource: 6, seed: 5 });
      const server = await startFakeServer({
        dataset,
        openApi,
        manifest,
        serveOpenApi: options.serveOpenApi ?? true,
        teamPublicKeyPem: options.publicKey === false ? undefined : teamKeys().publicKey,
      });
      const warehouse = await createTestWarehouse(dialect);
      const sync = () =>
        runCli(['sync'], { ...syncEnv(server.url, warehouse.env), OCS_PAGE_SIZE: '4' });
      const dispose = async () => {
        await server.close();
        await warehouse.dispose();
      };
      return { manifest, dataset, server, warehouse, sync, dispose };
    };

    it('syncs every resource, sealed fields opened; an unchanged rerun exits 0', async () => {
      const { manifest, dataset, server, warehouse, sync, dispose } = await setUp();
      try {
        // The manifest exactly as the real server serves it: no key beyond the real ones.
        expect(server.manifest()).toEqual(manifest);
        const result = await sync();
        expect(result.stdout).not.toMatch(/skipped|failed/);
        expect(result.code).toBe(0);
        expect(dataset.resources()).toHaveLength(61);
        expect(manifest.entries.filter((entry) => entry.secret)).toHaveLength(8);
        await expectWarehouseEqualsSource(warehouse, dataset);
        const again = await sync();
        expect(again.code).toBe(0);
        await expectWarehouseEqualsSource(warehouse, dataset);
      } finally {
        await dispose();
      }
    });

    it('with schema/ answering 404, finds the sealed fields by shape alone', async () => {
      const { dataset, warehouse, sync, dispose } = await setUp({ serveOpenApi: false });
      try {
        const result = await sync();
        expect(result.stdout).not.toMatch(/skipped|failed/);
        expect(result.code).toBe(0);
        expect(result.logs).toMatch(/does not publish its export schema/);
        // Without the schema a null-only field has no column yet: compare the columns there are.
        for (const resource of dataset.resources()) {
          const stored = await warehouse.readTable(resource);
          const columns = Object.keys(stored[0] ?? { id: 0 });
          const expected = sourceRowsAsStored(dataset, resource).map((row) =>
            Object.fromEntries(columns.map((column) => [column, row[column] ?? null])),
          );
          expect(stored, resource).toEqual(expected);
        }
      } finally {
        await dispose();
      }
    });

    it('a team with has_public_key false: the 8 sealed resources are not requested, the rest arrive, exit 3', async () => {
      const { manifest, dataset, server, warehouse, sync, dispose } = await setUp({
        publicKey: false,
      });
      try {
        const result = await sync();
        expect(result.code).toBe(3);
        const sealed = manifest.entries.filter((e) => e.secret).map((e) => e.resource);
        expect(result.stdout.match(/Not requested: the team has no public key/g)).toHaveLength(1);
        expect(
          server.requests.filter((r) => r.resource !== undefined && sealed.includes(r.resource)),
        ).toEqual([]);
        await expectWarehouseEqualsSource(warehouse, dataset, { skip: sealed });
      } finally {
        await dispose();
      }
    });
  },
);
if (!hasSharedExport) {
  console.warn(`Skipping the conformance test: ${SHARED_EXPORT_DIR} is absent.`);
}
