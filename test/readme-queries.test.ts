/**
 * The README's example queries run as written on every dialect, against a synced warehouse: the
 * views and joins it documents exist and mean what it says.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import {
  createTestWarehouse,
  readmeSqlBlocks,
  runCli,
  syncEnv,
  teamKeys,
  testDialects,
  type TestWarehouse,
} from './support.js';

/** The ```sql blocks between the README's analysts-queries markers. */
function readmeQueries(): string[] {
  return readmeSqlBlocks('analysts-queries');
}

describe('README example queries', () => {
  it('are there to run', () => {
    expect(readmeQueries().length).toBeGreaterThanOrEqual(4);
  });
});

describe.each(testDialects)('README example queries (%s)', (dialect) => {
  let server: FakeServer;
  let warehouse: TestWarehouse;

  beforeAll(async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 17 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    warehouse = await createTestWarehouse(dialect);
    const env = syncEnv(server.url, warehouse.env);
    expect((await runCli(['sync'], env)).code).not.toBe(1);
    dataset.remove('chats', [dataset.ids('chats')[0]!]);
    expect((await runCli(['sync', '--full-refresh', 'chats'], env)).code).not.toBe(1);
  });
  afterAll(async () => {
    await server.close();
    await warehouse.dispose();
  });

  it.each(readmeQueries().map((query) => [query.split('\n')[0]!, query]))(
    '%s',
    async (_title, query) => {
      const rows = await warehouse.query(query);
      expect(rows.length).toBeGreaterThan(0);
    },
  );

  it('counts what the views promise', async () => {
    const [deleted] = await warehouse.query(
      'SELECT count(*) AS n FROM chats WHERE _deleted_at IS NOT NULL',
    );
    const [all] = await warehouse.query('SELECT count(*) AS n FROM chats');
    const [live] = await warehouse.query('SELECT count(*) AS n FROM chats__live');
    expect(Number(deleted!.n)).toBe(1);
    expect(Number(live!.n)).toBe(Number(all!.n) - 1);
  });
});
