/**
 * Conformance against the real server's own responses: `../shared/ocs-export/real-capture/` holds
 * every export response of a test team, captured from a running Open Chat Studio server. A replay
 * server answers each request with the captured body and headers, following the captured cursors,
 * and a full sync through the CLI must store every row of all 61 resources exactly, sealed fields
 * opened with the TEST key the capture ships. Skipped, saying so, when ../shared is absent.
 */
import { createPrivateKey } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSealedToken } from '../src/sealing/detect.js';
import { openSealedValue } from '../src/sealing/open.js';
import { parseJsonExact } from '../src/json.js';
import {
  CAPTURE_LIMIT,
  REPLAY_KEY,
  hasCapture,
  readCapture,
  startReplay,
  type Capture,
  type Replay,
} from './real-capture-replay.js';
import {
  createTestWarehouse,
  runCli,
  storedFormOf,
  splitDialects,
  type TestWarehouse,
} from './support.js';

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

  describe.each(splitDialects)('%s', (dialect) => {
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
        // The capture holds no file contents.
        OCS_FILES_ENABLED: 'false',
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
