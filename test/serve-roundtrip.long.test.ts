/**
 * The restore round trip on every dialect: fake server -> `sync` -> `serve` -> `sync` from serve
 * (pages of 100, as the server's importer asks) into a second warehouse. Both warehouses hold the
 * same rows, sealed fields come back opened with the restore key, served pages are the server's
 * own rows field for field, and `--as-of` serves the versions of an earlier time.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { datasetFromOpenApi } from '../src/fake-server/openapi.js';
import { blobPath } from '../src/files/blob-store.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { openSealedValue } from '../src/sealing/open.js';
import { toJsonText } from '../src/warehouse/values.js';
import {
  restoreKeyPair,
  serveWarehouse,
  walk,
  SERVE_KEY,
  type ServedWarehouse,
} from './serve-support.js';
import {
  ADMIN_KEY,
  SHARED_EXPORT_DIR,
  createTestWarehouse,
  hasSharedExport,
  runCli,
  syncEnv,
  teamKeys,
  testDialects,
  type TestWarehouse,
} from './support.js';

type StoredRow = Record<string, unknown>;

function realDocuments(): { openApi: unknown; manifest: unknown } {
  const read = (name: string) =>
    JSON.parse(readFileSync(join(SHARED_EXPORT_DIR, name), 'utf8')) as unknown;
  return { openApi: read('openapi.json'), manifest: read('manifest.json') };
}
if (!hasSharedExport) {
  console.warn(`Round trip over the sample fixture: ${SHARED_EXPORT_DIR} is absent.`);
}

/** 230 rows: three pages of 100; a few past 2^53 in one resource. */
const ROWS = 230;
const BIG_ID_RESOURCE = 'chat_messages';

function sealedFieldsOf(dataset: FakeDataset): Map<string, string[]> {
  return new Map(
    (dataset.fixture ?? [])
      .filter((entry) => entry.sealedFields.length > 0)
      .map((entry) => [entry.resource, entry.sealedFields]),
  );
}

async function snapshot(
  warehouse: TestWarehouse,
  resources: string[],
): Promise<Map<string, StoredRow[]>> {
  const tables = new Map<string, StoredRow[]>();
  for (const resource of ['team', ...resources]) {
    tables.set(resource, await warehouse.readTable(resource));
  }
  return tables;
}

function expectSameTables(
  actual: Map<string, StoredRow[]>,
  expected: Map<string, StoredRow[]>,
): void {
  expect([...actual.keys()]).toEqual([...expected.keys()]);
  for (const [resource, rows] of expected) {
    const wanted =
      resource === 'team'
        ? rows.map((row) => ({ ...row, is_migrating: true, has_public_key: true }))
        : rows;
    expect(actual.get(resource)?.length, `${resource} row count`).toBe(wanted.length);
    expect(actual.get(resource), `${resource} rows`).toEqual(wanted);
  }
}

