/**
 * Conformance against the real server's own responses: `../shared/ocs-export/real-capture/` holds
 * every export response of a test team, captured from a running Open Chat Studio server. A replay
 * server answers each request with the captured body and headers, following the captured cursors,
 * and a full sync through the CLI must store every row of all 61 resources exactly, sealed fields
 * opened with the TEST key the capture ships. Skipped, saying so, when ../shared is absent.
 */
import { createPrivateKey } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSealedToken } from '../src/sealing/detect.js';
import { openSealedValue } from '../src/sealing/open.js';
import { parseJsonExact } from '../src/source/json.js';
import {
  SHARED_EXPORT_DIR,
  createTestWarehouse,
  runCli,
  storedFormOf,
  testDialects,
  type TestWarehouse,
} from './support.js';

const CAPTURE_DIR = join(SHARED_EXPORT_DIR, 'real-capture');
const hasCapture = existsSync(join(CAPTURE_DIR, 'manifest.body'));
if (!hasCapture) {
  console.warn(`Skipping the real-capture conformance tests: ${CAPTURE_DIR} is absent.`);
}

const REPLAY_KEY = 'replay-admin-key';
/** The capture walked every resource with limit=1000; the replay answers that limit only. */
const CAPTURE_LIMIT = '1000';

interface Captured {
  status: number;
  headers: Record<string, string>;
  body: string;
}

interface Capture {
  manifest: Captured;
  team: Captured;
  /** resource -> cursor ('' for the first page) -> the page answered for it. */
  pages: Map<string, Map<string, Captured>>;
  errors: Map<string, Captured>;
  privateKeyPem: string;
}

function readCaptured(base: string): Captured {
  const meta = JSON.parse(readFileSync(`${base}.meta.json`, 'utf8')) as {
    status: number;
    headers: Record<string, string>;
  };
  return { status: meta.status, headers: meta.headers, body: readFileSync(`${base}.body`, 'utf8') };
}

function readCapture(): Capture {
  const pages = new Map<string, Map<string, Captured>>();
  const pageFiles = readdirSync(join(CAPTURE_DIR, 'pages'))
    .filter((name) => /^[a-z0-9_]+\.\d{3}\.body$/.test(name))
    .sort();
  for (const name of pageFiles) {
    const resource = name.slice(0, name.indexOf('.'));
    const page = readCaptured(join(CAPTURE_DIR, 'pages', name.replace(/\.body$/, '')));
    let walk = pages.get(resource);
    if (!walk) pages.set(resource, (walk = new Map()));
    // Each page answers the cursor the page before it handed out.
    const previous = [...walk.values()].pop();
    const cursor = previous ? (JSON.parse(previous.body) as { cursor: string }).cursor : '';
    walk.set(cursor, page);
  }
  const errors = new Map<string, Captured>();
  for (const name of readdirSync(join(CAPTURE_DIR, 'errors'))) {
    if (name.endsWith('.body')) {
      const base = name.replace(/\.body$/, '');
      errors.set(base, readCaptured(join(CAPTURE_DIR, 'errors', base)));
    }
  }
  return {
    manifest: readCaptured(join(CAPTURE_DIR, 'manifest')),
    team: readCaptured(join(CAPTURE_DIR, 'team')),
    pages,
    errors,
    privateKeyPem: readFileSync(join(CAPTURE_DIR, 'TEST_team_private.pem'), 'utf8'),
  };
}

interface Replay {
  url: string;
  /** Paths asked, in order. */
  requests: string[];
  close(): Promise<void>;
}

