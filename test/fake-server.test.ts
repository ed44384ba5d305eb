/**
 * The fake export server must behave as REFERENCE.md says the real one does; every other test
 * trusts it. Each block here pins one rule of the reference.
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseLosslessJson } from 'lossless-json';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { openSealedValue } from '../src/sealing/open.js';
import { columnsFromOpenApi } from '../src/sync/openapi-columns.js';
import {
  decodeCursor,
  encodeUpdatedAtCursor,
  formatTimestamp,
  parseTimestamp,
} from '../src/export-api/cursor.js';
import { FakeDataset } from '../src/fake-server/dataset.js';
import {
  createSampleDataset,
  datasetFromOpenApi,
  fixtureFromOpenApi,
  manifestFromFixture,
  openApiFromFixture,
  sampleFixture,
  schemaChecksum,
} from '../src/fake-server/fixture.js';
import {
  startFakeServer,
  type FakeServer,
  type FakeServerOptions,
} from '../src/fake-server/server.js';

const ADMIN = 'test-admin-key';
const MEMBER = 'test-member-key';
const SHARED_EXPORT_DIR = resolve(
  dirname(fileURLToPath(import.meta.url)),
  '../../shared/ocs-export',
);
const hasSharedExport = existsSync(join(SHARED_EXPORT_DIR, 'openapi.json'));

let publicKeyPem: string;
let privateKey: KeyObject;
const servers: FakeServer[] = [];

beforeAll(() => {
  const pair = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  publicKeyPem = pair.publicKey;
  privateKey = createPrivateKey(pair.privateKey);
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function start(
  options: Partial<FakeServerOptions> = {},
): Promise<{ server: FakeServer; dataset: FakeDataset }> {
  const dataset = options.dataset ?? createSampleDataset({ rowsPerResource: 25, seed: 9 });
  const server = await startFakeServer({ dataset, teamPublicKeyPem: publicKeyPem, ...options });
  servers.push(server);
  return { server, dataset };
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

async function get(
  server: FakeServer,
  path: string,
  headers: Record<string, string> = { 'X-Api-Key': ADMIN },
  method = 'GET',
): Promise<Answer> {
  const response = await fetch(`${server.url}${path}`, { headers, method, redirect: 'manual' });
  const text = await response.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

interface PageBody {
  cursor: string | null;
  has_more: boolean;
  results: Array<Record<string, unknown>>;
}

async function page(server: FakeServer, resource: string, query = ''): Promise<PageBody> {
  const answer = await get(server, `/api/export/${resource}/${query}`);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as PageBody;
}

/** Every row of a resource by following the server's cursors. */
async function walk(
  server: FakeServer,
  resource: string,
  limit: number,
): Promise<{ rows: Array<Record<string, unknown>>; pages: PageBody[] }> {
  const rows: Array<Record<string, unknown>> = [];
  const pages: PageBody[] = [];
  let cursor: string | null = null;
  for (let guard = 0; guard < 10_000; guard += 1) {
    const query: string =
      `?limit=${limit}` + (cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`);
    const body = await page(server, resource, query);
    pages.push(body);
    rows.push(...body.results);
    if (!body.has_more) return { rows, pages };
    cursor = body.cursor;
  }
  throw new Error('walk did not end');
}

function cursorFor(updatedAt: string, id: number | bigint): string {
  return Buffer.from(`{"updated_at": "${updatedAt}", "id": ${String(id)}}`).toString('base64');
}

describe('manifest, team and schema', () => {
  it('serves the manifest without a key, in fixture order, with the checksum of the schema', async () => {
    const { server, dataset } = await start();
    const answer = await get(server, '/api/export/manifest/', {});
    expect(answer.status).toBe(200);
    const manifest = answer.json as {
      schema_checksum: string;
      entries: Array<Record<string, unknown>>;
    };
    // Exactly the real manifest's keys (REFERENCE.md, Endpoints): nothing a client could lean on.
    expect(Object.keys(manifest).sort()).toEqual(['entries', 'schema_checksum']);
    for (const entry of manifest.entries) {
      expect(Object.keys(entry).sort()).toEqual(['cursor', 'model', 'resource', 'secret']);
    }
    expect(manifest.entries.map((entry) => entry.resource)).toEqual(
      dataset.fixture?.map((resource) => resource.resource),
    );
    expect(manifest.entries.length).toBeGreaterThanOrEqual(30);
    expect(new Set(manifest.entries.map((entry) => entry.cursor))).toEqual(
      new Set(['pk', 'updated_at_id']),
    );
    expect(manifest.entries[0]).toEqual({
      model: 'users.customuser',
      resource: 'users',
      cursor: 'pk',
      secret: false,
    });
    const schema = await get(server, '/api/export/schema/?format=json', {});
    // Sealed fields are published where the real server publishes them: the field descriptions.
    const sealed = columnsFromOpenApi(schema.json).sealed;
    expect(sealed.get('participant_data')).toEqual(['data', 'encryption_key']);
    expect(sealed.get('chatbot_channels')).toEqual(['extra_data']);
    expect([...sealed.keys()].sort()).toEqual(
      manifest.entries
        .filter((entry) => entry.secret)
        .map((entry) => entry.resource)
        .sort(),
    );
    expect(manifest.schema_checksum).toBe(schemaChecksum(schema.json));
    expect(manifest.schema_checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it('can override the checksum', async () => {
    const { server } = await start({ manifestChecksum: 'abc' });
    const manifest = (await get(server, '/api/export/manifest/', {})).json as Record<
      string,
      unknown
    >;
    expect(manifest.schema_checksum).toBe('abc');
  });

  it('serves a given manifest with only the real keys, whatever else it carries', async () => {
    const { server, dataset } = await start();
    const given = manifestFromFixture(dataset.fixture!);
    server.options.manifest = {
      ...given,
      sealed_fields_by_model: { 'x.y': ['config'] },
      entries: given.entries.map((entry) => ({ ...entry, sealed_fields: ['config'] })),
    };
    const manifest = (await get(server, '/api/export/manifest/', {})).json as {
      entries: Array<Record<string, unknown>>;
    };
    expect(Object.keys(manifest).sort()).toEqual(['entries', 'schema_checksum']);
    expect(Object.keys(manifest.entries[0]!).sort()).toEqual([
      'cursor',
      'model',
      'resource',
      'secret',
    ]);
  });

  it('serves the schema as YAML by default and JSON with ?format=json, or 404 when off', async () => {
    const { server } = await start();
    const yamlAnswer = await get(server, '/api/export/schema/', {});
    expect(yamlAnswer.status).toBe(200);
    expect(yamlAnswer.headers.get('content-type')).toContain('application/vnd.oai.openapi');
    expect(yamlAnswer.text.startsWith('openapi:')).toBe(true);
    const jsonAnswer = await get(server, '/api/export/schema/?format=json', {});
    expect(jsonAnswer.status).toBe(200);
    expect(jsonAnswer.headers.get('content-type')).toBe('application/vnd.oai.openapi+json');
    expect(parseYaml(yamlAnswer.text)).toEqual(jsonAnswer.json);
    const document = jsonAnswer.json as { paths: Record<string, unknown> };
    expect(document.paths['/api/export/chat_messages/']).toBeDefined();
    expect(document.paths['/api/export/team/']).toBeDefined();
    expect(document.paths['/api/export/manifest/']).toBeDefined();

    const { server: hidden } = await start({ serveOpenApi: false });
    expect((await get(hidden, '/api/export/schema/', {})).status).toBe(404);
  });

  it('serves the team with has_public_key following the registered key', async () => {
    const { server } = await start();
    const team = (await get(server, '/api/export/team/')).json as Record<string, unknown>;
    expect(team).toMatchObject({ id: 1, is_migrating: false, has_public_key: true });
    expect(Object.keys(team)).toEqual(
      expect.arrayContaining(['id', 'name', 'slug', 'feature_flags', 'created_at', 'updated_at']),
    );
    expect(team).not.toHaveProperty('team');
    server.options.teamPublicKeyPem = undefined;
    const without = (await get(server, '/api/export/team/')).json as Record<string, unknown>;
    expect(without.has_public_key).toBe(false);
  });
});

describe('auth and routing', () => {
  it('takes the key as X-Api-Key or Authorization: Bearer', async () => {
    const { server } = await start();
    expect((await get(server, '/api/export/users/', { 'X-Api-Key': ADMIN })).status).toBe(200);
    expect(
      (await get(server, '/api/export/users/', { Authorization: `Bearer ${ADMIN}` })).status,
    ).toBe(200);
    expect(
      (await get(server, '/api/export/team/', { Authorization: `Bearer ${ADMIN}` })).status,
    ).toBe(200);
  });

  it('answers 401 with the two exact details and WWW-Authenticate, 403 for a member', async () => {
    const { server } = await start();
    for (const path of ['/api/export/users/', '/api/export/team/']) {
      const missing = await get(server, path, {});
      expect(missing.status).toBe(401);
      expect(missing.json).toEqual({ detail: 'Authentication credentials were not provided.' });
      expect(missing.headers.get('www-authenticate')).toBe('Api-Key');

      const wrongKeys: Array<Record<string, string>> = [
        { 'X-Api-Key': 'wrong' },
        { Authorization: 'Bearer wrong' },
      ];
      for (const headers of wrongKeys) {
        const invalid = await get(server, path, headers);
        expect(invalid.status).toBe(401);
        expect(invalid.json).toEqual({ detail: 'Invalid token.' });
        expect(invalid.headers.get('www-authenticate')).toBe('Api-Key');
      }
      const member = await get(server, path, { 'X-Api-Key': MEMBER });
      expect(member.status).toBe(403);
      expect(member.json).toEqual({
        detail: 'You do not have permission to perform this action.',
      });
    }
  });

  it('honours custom keys', async () => {
    const { server } = await start({ apiKeys: { admin: ['k1'], nonAdmin: ['k2'] } });
    expect((await get(server, '/api/export/users/', { 'X-Api-Key': 'k1' })).status).toBe(200);
    expect((await get(server, '/api/export/users/', { 'X-Api-Key': 'k2' })).status).toBe(403);
    expect((await get(server, '/api/export/users/', { 'X-Api-Key': ADMIN })).status).toBe(401);
  });

  it('answers 404 Unknown resource, redirects a missing slash, refuses other methods', async () => {
    const { server } = await start();
    const unknown = await get(server, '/api/export/no_such_thing/');
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual({ detail: 'Unknown resource.' });
    const redirect = await get(server, '/api/export/users?limit=3');
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get('location')).toBe('/api/export/users/?limit=3');
    const post = await get(server, '/api/export/users/', { 'X-Api-Key': ADMIN }, 'POST');
    expect(post.status).toBe(405);
    const head = await get(server, '/api/export/users/', { 'X-Api-Key': ADMIN }, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect((await get(server, '/elsewhere/')).status).toBe(404);
  });

  it('logs every request with its status and resource', async () => {
    const { server } = await start();
    await get(server, '/api/export/manifest/', {});
    await get(server, '/api/export/chats/?limit=2');
    await get(server, '/api/export/chats/', {});
    expect(server.requests[0]!.resource).toBeUndefined();
    expect(server.requests).toEqual([
      expect.objectContaining({ path: '/api/export/manifest/', status: 200, endpoint: 'manifest' }),
      expect.objectContaining({
        path: '/api/export/chats/',
        query: { limit: '2' },
        status: 200,
        resource: 'chats',
      }),
      expect.objectContaining({ path: '/api/export/chats/', status: 401, resource: 'chats' }),
    ]);
  });
});

describe('paging', () => {
  it('defaults limit to 100, cuts it to 1000 and rejects bad values with the bare-list messages', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 3, rowCounts: { users: 1105 } });
    const { server } = await start({ dataset });
    expect((await page(server, 'users')).results).toHaveLength(100);
    expect((await page(server, 'users', '?limit=5000')).results).toHaveLength(1000);
    expect((await page(server, 'users', '?limit=7')).results).toHaveLength(7);
    for (const [value, message] of [
      ['0', '`limit` must be a positive integer.'],
      ['-3', '`limit` must be a positive integer.'],
      ['abc', '`limit` must be an integer.'],
      ['2.5', '`limit` must be an integer.'],
    ] as const) {
      const answer = await get(server, `/api/export/users/?limit=${value}`);
      expect(answer.status).toBe(400);
      expect(answer.json).toEqual([message]);
    }
  });

  it('walks a pk resource by id: every row once, decimal cursors, null cursor at the end', async () => {
    const { server, dataset } = await start();
    const { rows, pages } = await walk(server, 'users', 7);
    expect(rows.map((row) => row.id)).toEqual(dataset.ids('users'));
    expect(pages.length).toBe(Math.ceil(25 / 7));
    for (const body of pages.slice(0, -1)) {
      expect(body.has_more).toBe(true);
      expect(body.cursor).toBe(String(body.results[body.results.length - 1]?.id));
    }
    expect(pages[pages.length - 1]).toMatchObject({ cursor: null, has_more: false });
  });

  it('ends with cursor null when the last page is exactly full', async () => {
    const { server } = await start();
    const { pages } = await walk(server, 'users', 5);
    expect(pages).toHaveLength(5);
    expect(pages[4]).toMatchObject({ cursor: null, has_more: false });
    expect(pages[4]?.results).toHaveLength(5);
  });

  it('walks an updated_at_id resource by (updated_at, id), through ties, with base64 JSON cursors', async () => {
    const { server, dataset } = await start();
    const { rows, pages } = await walk(server, 'chat_messages', 4);
    expect(new Set(rows.map((row) => row.id)).size).toBe(rows.length);
    expect(rows).toHaveLength(dataset.count('chat_messages'));
    const keys = rows.map(
      (row) => [parseTimestamp(row.updated_at as string)!, row.id as number] as const,
    );
    for (let index = 1; index < keys.length; index += 1) {
      const [time, id] = keys[index]!;
      const [previousTime, previousId] = keys[index - 1]!;
      expect(time > previousTime || (time === previousTime && id > previousId)).toBe(true);
    }
    // Bulk inserts share timestamps, as they do on the real server.
    expect(new Set(rows.map((row) => row.updated_at)).size).toBeLessThan(rows.length);
    const first = pages[0]!;
    const decoded = JSON.parse(Buffer.from(first.cursor!, 'base64').toString('utf8')) as {
      updated_at: string;
      id: number;
    };
    const last = first.results[first.results.length - 1]!;
    expect(decoded.id).toBe(last.id);
    expect(parseTimestamp(decoded.updated_at)).toBe(parseTimestamp(last.updated_at as string));
    expect(decoded.updated_at).toMatch(/\+00:00$/);
  });

  it('writes timestamps as UTC with Z, microseconds only when non-zero', async () => {
    const { server } = await start();
    const { rows } = await walk(server, 'chat_messages', 1000);
    const stamps = rows.map((row) => row.updated_at as string);
    for (const stamp of stamps) {
      expect(stamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?Z$/);
      expect(stamp).not.toMatch(/\.000000Z$/);
    }
    expect(stamps.some((stamp) => /:\d{2}Z$/.test(stamp))).toBe(true);
    expect(stamps.some((stamp) => /\.\d{6}Z$/.test(stamp))).toBe(true);
  });

  it('accepts a cursor derived from a stored row, with Z or +00:00', async () => {
    const { server, dataset } = await start();
    const ordered = (await walk(server, 'chat_messages', 1000)).rows;
    const pivot = ordered[9]!;
    const expected = ordered.slice(10, 15).map((row) => row.id);
    const zulu = pivot.updated_at as string;
    const offset = zulu.replace(/Z$/, '+00:00');
    for (const cursor of [
      cursorFor(zulu, pivot.id as number),
      cursorFor(offset, pivot.id as number),
      // Any JSON with the two keys: other key order, no spaces.
      Buffer.from(JSON.stringify({ id: pivot.id, updated_at: zulu })).toString('base64'),
      encodeUpdatedAtCursor(parseTimestamp(zulu)!, pivot.id as number),
    ]) {
      const body = await page(
        server,
        'chat_messages',
        `?limit=5&cursor=${encodeURIComponent(cursor)}`,
      );
      expect(body.results.map((row) => row.id)).toEqual(expected);
    }
    expect(dataset.count('chat_messages')).toBe(25);
  });

  it('answers 400 Invalid pagination cursor for cursors it cannot read', async () => {
    const { server } = await start();
    const bad = [
      ['users', 'abc'],
      ['users', '1.5'],
      ['chat_messages', 'not base64 !!'],
      ['chat_messages', Buffer.from('not json').toString('base64')],
      ['chat_messages', Buffer.from('{"id": 3}').toString('base64')],
      ['chat_messages', Buffer.from('{"updated_at": "yesterday", "id": 3}').toString('base64')],
      [
        'chat_messages',
        Buffer.from('{"updated_at": "2026-01-01T00:00:00Z", "id": "x"}').toString('base64'),
      ],
      ['chat_messages', Buffer.from('[1, 2]').toString('base64')],
      ['chat_messages', '17'],
    ];
    for (const [resource, cursor] of bad) {
      const answer = await get(
        server,
        `/api/export/${resource}/?cursor=${encodeURIComponent(cursor!)}`,
      );
      expect(answer.status, `${resource} ${cursor}`).toBe(400);
      expect(answer.json).toEqual(['Invalid pagination cursor.']);
    }
  });

  it('shows an edited updated_at_id row again later in the walk; pk rows stay put', async () => {
    const { server, dataset } = await start();
    const firstPage = await page(server, 'chat_messages', '?limit=5');
    const editedId = firstPage.results[0]!.id as number;
    dataset.edit('chat_messages', [editedId], { content: 'edited' });
    const rest: Array<Record<string, unknown>> = [];
    let cursor = firstPage.cursor;
    while (cursor !== null) {
      const body = await page(
        server,
        'chat_messages',
        `?limit=5&cursor=${encodeURIComponent(cursor)}`,
      );
      rest.push(...body.results);
      cursor = body.has_more ? body.cursor : null;
    }
    const again = rest.filter((row) => row.id === editedId);
    expect(again).toHaveLength(1);
    expect(again[0]!.content).toBe('edited');
    expect(rest[rest.length - 1]!.id).toBe(editedId);
    expect(parseTimestamp(again[0]!.updated_at as string)!).toBeGreaterThan(
      parseTimestamp(firstPage.results[0]!.updated_at as string)!,
    );

    const usersFirst = await page(server, 'users', '?limit=5');
    dataset.edit('users', [usersFirst.results[0]!.id as number], { username: 'renamed' });
    const usersRest = await page(server, 'users', `?limit=100&cursor=${usersFirst.cursor}`);
    expect(usersRest.results.some((row) => row.username === 'renamed')).toBe(false);
  });

  it('lets onPageServed edit rows while paging: the edited rows come back in the same walk', async () => {
    const { server, dataset } = await start();
    const seen: number[] = [];
    server.options.onPageServed = ({ resource, pageIndex, rows }) => {
      if (resource !== 'chat_messages') return;
      seen.push(pageIndex);
      if (pageIndex === 0)
        dataset.edit(
          'chat_messages',
          rows.slice(0, 2).map((row) => row.id),
        );
    };
    const { rows } = await walk(server, 'chat_messages', 10);
    // 25 rows + 2 edited versions = 27: three pages of 10.
    expect(seen).toEqual([0, 1, 2]);
    expect(rows).toHaveLength(27);
    expect(new Set(rows.map((row) => row.id)).size).toBe(25);
  });

  it('does not show deleted rows', async () => {
    const { server, dataset } = await start();
    const ids = dataset.ids('sessions');
    expect(dataset.remove('sessions', [ids[0]!, ids[3]!, 999_999])).toBe(2);
    const { rows } = await walk(server, 'sessions', 10);
    expect(rows.map((row) => row.id)).not.toContain(ids[0]);
    expect(rows).toHaveLength(23);
  });

  it('answers bare arrays when asked, and still follows cursors derived by the client', async () => {
    const { server, dataset } = await start({ bareArrayPages: true });
    const first = await get(server, '/api/export/users/?limit=10');
    expect(Array.isArray(first.json)).toBe(true);
    const rows = first.json as Array<{ id: number }>;
    const next = await get(server, `/api/export/users/?limit=10&cursor=${rows[9]!.id}`);
    expect((next.json as Array<{ id: number }>).map((row) => row.id)).toEqual(
      dataset.ids('users').slice(10, 20),
    );
  });

  it('serializes 64-bit ids with every digit and pages past them', async () => {
    const dataset = createSampleDataset({
      rowsPerResource: 3,
      firstIds: { chats: 2n ** 62n },
    });
    const big = 9_223_372_036_854_775_000n;
    dataset.insert('users', [{ id: big }, { id: big + 7n }]);
    dataset.insert('chat_messages', [{ id: big + 1n, chat: dataset.ids('chats')[0] }]);
    const { server } = await start({ dataset });
    const raw = await get(server, '/api/export/users/?limit=4');
    expect(raw.text).toContain(`"id":${big}`);
    const body = parseLosslessJson(raw.text, null, (digits) =>
      Number.isSafeInteger(Number(digits)) ? Number(digits) : BigInt(digits),
    ) as { cursor: string; results: Array<{ id: unknown }> };
    expect(body.results.map((row) => row.id)).toEqual([...dataset.ids('users').slice(0, 3), big]);
    expect(body.cursor).toBe(String(big));
    const after = await get(server, `/api/export/users/?cursor=${body.cursor}`);
    expect(after.text).toContain(`"id":${big + 7n}`);
    expect(after.text).toContain('"cursor":null');

    const chats = await get(server, '/api/export/chat_messages/?limit=100');
    expect(chats.text).toContain(`"id":${big + 1n}`);
    expect(chats.text).toContain(`"chat":${2n ** 62n}`);
    const messages = await get(server, '/api/export/chat_messages/?limit=3');
    const cursor = (messages.json as PageBody).cursor!;
    expect(decodeCursor('updated_at_id', cursor).kind).toBe('updated_at_id');
    const lastId = parseLosslessJson(messages.text, null, (digits) => BigInt(digits)) as {
      results: Array<{ id: bigint; updated_at: string }>;
    };
    const pivot = lastId.results[2]!;
    const derived = cursorFor(pivot.updated_at, pivot.id);
    const continued = await page(server, 'chat_messages', `?cursor=${encodeURIComponent(derived)}`);
    expect(continued.results.length).toBe(1);
    const bigCursor = encodeUpdatedAtCursor(parseTimestamp(pivot.updated_at)!, big + 1n);
    expect(Buffer.from(bigCursor, 'base64').toString()).toContain(`"id": ${big + 1n}`);
  });

  it('writes integral floats of number fields as Python does (3.0)', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 1 });
    dataset.insert('collections', [{ search_dense_weight: 3 }]);
    dataset.insert('file_chunk_embeddings', [{ embedding: [1, 0.5, -2] }]);
    const { server } = await start({ dataset });
    expect((await get(server, '/api/export/collections/')).text).toContain(
      '"search_dense_weight":3.0',
    );
    expect((await get(server, '/api/export/file_chunk_embeddings/')).text).toContain(
      '"embedding":[1.0,0.5,-2.0]',
    );
  });
});

describe('sealed fields', () => {
  it('answers 400 on a sealed resource when the team has no public key', async () => {
    const { server } = await start({ teamPublicKeyPem: undefined });
    for (const resource of ['llm_providers', 'participant_data', 'chatbot_channels']) {
      const answer = await get(server, `/api/export/${resource}/`);
      expect(answer.status).toBe(400);
      expect(answer.json).toEqual({
        detail: 'Team has no registered public key; secret data cannot be sealed.',
      });
    }
    expect((await get(server, '/api/export/users/')).status).toBe(200);
  });

  it('seals exactly the sealed fields, in values the private key opens', async () => {
    const { server, dataset } = await start();
    const body = await page(server, 'participant_data', '?limit=5');
    expect(body.results).toHaveLength(5);
    for (const row of body.results) {
      const stored = dataset.get('participant_data', row.id as number)!;
      expect(typeof row.data).toBe('string');
      expect(typeof row.encryption_key).toBe('string');
      const envelope = JSON.parse(Buffer.from(row.data as string, 'base64').toString()) as Record<
        string,
        unknown
      >;
      expect(Object.keys(envelope)).toEqual(['k', 'v']);
      expect(openSealedValue(row.data as string, privateKey)).toEqual(stored.data);
      expect(openSealedValue(row.encryption_key as string, privateKey)).toEqual(
        stored.encryption_key,
      );
      expect(row.system_metadata).toEqual(stored.system_metadata);
      expect(row.participant).toBe(stored.participant);
    }
    const providers = await page(server, 'llm_providers', '?limit=2');
    const provider = providers.results[0]!;
    expect(openSealedValue(provider.config as string, privateKey)).toEqual(
      dataset.get('llm_providers', provider.id as number)!.config,
    );
    expect(typeof provider.name).toBe('string');
  });

  it('seals the new version after an edit', async () => {
    const { server, dataset } = await start();
    const [id] = dataset.ids('chatbot_channels');
    dataset.edit('chatbot_channels', [id!], { extra_data: { bot_token: 'new' } });
    const body = await page(server, 'chatbot_channels', '?limit=1');
    expect(openSealedValue(body.results[0]!.extra_data as string, privateKey)).toEqual({
      bot_token: 'new',
    });
  });
});

describe('rate limit', () => {
  it('counts admin requests in a fixed window, sends the headers, then 429 with Retry-After', async () => {
    let now = 1_000_000;
    const { server } = await start({ rateLimit: { limit: 3, windowSeconds: 60 }, now: () => now });
    const remaining: Array<string | null> = [];
    const resets: Array<string | null> = [];
    for (let index = 0; index < 3; index += 1) {
      const answer = await get(server, index === 0 ? '/api/export/team/' : '/api/export/users/');
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-ratelimit-limit')).toBe('3');
      remaining.push(answer.headers.get('x-ratelimit-remaining'));
      resets.push(answer.headers.get('x-ratelimit-reset'));
      now += 1000;
    }
    expect(remaining).toEqual(['2', '1', '0']);
    expect(resets).toEqual(['60', '59', '58']);
    // The manifest and unauthenticated requests are not counted against the team.
    expect((await get(server, '/api/export/manifest/', {})).status).toBe(200);
    const limited = await get(server, '/api/export/users/');
    expect(limited.status).toBe(429);
    expect(limited.json).toEqual({ detail: 'Rate limit exceeded.', available_in: 57 });
    expect(limited.headers.get('retry-after')).toBe('57');
    now += 57_000;
    const reset = await get(server, '/api/export/users/');
    expect(reset.status).toBe(200);
    expect(reset.headers.get('x-ratelimit-remaining')).toBe('2');
  });
});

describe('faults', () => {
  it('injects status faults, JSON or HTML, for the matching resource only and only count times', async () => {
    const { server } = await start();
    server.faults.failNext(2, { kind: 'status', status: 503 }, { resource: 'chats' });
    server.faults.failNext(1, { kind: 'status', status: 502, html: true });
    expect(server.faults.pending()).toBe(3);
    const html = await get(server, '/api/export/users/');
    expect(html.status).toBe(502);
    expect(html.headers.get('content-type')).toContain('text/html');
    expect(html.text).toContain('<h1>502 Bad Gateway</h1>');
    expect((await get(server, '/api/export/users/')).status).toBe(200);
    const first = await get(server, '/api/export/chats/');
    expect(first.status).toBe(503);
    expect(first.json).toHaveProperty('detail');
    expect((await get(server, '/api/export/chats/')).status).toBe(503);
    expect((await get(server, '/api/export/chats/')).status).toBe(200);
    expect(server.faults.pending()).toBe(0);
    expect(server.requests.map((request) => request.fault)).toEqual([
      'status',
      undefined,
      'status',
      'status',
      undefined,
    ]);
  });

  it('injects 4xx faults with a given body, and clear() forgets queued faults', async () => {
    const { server } = await start();
    server.faults.failNext(
      1,
      { kind: 'status', status: 400, body: ['simulated'] },
      { resource: 'tags' },
    );
    const answer = await get(server, '/api/export/tags/');
    expect(answer.status).toBe(400);
    expect(answer.json).toEqual(['simulated']);
    server.faults.failNext(1, { kind: 'status', status: 401 });
    const unauthorized = await get(server, '/api/export/tags/');
    expect(unauthorized.json).toEqual({ detail: 'Invalid token.' });
    expect(unauthorized.headers.get('www-authenticate')).toBe('Api-Key');
    server.faults.failNext(5, { kind: 'status', status: 500 });
    server.faults.clear();
    expect((await get(server, '/api/export/tags/')).status).toBe(200);
  });

  it('injects 429 with Retry-After', async () => {
    const { server } = await start();
    server.faults.failNext(1, { kind: 'rate_limit', retryAfterSeconds: 7 });
    const answer = await get(server, '/api/export/users/');
    expect(answer.status).toBe(429);
    expect(answer.headers.get('retry-after')).toBe('7');
    expect(answer.json).toEqual({ detail: 'Rate limit exceeded.', available_in: 7 });
  });

  it('injects a 503 with Retry-After, JSON or a proxy page', async () => {
    const { server } = await start();
    server.faults.failNext(1, { kind: 'status', status: 503, retryAfterSeconds: 600 });
    server.faults.failNext(1, { kind: 'status', status: 503, html: true, retryAfterSeconds: 30 });
    const json = await get(server, '/api/export/manifest/', {});
    expect(json.status).toBe(503);
    expect(json.headers.get('retry-after')).toBe('600');
    expect(json.json).toEqual({ detail: 'A server error occurred.' });
    const html = await get(server, '/api/export/users/');
    expect(html.headers.get('retry-after')).toBe('30');
    expect(html.text).toContain('503 Service Temporarily Unavailable');
    // Without the option, no Retry-After: the real server's own 5xx do not send one.
    server.faults.failNext(1, { kind: 'status', status: 503 });
    expect((await get(server, '/api/export/users/')).headers.get('retry-after')).toBeNull();
  });

  it('sends rate-limit headers as a proxy rewrote them: on one answer (fault) or on every one (option)', async () => {
    const { server } = await start({ rateLimit: { limit: 50, windowSeconds: 300 } });
    server.faults.failNext(
      1,
      { kind: 'proxy_headers', headers: { 'X-RateLimit-Limit': '', 'x-ratelimit-reset': '-1' } },
      { resource: 'users' },
    );
    const rewritten = await get(server, '/api/export/users/');
    expect(rewritten.status).toBe(200);
    expect(rewritten.headers.get('x-ratelimit-limit')).toBe('');
    expect(rewritten.headers.get('x-ratelimit-reset')).toBe('-1');
    expect(rewritten.headers.get('x-ratelimit-remaining')).toBe('49');
    expect(rewritten.json).toHaveProperty('results');
    expect((await get(server, '/api/export/users/')).headers.get('x-ratelimit-limit')).toBe('50');

    server.options.proxyHeaders = { 'x-ratelimit-limit': '0' };
    for (const path of ['/api/export/team/', '/api/export/users/', '/api/export/nope/']) {
      expect((await get(server, path)).headers.get('x-ratelimit-limit')).toBe('0');
    }
    server.options.proxyHeaders = undefined;
    expect((await get(server, '/api/export/team/')).headers.get('x-ratelimit-limit')).toBe('50');
  });

  it('drops the connection without an answer', async () => {
    const { server } = await start();
    server.faults.failNext(1, { kind: 'drop' }, { resource: 'users' });
    await expect(
      fetch(`${server.url}/api/export/users/`, { headers: { 'X-Api-Key': ADMIN } }),
    ).rejects.toThrow();
    expect(server.requests[0]).toMatchObject({ status: 0, fault: 'drop', resource: 'users' });
    expect((await get(server, '/api/export/users/')).status).toBe(200);
  });

  it('truncates the body: a 200 whose JSON does not parse, or a short read against Content-Length', async () => {
    const { server, dataset } = await start();
    server.faults.failNext(1, { kind: 'truncate' }, { resource: 'users' });
    const truncated = await get(server, '/api/export/users/');
    expect(truncated.status).toBe(200);
    expect(truncated.text.length).toBeGreaterThan(0);
    expect(() => JSON.parse(truncated.text)).toThrow();
    expect(truncated.text.startsWith('{"cursor":')).toBe(true);

    server.faults.failNext(1, { kind: 'truncate', declareLength: true }, { resource: 'users' });
    const response = await fetch(`${server.url}/api/export/users/`, {
      headers: { 'X-Api-Key': ADMIN },
    });
    await expect(response.text()).rejects.toThrow();
    expect(dataset.count('users')).toBe(25);
    expect((await get(server, '/api/export/users/')).status).toBe(200);
  });

  it('delays with a latency fault, then answers normally', async () => {
    const { server } = await start();
    server.faults.failNext(1, { kind: 'latency', ms: 30 });
    const answer = await get(server, '/api/export/users/');
    expect(answer.status).toBe(200);
    expect(server.requests[0]).toMatchObject({ fault: 'latency', status: 200 });
  });

  it('draws random faults from a seed: the same seed gives the same sequence', async () => {
    const statuses: number[][] = [];
    for (let run = 0; run < 2; run += 1) {
      const { server } = await start({
        randomFaults: {
          seed: 5,
          rate: 0.5,
          kinds: [
            { kind: 'status', status: 503 },
            { kind: 'status', status: 500 },
          ],
        },
      });
      const seen: number[] = [];
      for (let index = 0; index < 20; index += 1) {
        seen.push((await get(server, '/api/export/users/?limit=1')).status);
      }
      statuses.push(seen);
    }
    expect(statuses[0]).toEqual(statuses[1]);
    expect(statuses[0]).toContain(200);
    expect(statuses[0]!.some((status) => status >= 500)).toBe(true);
  });

  it('closes with keep-alive connections open', async () => {
    const { server } = await start();
    const answer = await get(server, '/api/export/users/');
    expect(answer.headers.get('connection')).toBe('keep-alive');
    await server.close();
    await expect(fetch(`${server.url}/api/export/manifest/`)).rejects.toThrow();
  });
});

describe('dataset', () => {
  it('is deterministic for a seed', () => {
    const one = createSampleDataset({ seed: 3, rowsPerResource: 10 });
    const two = createSampleDataset({ seed: 3, rowsPerResource: 10 });
    const other = createSampleDataset({ seed: 4, rowsPerResource: 10 });
    for (const resource of one.resources()) {
      expect(one.rows(resource)).toEqual(two.rows(resource));
    }
    expect(one.rows('chat_messages')).not.toEqual(other.rows('chat_messages'));
  });

  it('covers the awkward values: quotes, newlines, emoji, NUL on request, every JSON shape', () => {
    const plain = createSampleDataset({ seed: 1, rowsPerResource: 1000 });
    const texts = plain.rows('chat_messages').map((row) => row.content as string);
    expect(texts.some((text) => text.includes('"'))).toBe(true);
    expect(texts.some((text) => text.includes('\n'))).toBe(true);
    expect(texts.some((text) => /\p{Extended_Pictographic}/u.test(text))).toBe(true);
    expect(texts.some((text) => text.includes('\u0000'))).toBe(false);
    const withNul = createSampleDataset({ seed: 1, rowsPerResource: 200, nulChars: true });
    expect(
      withNul.rows('chat_messages').some((row) => (row.content as string).includes('\u0000')),
    ).toBe(true);
    const shapes = new Set(
      plain
        .rows('participant_data')
        .map((row) =>
          Array.isArray(row.system_metadata)
            ? 'list'
            : row.system_metadata === null
              ? 'null'
              : typeof row.system_metadata,
        ),
    );
    expect(shapes).toEqual(new Set(['object', 'list', 'null', 'string', 'number', 'boolean']));
  });

  it('makes chat messages of about 470 bytes', () => {
    const dataset = createSampleDataset({
      seed: 2,
      rowsPerResource: 1,
      rowCounts: { chat_messages: 2000 },
    });
    const rows = dataset.rows('chat_messages');
    const average =
      rows.reduce((total, row) => total + JSON.stringify(row).length, 0) / rows.length;
    expect(average).toBeGreaterThan(380);
    expect(average).toBeLessThan(560);
  });

  it('pages exactly through many edits and deletions (dead entries compacted)', () => {
    const dataset = new FakeDataset({ seed: 1 });
    dataset.defineResource({
      resource: 'items',
      cursor: 'updated_at_id',
      generateRow: ({ id }) => ({ id, value: 0, updated_at: null }),
    });
    dataset.insert('items', 5000, { rowsPerTick: 7 });
    const ids = dataset.ids('items');
    dataset.edit(
      'items',
      ids.filter((_, index) => index % 3 === 0),
      (row) => ({
        value: (row.value as number) + 1,
      }),
    );
    dataset.remove(
      'items',
      ids.filter((_, index) => index % 10 === 5),
    );
    dataset.edit(
      'items',
      ids.slice(0, 50).filter((_, index) => index % 10 !== 5),
    );
    const walked: number[] = [];
    let cursor: string | null = null;
    do {
      const result = dataset.pageAfter('items', 'updated_at_id', cursor, 333);
      walked.push(...result.rows.map((row) => row.id as number));
      cursor = result.cursor;
    } while (cursor !== null);
    expect(walked).toHaveLength(dataset.count('items'));
    expect(new Set(walked)).toEqual(new Set(dataset.ids('items')));
    expect(dataset.count('items')).toBe(4500);
    const times = walked.map((id) =>
      parseTimestamp(dataset.get('items', id)!.updated_at as string)!,
    );
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  it('gives every edit a strictly later updated_at', () => {
    const dataset = createSampleDataset({ rowsPerResource: 5 });
    const before = Math.max(
      ...dataset.rows('chats').map((row) => parseTimestamp(row.updated_at as string)!),
    );
    const [first, second] = dataset.edit('chats', dataset.ids('chats').slice(0, 2));
    const firstTime = parseTimestamp(first!.updated_at as string)!;
    expect(firstTime).toBeGreaterThan(before);
    expect(parseTimestamp(second!.updated_at as string)!).toBeGreaterThan(firstTime);
    expect(formatTimestamp(parseTimestamp('2026-11-20T10:00:00.123456+00:00')!)).toBe(
      '2026-11-20T10:00:00.123456Z',
    );
    expect(formatTimestamp(parseTimestamp('2026-11-20T12:00:00+02:00')!)).toBe(
      '2026-11-20T10:00:00Z',
    );
  });

  it('refuses duplicate ids', () => {
    const dataset = createSampleDataset({ rowsPerResource: 2 });
    expect(() => dataset.insert('users', [{ id: dataset.ids('users')[0] }])).toThrow(
      /already exists/,
    );
  });
});

describe('documents from a fixture and back', () => {
  it('builds an OpenAPI document of the real shape and reads the same fixture back from it', () => {
    const fixture = sampleFixture();
    expect(fixture.length).toBeGreaterThanOrEqual(30);
    const openApi = openApiFromFixture(fixture) as {
      paths: Record<string, { get: { responses: Record<string, unknown> } }>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    const listRef = (
      openApi.paths['/api/export/chat_messages/']!.get.responses['200'] as {
        content: { 'application/json': { schema: { $ref: string } } };
      }
    ).content['application/json'].schema.$ref;
    expect(listRef).toBe('#/components/schemas/ChatMessageList');
    const detail = openApi.components.schemas.ChatMessageDetail!.properties!;
    expect(detail.summary).toEqual({ type: 'string', nullable: true });
    expect(detail.metadata).toEqual({});
    expect(detail.updated_at).toMatchObject({ type: 'string', format: 'date-time' });
    expect(openApi.components.schemas.LlmProviderDetail!.properties!.config).toMatchObject({
      type: 'string',
    });
    const kinds = new Set(
      fixture.flatMap((resource) => Object.values(resource.fields).map((spec) => spec.kind)),
    );
    expect(kinds).toEqual(
      new Set([
        'integer',
        'number',
        'boolean',
        'string',
        'datetime',
        'date',
        'uuid',
        'decimal',
        'enum',
        'json',
        'float_array',
        'integer_array',
        'string_array',
      ]),
    );

    const back = fixtureFromOpenApi(openApi, manifestFromFixture(fixture));
    expect(
      back.map((resource) => [resource.resource, resource.cursor, resource.sealedFields]),
    ).toEqual(
      fixture.map((resource) => [resource.resource, resource.cursor, resource.sealedFields]),
    );
    for (const [index, resource] of fixture.entries()) {
      const read = back[index]!;
      expect(Object.keys(read.fields)).toEqual(Object.keys(resource.fields));
      for (const [field, spec] of Object.entries(resource.fields)) {
        if (resource.sealedFields.includes(field)) continue;
        expect(read.fields[field]!.kind, `${resource.resource}.${field}`).toBe(spec.kind);
        expect(Boolean(read.fields[field]!.nullable), `${resource.resource}.${field}`).toBe(
          Boolean(spec.nullable),
        );
      }
    }
    const sessions = back.find((resource) => resource.resource === 'sessions')!;
    expect(sessions.fields.chat!.references).toBe('chats');
    expect(sessions.fields.participant!.references).toBe('participants');
  });
});

describe.skipIf(!hasSharedExport)(
  'the real OpenAPI document and manifest (../shared/ocs-export; skipped on a fresh clone without it)',
  () => {
    let openApi: {
      paths: Record<string, unknown>;
      components: {
        schemas: Record<string, { properties?: Record<string, Record<string, unknown>> }>;
      };
    };
    let manifest: { entries: Array<{ resource: string; model: string; secret: boolean }> };

    beforeAll(() => {
      openApi = JSON.parse(
        readFileSync(join(SHARED_EXPORT_DIR, 'openapi.json'), 'utf8'),
      ) as typeof openApi;
      manifest = JSON.parse(
        readFileSync(join(SHARED_EXPORT_DIR, 'manifest.json'), 'utf8'),
      ) as typeof manifest;
    });

    it('serves every real resource with rows that follow the real row schemas', async () => {
      const dataset = datasetFromOpenApi(openApi, manifest, { rowsPerResource: 4, seed: 5 });
      expect(dataset.resources()).toEqual(manifest.entries.map((entry) => entry.resource));
      const { server } = await start({ dataset, openApi, manifest });
      const served = (await get(server, '/api/export/manifest/', {})).json as {
        schema_checksum: string;
        entries: unknown[];
      };
      // The manifest exactly as the real server serves it, its real checksum included.
      expect(served).toEqual(manifest);
      expect((await get(server, '/api/export/schema/?format=json', {})).json).toEqual(openApi);

      for (const entry of manifest.entries) {
        const path = openApi.paths[`/api/export/${entry.resource}/`] as {
          get: {
            responses: { '200': { content: { 'application/json': { schema: { $ref: string } } } } };
          };
        };
        const listName = path.get.responses['200'].content['application/json'].schema.$ref
          .split('/')
          .pop()!;
        const detailName = listName.replace(/List$/, 'Detail');
        const properties = openApi.components.schemas[detailName]!.properties!;
        const body = await page(server, entry.resource, '?limit=10');
        expect(body.results, entry.resource).toHaveLength(4);
        for (const row of body.results) {
          expect(Object.keys(row).sort(), entry.resource).toEqual(Object.keys(properties).sort());
          for (const [field, value] of Object.entries(row)) {
            const property = properties[field]!;
            if (value === null) continue;
            if (property.type === 'integer')
              expect(Number.isInteger(value), `${entry.resource}.${field}`).toBe(true);
            if (property.type === 'boolean')
              expect(typeof value, `${entry.resource}.${field}`).toBe('boolean');
            if (property.type === 'string')
              expect(typeof value, `${entry.resource}.${field}`).toBe('string');
            if (property.format === 'date-time')
              expect(parseTimestamp(value as string), `${entry.resource}.${field}`).toBeDefined();
            if (property.type === 'array')
              expect(Array.isArray(value), `${entry.resource}.${field}`).toBe(true);
          }
        }
      }
      const sealed = await page(server, 'participant_data', '?limit=1');
      const stored = dataset.get('participant_data', sealed.results[0]!.id as number)!;
      expect(openSealedValue(sealed.results[0]!.data as string, privateKey)).toEqual(stored.data);
    });

    it('refuses the real sealed resources without a public key', async () => {
      const dataset = datasetFromOpenApi(openApi, manifest, { rowsPerResource: 2, seed: 5 });
      const { server } = await start({ dataset, openApi, manifest, teamPublicKeyPem: undefined });
      for (const entry of manifest.entries) {
        const answer = await get(server, `/api/export/${entry.resource}/`);
        expect(answer.status, entry.resource).toBe(entry.secret ? 400 : 200);
      }
    });

    it('answers every captured error of the real server with its status, body and headers', async () => {
      const captureDir = join(SHARED_EXPORT_DIR, 'real-capture', 'errors');
      const dataset = datasetFromOpenApi(openApi, manifest, { rowsPerResource: 2, seed: 5 });
      const { server } = await start({ dataset, openApi, manifest });
      const { server: noKey } = await start({
        dataset,
        openApi,
        manifest,
        teamPublicKeyPem: undefined,
      });
      const cases: Array<[string, FakeServer, string, Record<string, string>]> = [
        ['no-key', server, '/api/export/team/', {}],
        ['bad-key', server, '/api/export/team/', { 'X-Api-Key': 'not-a-key' }],
        ['member-key', server, '/api/export/team/', { 'X-Api-Key': MEMBER }],
        ['unknown-resource', server, '/api/export/no_such_resource/', { 'X-Api-Key': ADMIN }],
        ['limit-abc', server, '/api/export/chat_messages/?limit=abc', { 'X-Api-Key': ADMIN }],
        ['limit-zero', server, '/api/export/chat_messages/?limit=0', { 'X-Api-Key': ADMIN }],
        ['bad-cursor', server, '/api/export/chat_messages/?cursor=nope', { 'X-Api-Key': ADMIN }],
        ['no-public-key', noKey, '/api/export/llm_providers/', { 'X-Api-Key': ADMIN }],
      ];
      for (const [name, target, path, headers] of cases) {
        const real = JSON.parse(readFileSync(join(captureDir, `${name}.meta.json`), 'utf8')) as {
          status: number;
          headers: Record<string, string>;
        };
        const answer = await get(target, path, headers);
        expect(answer.status, name).toBe(real.status);
        expect(answer.text, name).toBe(readFileSync(join(captureDir, `${name}.body`), 'utf8'));
        expect(answer.headers.get('content-type'), name).toBe(real.headers['Content-Type']);
        expect(answer.headers.get('www-authenticate') ?? undefined, name).toBe(
          real.headers['WWW-Authenticate'],
        );
      }
    });

    it('answers team/ with the same keys, in the same order, as the real server', async () => {
      const real = JSON.parse(
        readFileSync(join(SHARED_EXPORT_DIR, 'real-capture', 'team.body'), 'utf8'),
      ) as Record<string, unknown>;
      const dataset = datasetFromOpenApi(openApi, manifest, { rowsPerResource: 2, seed: 5 });
      const { server } = await start({ dataset, openApi, manifest });
      const team = (await get(server, '/api/export/team/')).json as Record<string, unknown>;
      expect(Object.keys(team)).toEqual(Object.keys(real));
    });
  },
);

afterAll(() => {
  if (!hasSharedExport) {
    console.info(`Skipped the real-document checks: ${SHARED_EXPORT_DIR} is not there.`);
  }
});