describe.each(testDialects)('restore round trip (%s)', (dialect) => {
  let dataset: FakeDataset;
  let fake: FakeServer;
  const warehouses: TestWarehouse[] = [];
  let source: TestWarehouse;
  let beforeEdit: Map<string, StoredRow[]>;
  let asOf: string;
  const edited: Array<{ resource: string; id: number | bigint }> = [];
  let removed: { resource: string; id: number | bigint };

  const newWarehouse = async () => {
    const warehouse = await createTestWarehouse(dialect);
    warehouses.push(warehouse);
    return warehouse;
  };

  const syncFrom = async (
    url: string,
    warehouse: TestWarehouse,
    extra: Record<string, string> = {},
  ) => {
    const result = await runCli(['sync'], {
      ...syncEnv(url, warehouse.env),
      OCS_PAGE_SIZE: '100',
      OCS_HISTORY: 'true',
      ...extra,
    });
    expect(result.stderr).toBe('');
    expect(result.code, result.logs.slice(-2000)).toBe(0);
    return result;
  };

  /** Syncs from a served warehouse with the restore key, as the importer would read it. */
  const syncFromServe = async (served: ServedWarehouse) => {
    const target = await newWarehouse();
    await syncFrom(served.url, target, {
      OCS_API_KEY: SERVE_KEY,
      OCS_PRIVATE_KEY: restoreKeyPair().privateKey,
    });
    return target;
  };

  beforeAll(async () => {
    const options = {
      rowsPerResource: ROWS,
      seed: 14,
      nulChars: true,
      firstIds: { [BIG_ID_RESOURCE]: 2n ** 53n + 7n },
    };
    // The real export surface (61 resources) when ../shared is there, else the sample fixture.
    const real = hasSharedExport ? realDocuments() : undefined;
    dataset = real
      ? datasetFromOpenApi(real.openApi, real.manifest, options)
      : createSampleDataset(options);
    fake = await startFakeServer({ dataset, ...real, teamPublicKeyPem: teamKeys().publicKey });
    source = await newWarehouse();
    await syncFrom(fake.url, source);
    beforeEdit = await snapshot(source, dataset.resources());

    // Later, the server edits a row of every updated_at resource and deletes one row.
    await sleep(20);
    asOf = new Date().toISOString();
    await sleep(20);
    for (const resource of dataset.resources()) {
      if (dataset.cursorKind(resource) !== 'updated_at_id') continue;
      const id = dataset.ids(resource)[3]!;
      dataset.edit(resource, [id]);
      edited.push({ resource, id });
    }
    const removedResource = 'participants';
    removed = { resource: removedResource, id: dataset.ids(removedResource)[5]! };
    dataset.remove(removedResource, [removed.id]);
    await syncFrom(fake.url, source, { OCS_HISTORY: 'true' });
    const refresh = await runCli(['sync', '--full-refresh', removedResource], {
      ...syncEnv(fake.url, source.env),
      OCS_HISTORY: 'true',
    });
    expect(refresh.code, refresh.logs.slice(-2000)).toBe(0);
  }, 240_000);

  afterAll(async () => {
    await fake?.close();
    for (const warehouse of warehouses) await warehouse.dispose();
  });

  it('serves every resource so a second warehouse synced from it equals the first', async () => {
    const served = await serveWarehouse(source, {
      sealing: { publicKey: createPublicKey(restoreKeyPair().publicKey) },
    });
    try {
      const target = await syncFromServe(served);
      if (hasSharedExport) expect(dataset.resources()).toHaveLength(61);
      expectSameTables(
        await snapshot(target, dataset.resources()),
        await snapshot(source, dataset.resources()),
      );
      await expectSameBlobs(target, source);
      const gone = await target.query(
        `SELECT id FROM "${removed.resource}" WHERE id = ${String(removed.id)}`,
      );
      expect(gone).toEqual([]);
    } finally {
      await served.close();
    }
  }, 240_000);

  it('serves rows exactly as the server sends them, sealed to the restore key', async () => {
    const served = await serveWarehouse(source, {
      sealing: { publicKey: createPublicKey(restoreKeyPair().publicKey) },
    });
    const teamKey = createPrivateKey(teamKeys().privateKey);
    const restoreKey = createPrivateKey(restoreKeyPair().privateKey);
    const sealed = sealedFieldsOf(dataset);
    const opened = (rows: StoredRow[], resource: string, key: typeof teamKey) =>
      rows.map((row) => {
        const copy = { ...row };
        for (const field of sealed.get(resource) ?? []) {
          if (typeof copy[field] === 'string') copy[field] = openSealedValue(copy[field], key);
        }
        return toJsonText(copy);
      });
    try {
      for (const resource of dataset.resources()) {
        const fromServe = (await walk(served.url, resource, 1000)).flatMap((page) => page.results);
        const fromServer = (
          await walk(fake.url, resource, 1000, { 'x-api-key': ADMIN_KEY })
        ).flatMap((page) => page.results);
        expect(opened(fromServe, resource, restoreKey), resource).toEqual(
          opened(fromServer, resource, teamKey),
        );
      }
    } finally {
      await served.close();
    }
  }, 240_000);

  it('--as-of serves every resource as it stood then, deleted rows included', async () => {
    const served = await serveWarehouse(source, {
      asOf,
      sealing: { publicKey: createPublicKey(restoreKeyPair().publicKey) },
    });
    try {
      const target = await syncFromServe(served);
      const restored = await snapshot(target, dataset.resources());
      expectSameTables(restored, beforeEdit);
      const now = await snapshot(source, dataset.resources());
      for (const { resource, id } of edited) {
        const then = restored.get(resource)!.find((row) => row.id === id);
        const later = now.get(resource)!.find((row) => row.id === id);
        expect(then, `${resource} ${String(id)}`).toBeDefined();
        expect(then!.updated_at).not.toEqual(later!.updated_at);
      }
      expect(restored.get(removed.resource)!.some((row) => row.id === removed.id)).toBe(true);
    } finally {
      await served.close();
    }
  }, 240_000);
});

/** Every file the source stored, stored again with the same bytes. */
async function expectSameBlobs(target: TestWarehouse, source: TestWarehouse): Promise<void> {
  const ledger = (warehouse: TestWarehouse) =>
    warehouse.query(`SELECT file_id, sha256, status FROM "_ocs_files" ORDER BY file_id`) as Promise<
      Array<{ file_id: unknown; sha256: string | null; status: string }>
    >;
  const stored = await ledger(source);
  expect(stored.filter((row) => row.status === 'ok').length).toBeGreaterThan(0);
  expect(await ledger(target)).toEqual(stored);
  for (const row of stored) {
    if (row.status !== 'ok') continue;
    const bytes = (warehouse: TestWarehouse) =>
      readFileSync(blobPath(warehouse.filesDir!, row.sha256!));
    expect(bytes(target).equals(bytes(source)), `file ${String(row.file_id)}`).toBe(true);
  }
}