/** Answers as the captured server did; `schema/` serves the shared openapi.json or a 404. */
async function startReplay(capture: Capture, options: { schema: boolean }): Promise<Replay> {
  const requests: string[] = [];
  const openApiText = readFileSync(join(SHARED_EXPORT_DIR, 'openapi.json'), 'utf8');
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://replay.invalid');
    requests.push(url.pathname + url.search);
    const send = (answer: Captured) => {
      response.writeHead(answer.status, answer.headers);
      response.end(answer.body);
    };
    const match = /^\/api\/export\/([a-z0-9_]+)\/$/.exec(url.pathname);
    const endpoint = match?.[1];
    if (endpoint === 'manifest') return send(capture.manifest);
    if (endpoint === 'schema') {
      if (!options.schema) {
        response.writeHead(404, { 'Content-Type': 'text/html' });
        return response.end('<h1>Not Found</h1>');
      }
      response.writeHead(200, { 'Content-Type': 'application/vnd.oai.openapi+json' });
      return response.end(openApiText);
    }
    const key = request.headers['x-api-key'];
    if (key === undefined) return send(capture.errors.get('no-key')!);
    if (key !== REPLAY_KEY) return send(capture.errors.get('bad-key')!);
    if (endpoint === 'team') return send(capture.team);
    const walk = endpoint === undefined ? undefined : capture.pages.get(endpoint);
    if (!walk) return send(capture.errors.get('unknown-resource')!);
    const limit = url.searchParams.get('limit');
    if (limit !== CAPTURE_LIMIT) {
      response.writeHead(500, { 'Content-Type': 'text/plain' });
      return response.end(`the replay only answers limit=${CAPTURE_LIMIT}, not ${limit}`);
    }
    const cursor = url.searchParams.get('cursor') ?? '';
    const page = walk.get(cursor);
    if (page) return send(page);
    // A client resuming after the last row asks with that row's cursor: the real server answers
    // with an empty last page.
    if (isCursorAfterLastRow(capture, endpoint!, cursor)) {
      response.writeHead(200, { 'Content-Type': 'application/json' });
      return response.end('{"cursor":null,"has_more":false,"results":[]}');
    }
    send(capture.errors.get('bad-cursor')!);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Without the schema a field gets its column with its first non-null value: a field null in every
 * row has none. Checks that, and removes such fields from `expected`.
 */
function withoutNullOnlyFields(
  expected: Array<Record<string, unknown>>,
  stored: Array<Record<string, unknown>>,
  resource: string,
): void {
  const columns = new Set(Object.keys(stored[0] ?? {}));
  for (const row of expected) {
    for (const field of Object.keys(row)) {
      if (columns.has(field)) continue;
      expect(row[field], `${resource}.${field}`).toBeNull();
      delete row[field];
    }
  }
}

/** Whether `cursor` (pk: an id; updated_at_id: base64 JSON) points at or past the last row. */
function isCursorAfterLastRow(capture: Capture, resource: string, cursor: string): boolean {
  const walk = [...(capture.pages.get(resource)?.values() ?? [])];
  const last =
    walk.length === 0
      ? undefined
      : (
          JSON.parse(walk[walk.length - 1]!.body) as {
            results: Array<{ id: number; updated_at?: string }>;
          }
        ).results.at(-1);
  if (!last) return true;
  if (/^\d+$/.test(cursor)) return BigInt(cursor) >= BigInt(last.id);
  try {
    const decoded = JSON.parse(Buffer.from(cursor, 'base64').toString('utf8')) as {
      updated_at: string;
      id: number;
    };
    return (
      decoded.id === last.id && Date.parse(decoded.updated_at) === Date.parse(last.updated_at ?? '')
    );
  } catch {
    return false;
  }
}

/** Every row the capture holds for a resource, once per id (the last seen), by id. */
function capturedRows(capture: Capture, resource: string): Array<Record<string, unknown>> {
  const byId = new Map<string, Record<string, unknown>>();
  for (const page of capture.pages.get(resource)?.values() ?? []) {
    const body = parseJsonExact(page.body) as { results: Array<Record<string, unknown>> };
    for (const row of body.results) byId.set(String(row.id), row);
  }
  return [...byId.values()].sort((left, right) =>
    BigInt(left.id as number) < BigInt(right.id as number) ? -1 : 1,
  );
}

describe.skipIf(!hasCapture)('sync against the real server responses (real-capture)', () => {
  let capture: Capture;
  beforeAll(() => {
    capture = readCapture();
  });

  describe.each(testDialects)('%s', (dialect) => {
    let warehouse: TestWarehouse;
    let replay: Replay | undefined;
    beforeAll(async () => {
      warehouse = await createTestWarehouse(dialect);
    });
    afterAll(async () => {
      await replay?.close();
      await warehouse.dispose();
    });

    const sync = (url: string) =>
      runCli(['sync'], {
        OCS_BASE_URL: url,
        OCS_API_KEY: REPLAY_KEY,
        OCS_PRIVATE_KEY: capture.privateKeyPem,
        OCS_PAGE_SIZE: CAPTURE_LIMIT,
        ...warehouse.env,
      });

    /** Every resource equals the capture, sealed fields opened with the TEST key. */
    const expectEqualsCapture = async (options: { schema: boolean }) => {
      const privateKey = createPrivateKey(capture.privateKeyPem);
      const manifest = JSON.parse(capture.manifest.body) as {
        entries: Array<{ resource: string; secret: boolean }>;
      };
      expect(manifest.entries).toHaveLength(61);
      let opened = 0;
      for (const { resource } of manifest.entries) {
        const expected = capturedRows(capture, resource).map((row) => {
          const plain: Record<string, unknown> = {};
          for (const [field, value] of Object.entries(row)) {
            if (isSealedToken(value)) opened += 1;
            plain[field] = isSealedToken(value) ? openSealedValue(value, privateKey) : value;
          }
          return storedFormOf(plain, dialect);
        });
        const stored = await warehouse.readTable(resource);
        if (!options.schema) withoutNullOnlyFields(expected, stored, resource);
        expect(stored, resource).toEqual(expected);
      }
      // The capture seals every value of the 9 sealed fields of its 8 sealed resources.
      expect(opened).toBeGreaterThan(0);
      const team = await warehouse.readTable('team');
      const expectedTeam = [storedFormOf(JSON.parse(capture.team.body), dialect)];
      if (!options.schema) withoutNullOnlyFields(expectedTeam, team, 'team');
      expect(team).toEqual(expectedTeam);
    };

    it('stores all 61 resources exactly, sealed fields opened; an unchanged rerun asks one page each', async () => {
      replay = await startReplay(capture, { schema: true });
      const first = await sync(replay.url);
      expect(first.stdout).not.toMatch(/skipped|failed|problem/);
      expect(first.code).toBe(0);
      await expectEqualsCapture({ schema: true });

      replay.requests.length = 0;
      const again = await sync(replay.url);
      expect(again.code).toBe(0);
      const pageRequests = replay.requests.filter(
        (path) => !/\/(manifest|team|schema)\//.test(path),
      );
      expect(pageRequests).toHaveLength(61);
      await expectEqualsCapture({ schema: true });
    });

    it('without the schema, finds the sealed fields by the shape of their values', async () => {
      await replay?.close();
      await warehouse.dispose();
      warehouse = await createTestWarehouse(dialect);
      replay = await startReplay(capture, { schema: false });
      const result = await sync(replay.url);
      expect(result.stdout).not.toMatch(/skipped|failed|problem/);
      expect(result.code).toBe(0);
      await expectEqualsCapture({ schema: false });
      expect(result.logs).toMatch(/does not publish its export schema/);
    });
  });
});
