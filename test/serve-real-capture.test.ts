/**
 * `serve` against the real server's own responses: the capture in `../shared/ocs-export/real-capture/`
 * is synced into a warehouse of every dialect, then served; every page must come back as the
 * server sent it (same rows, fields, key order, JSON types, 64-bit ids, timestamps, the same
 * cursors), sealed fields sealed again to the restore key, and the error answers byte for byte.
 * Skipped, saying so, when ../shared is absent.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSealedToken } from '../src/sealing/detect.js';
import { openSealedValue } from '../src/sealing/open.js';
import { parseJsonExact } from '../src/json.js';
import { toJsonText } from '../src/warehouse/values.js';
import {
  CAPTURE_LIMIT,
  REPLAY_KEY,
  hasCapture,
  readCapture,
  startReplay,
  type Capture,
  type Captured,
} from './real-capture-replay.js';
import {
  SERVE_KEY,
  get,
  restoreKeyPair,
  serveWarehouse,
  type ServedWarehouse,
} from './serve-support.js';
import { createTestWarehouse, runCli, splitDialects, type TestWarehouse } from './support.js';

type Row = Record<string, unknown>;
interface PageBody {
  cursor: string | null;
  has_more: boolean;
  results: Row[];
}

/** A row as JSON text (key order kept) with every sealed value replaced by what it opens to. */
function openedText(row: Row, key: KeyObject): string {
  const copy: Row = {};
  for (const [field, value] of Object.entries(row)) {
    copy[field] = isSealedToken(value) ? openSealedValue(value, key) : value;
  }
  return toJsonText(copy);
}

function pageOf(captured: Captured): PageBody {
  return parseJsonExact(captured.body) as PageBody;
}

describe.skipIf(!hasCapture)('serve answers as the real server did (real-capture)', () => {
  let capture: Capture;
  let testKey: KeyObject;
  let restoreKey: KeyObject;
  beforeAll(() => {
    capture = readCapture();
    testKey = createPrivateKey(capture.privateKeyPem);
    restoreKey = createPrivateKey(restoreKeyPair().privateKey);
  });

  describe.each(splitDialects)('%s', (dialect) => {
    let warehouse: TestWarehouse;
    let served: ServedWarehouse;

    beforeAll(async () => {
      warehouse = await createTestWarehouse(dialect);
      const replay = await startReplay(capture, { schema: true });
      try {
        const result = await runCli(['sync'], {
          OCS_BASE_URL: replay.url,
          OCS_API_KEY: REPLAY_KEY,
          OCS_PRIVATE_KEY: capture.privateKeyPem,
          OCS_PAGE_SIZE: CAPTURE_LIMIT,
          OCS_FILES_ENABLED: 'false',
          ...warehouse.env,
        });
        expect(result.code, result.logs.slice(-1500)).toBe(0);
      } finally {
        await replay.close();
      }
      served = await serveWarehouse(warehouse, {
        sealing: { publicKey: createPublicKey(restoreKeyPair().publicKey) },
      });
    }, 120_000);

    afterAll(async () => {
      await served?.close();
      await warehouse?.dispose();
    });

    it('serves the manifest byte for byte and the team ready for the importer', async () => {
      const manifest = await get(`${served.url}/api/export/manifest/`, {});
      expect(manifest.status).toBe(200);
      expect(manifest.text).toBe(capture.manifest.body);

      const team = await get(`${served.url}/api/export/team/`);
      const expected = parseJsonExact(capture.team.body) as Row;
      expect(toJsonText(team.json())).toBe(
        toJsonText({ ...expected, is_migrating: true, has_public_key: true }),
      );
    });

    it('serves every page of all 61 resources as captured, with the same cursors', async () => {
      let sealedValues = 0;
      expect(capture.pages.size).toBe(61);
      for (const [resource, walk] of capture.pages) {
        let cursor: string | null = null;
        for (const captured of walk.values()) {
          const query = new URLSearchParams({ limit: CAPTURE_LIMIT });
          if (cursor !== null) query.set('cursor', cursor);
          const response = await get(`${served.url}/api/export/${resource}/?${query.toString()}`);
          expect(response.status, resource).toBe(200);
          const page = response.json() as PageBody;
          const expected = pageOf(captured);
          expect(page.cursor, `${resource} cursor`).toBe(expected.cursor);
          expect(page.has_more, `${resource} has_more`).toBe(expected.has_more);
          expect(
            page.results.map((row) => openedText(row, restoreKey)),
            resource,
          ).toEqual(expected.results.map((row) => openedText(row, testKey)));
          sealedValues += page.results
            .flatMap((row) => Object.values(row))
            .filter(isSealedToken).length;
          cursor = page.cursor;
        }
      }
      expect(sealedValues).toBeGreaterThan(0);
    });

    it('hands out the server’s own cursor of each kind (limit=2)', async () => {
      for (const resource of ['chat_messages', 'chatbots', 'users']) {
        const { readFileSync } = await import('node:fs');
        const { join } = await import('node:path');
        const { CAPTURE_DIR } = await import('./real-capture-replay.js');
        const expected = parseJsonExact(
          readFileSync(join(CAPTURE_DIR, 'pages', `${resource}.limit2.body`), 'utf8'),
        ) as PageBody;
        const page = (
          await get(`${served.url}/api/export/${resource}/?limit=2`)
        ).json() as PageBody;
        expect(page.cursor, resource).toBe(expected.cursor);
        expect(page.results.map((row) => row.id)).toEqual(expected.results.map((row) => row.id));
      }
    });

    it('answers errors with the server’s bodies, statuses and headers', async () => {
      const expectAnswer = async (path: string, headers: Record<string, string>, error: string) => {
        const captured = capture.errors.get(error)!;
        const response = await get(`${served.url}${path}`, headers);
        expect(response.status, error).toBe(captured.status);
        expect(response.text, error).toBe(captured.body);
        expect(response.headers['content-type'], error).toBe(captured.headers['Content-Type']);
        expect(response.headers['www-authenticate'], error).toBe(
          captured.headers['WWW-Authenticate'],
        );
      };
      const key = { 'x-api-key': SERVE_KEY };
      await expectAnswer('/api/export/chatbots/', {}, 'no-key');
      await expectAnswer('/api/export/chatbots/', { 'x-api-key': 'wrong' }, 'bad-key');
      await expectAnswer('/api/export/chatbots/', { authorization: 'Bearer wrong' }, 'bad-key');
      await expectAnswer('/api/export/no_such_resource/', key, 'unknown-resource');
      await expectAnswer('/api/export/chatbots/?limit=abc', key, 'limit-abc');
      await expectAnswer('/api/export/chatbots/?limit=0', key, 'limit-zero');
      await expectAnswer('/api/export/chatbots/?cursor=not-a-cursor', key, 'bad-cursor');
      await expectAnswer('/api/export/chat_messages/?cursor=%25%25', key, 'bad-cursor');
      const bearer = await get(`${served.url}/api/export/team/`, {
        authorization: `Bearer ${SERVE_KEY}`,
      });
      expect(bearer.status).toBe(200);
    });
  });
});
