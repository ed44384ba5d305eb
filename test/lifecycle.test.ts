/**
 * A warehouse over time, on every dialect: schema changes, one writer at a time, full refreshes
 * that find deletions and pk edits, history versions, values the database cannot hold.
 */
import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { datasetFromFixture } from '../src/fake-server/field-values.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import type { FixtureResource } from '../src/fake-server/fixture-schema.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  createTestWarehouse,
  expectWarehouseEqualsSource,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  type TestWarehouse,
} from './support.js';

/** A small schema, then the same schema one server version later. */
function schemas(): { before: FixtureResource[]; after: FixtureResource[] } {
  const before: FixtureResource[] = [
    {
      resource: 'widgets',
      model: 'shop.widget',
      cursor: 'pk',
      sealedFields: [],
      fields: {
        name: { kind: 'string', text: 'name' },
        weight: { kind: 'integer' },
        created_at: { kind: 'datetime' },
      },
    },
    {
      resource: 'orders',
      model: 'shop.order',
      cursor: 'updated_at_id',
      sealedFields: [],
      fields: {
        widget: { kind: 'integer', references: 'widgets' },
        quantity: { kind: 'integer' },
        note: { kind: 'string', text: 'sentence', nullable: true },
        updated_at: { kind: 'datetime' },
      },
    },
  ];
  const after: FixtureResource[] = [
    {
      ...before[0]!,
      // weight widens to a number (an exact decimal, so no stored integer is rounded); colour is new.
      fields: {
        ...before[0]!.fields,
        weight: { kind: 'number' },
        colour: { kind: 'string', text: 'word' },
      },
    },
    before[1]!,
    {
      resource: 'invoices',
      model: 'shop.invoice',
      cursor: 'pk',
      sealedFields: [],
      fields: { order: { kind: 'integer', references: 'orders' }, total: { kind: 'decimal' } },
    },
  ];
  return { before, after };
}

describe.each(splitDialects)('warehouse lifecycle (%s)', (dialect) => {
  let server: FakeServer | undefined;
  let warehouse: TestWarehouse;
  let directory: ReturnType<typeof temporaryDirectory>;
  let configFile: string;

  const writeConfig = (yaml: string) =>
    writeFileSync(configFile, `http:\n  min_retry_delay_ms: 5\n${yaml}`);
  const sync = (args: string[] = [], env: Record<string, string> = {}) =>
    runCli(['--config', configFile, 'sync', ...args], {
      ...syncEnv(server!.url, warehouse.env, { OCS_PAGE_SIZE: '5' }),
      ...env,
    });
  const changes = () =>
    warehouse.query(
      `SELECT table_name, column_name, change, from_type, to_type, reason, from_checksum, to_checksum FROM "_ocs_schema_changes" ORDER BY id`,
    );

  beforeEach(async () => {
    directory = temporaryDirectory();
    configFile = join(directory.path, 'config.yaml');
    writeConfig('');
    warehouse = await createTestWarehouse(dialect);
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await warehouse.dispose();
    directory.remove();
  });

  /** Serve the `before` schema over a dataset that already follows `after` (new fields hidden). */
  async function startBeforeSchemaChange(): Promise<FakeDataset> {
    const { before, after } = schemas();
    const dataset = datasetFromFixture(after, { seed: 9, rowsPerResource: 12 });
    server = await startFakeServer({
      dataset,
      fixture: before,
      transformRow: (resource, row) => {
        if (resource !== 'widgets') return row;
        const { colour: _hidden, ...rest } = row;
        return { ...rest, weight: Math.round(Number(rest.weight)) };
      },
    });
    return dataset;
  }

  function switchToAfterSchema(): void {
    server!.options.transformRow = undefined;
    server!.setSchema({ fixture: schemas().after });
  }

  it('evolves: a new resource becomes a table, a new field a column, a widened type is migrated, nothing dropped', async () => {
    const dataset = await startBeforeSchemaChange();
    expect((await sync()).code).toBe(0);
    const checksumBefore = server!.manifest().schema_checksum;

    switchToAfterSchema();
    const result = await sync();
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Schema checksum changed since the last run/);
    expect(result.logs).toMatch(/export schema changed/);
    // Existing rows keep null in the new column until the server sends them again.
    const widgets = await warehouse.readTable('widgets');
    expect(widgets.every((row) => row.colour === null)).toBe(true);
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: ['orders', 'invoices'] });

    const recorded = await changes();
    const summary = recorded.map(
      (row) => `${row.change}:${row.table_name}:${row.column_name ?? ''}:${row.to_type ?? ''}`,
    );
    expect(summary).toEqual(
      expect.arrayContaining([
        'widen_column:widgets:weight:decimal',
        'add_column:widgets:colour:text',
        'create_table:invoices::',
      ]),
    );
    const widen = recorded.find((row) => row.change === 'widen_column');
    expect(widen?.from_checksum).toBe(checksumBefore);
    expect(widen?.to_checksum).toBe(server!.manifest().schema_checksum);

    // A full refresh brings the new column's values in.
    expect((await sync(['--full-refresh', 'widgets'])).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('stops on a schema change under on_schema_change=stop until --accept-schema-change', async () => {
    await startBeforeSchemaChange();
    writeConfig('on_schema_change: stop\n');
    expect((await sync()).code).toBe(0);
    switchToAfterSchema();

    const stopped = await sync();
    expect(stopped.code).toBe(3);
    expect(stopped.stderr).toMatch(/on_schema_change is "stop"/);
    expect(stopped.stderr).toMatch(/new table invoices/);
    expect(stopped.stderr).toMatch(/new column widgets\.colour text/);
    expect(stopped.stderr).toMatch(/column widgets\.weight widens integer -> decimal/);
    expect(stopped.stderr).toMatch(/--accept-schema-change/);
    expect((await changes()).filter((row) => row.change !== 'create_table')).toHaveLength(0);
    // Still stopped on the next run: nothing was accepted.
    expect((await sync()).code).toBe(3);

    const accepted = await sync(['--accept-schema-change']);
    expect(accepted.code).toBe(0);
    expect((await changes()).some((row) => row.table_name === 'invoices')).toBe(true);
    expect((await sync()).code).toBe(0);
  });

  it('widens a column when a value does not fit it, and reports it', async () => {
    const { before } = schemas();
    const dataset = datasetFromFixture(before, { seed: 4, rowsPerResource: 8 });
    server = await startFakeServer({ dataset, fixture: before });
    expect((await sync()).code).toBe(0);
    const [first] = dataset.ids('widgets');
    dataset.insert('widgets', [{ weight: 'heavy' }]);
    expect(first).toBeDefined();
    const result = await sync();
    expect(result.code).toBe(0);
    expect(result.logs).toMatch(/column widgets\.weight widens integer -> json/);
    const widgets = await warehouse.readTable('widgets');
    expect(widgets.at(-1)?.weight).toBe('heavy');
    expect(widgets[0]?.weight).toBe(dataset.rows('widgets')[0]?.weight);
    const widened = (await changes()).find((row) => row.change === 'widen_column');
    expect(widened?.reason).toBe('value');
  });

  it('widens to an exact decimal when a fraction reaches an integer column or a 64-bit integer a number column', async () => {
    const { after } = schemas();
    const dataset = datasetFromFixture(after, { seed: 5, rowsPerResource: 6 });
    server = await startFakeServer({ dataset, fixture: after });
    expect((await sync()).code).toBe(0);
    const big = 2n ** 60n + 1n;
    dataset.insert('widgets', [{ weight: big }]);
    dataset.insert('orders', [{ quantity: 2.5 }]);
    const result = await sync();
    expect(result.code).toBe(0);
    expect(result.logs).toMatch(/column widgets\.weight widens number -> decimal/);
    expect(result.logs).toMatch(/column orders\.quantity widens integer -> decimal/);
    expect((await warehouse.readTable('widgets')).at(-1)?.weight).toBe(big);
    expect((await warehouse.readTable('orders')).at(-1)?.quantity).toBe(2.5);
    await expectWarehouseEqualsSource(warehouse, dataset);
    if (dialect === 'postgres') {
      const types = await warehouse.query(
        `SELECT table_name, data_type FROM information_schema.columns
         WHERE table_schema = current_schema() AND column_name IN ('weight', 'quantity')
         ORDER BY table_name`,
      );
      // The tables and their live views.
      expect(types).toEqual([
        { table_name: 'orders', data_type: 'numeric' },
        { table_name: 'orders__live', data_type: 'numeric' },
        { table_name: 'widgets', data_type: 'numeric' },
        { table_name: 'widgets__live', data_type: 'numeric' },
      ]);
    }
  });

  it('keeps an impossible date by widening its column to text, and reports it', async () => {
    const { before } = schemas();
    const dataset = datasetFromFixture(before, { seed: 5, rowsPerResource: 4 });
    server = await startFakeServer({ dataset, fixture: before });
    expect((await sync()).code).toBe(0);
    dataset.insert('widgets', [{ created_at: '2026-02-30T10:00:00Z' }]);
    const result = await sync();
    expect(result.code).toBe(0);
    expect(result.logs).toMatch(/column widgets\.created_at widens datetime -> text/);
    const widgets = await warehouse.readTable('widgets');
    expect(String(widgets.at(-1)?.created_at)).toBe('2026-02-30T10:00:00Z');
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('lets one writer at a time: a second run waits, then exits 3 naming the holder', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 10, seed: 2 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    writeConfig('lock:\n  wait_seconds: 1\n');
    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let paused: (() => void) | undefined;
    const pausedNow = new Promise<void>((resolve) => (paused = resolve));
    server.options.onPageServed = async ({ resource }) => {
      if (resource === 'chat_messages') {
        paused!();
        await held;
      }
    };
    const first = sync();
    await pausedNow;
    server.options.onPageServed = undefined;
    const second = await sync();
    release!();
    expect(second.code).toBe(3);
    expect(second.stderr).toMatch(
      new RegExp(`Another ocs-sync \\(pid ${process.pid} on ${hostname()}, since \\d{4}-`),
    );
    expect((await first).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    // The lock is free again.
    expect((await sync()).code).toBe(0);
  });

  it('takes over a lock left by a killed process', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 5, seed: 2 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    expect((await sync()).code).toBe(0);
    // A holder that no longer exists on this host, with a heartbeat long gone.
    const deadPid = 2 ** 22 + 12345;
    const longAgo = '2020-01-01T00:00:00.000Z';
    await warehouse.query(`DELETE FROM "_ocs_lock"`);
    await warehouse.query(
      `INSERT INTO "_ocs_lock" (name, pid, host, since, heartbeat_at, owner_token) VALUES ('writer', ${deadPid}, '${hostname()}', '${longAgo}', '${longAgo}', 'dead')`,
    );
    writeConfig('lock:\n  wait_seconds: 2\n');
    const result = await sync();
    expect(result.code).toBe(0);
  });

  it('full refresh marks rows the server no longer has, catches pk edits, and undeletes rows that return', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 5 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    writeConfig('history: [tags]\n');
    expect((await sync()).code).toBe(0);

    const [gone, edited, kept] = dataset.ids('tags');
    const goneRow = { ...dataset.get('tags', gone!)! };
    dataset.remove('tags', [gone!]);
    dataset.edit('tags', [edited!], { name: 'renamed on the server' });
    // A cursor walk sees neither.
    expect((await sync()).code).toBe(0);
    expect(
      (await warehouse.readTable('tags')).find((row) => row.id === Number(edited))?.name,
    ).not.toBe('renamed on the server');

    const refresh = await sync(['--full-refresh', 'tags']);
    expect(refresh.code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: ['tags'] });
    const all = await warehouse.readTable('tags', { includeDeleted: true });
    expect(all.find((row) => row.id === Number(gone))).toBeDefined();
    const status = (
      JSON.parse((await runCli(['status', '--json'], warehouse.env)).stdout) as {
        resources: Array<Record<string, unknown>>;
      }
    ).resources;
    const tags = status.find((row) => row.resource === 'tags')!;
    expect(tags.rows_deleted).toBe(1);
    expect(tags.last_full_refresh_at).toMatch(/^\d{4}-/);

    // History: the edit is a second version; the deletion closed the row's version.
    const versions = await warehouse.query(
      `SELECT id, _valid_to FROM "tags__history" ORDER BY _version_id`,
    );
    expect(versions.filter((row) => Number(row.id) === Number(edited))).toHaveLength(2);
    const goneVersions = versions.filter((row) => Number(row.id) === Number(gone));
    expect(goneVersions).toHaveLength(1);
    expect(goneVersions[0]?._valid_to).not.toBeNull();
    expect(versions.filter((row) => Number(row.id) === Number(kept))).toHaveLength(1);

    // The row comes back: undeleted, and a new version opens.
    dataset.insert('tags', [goneRow]);
    expect((await sync(['--full-refresh', 'tags'])).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: ['tags'] });
    const after = await warehouse.query(
      `SELECT id, _valid_to FROM "tags__history" WHERE id = ${String(gone)} ORDER BY _version_id`,
    );
    expect(after).toHaveLength(2);
    expect(after[1]?._valid_to).toBeNull();
    // Unchanged reruns write no new version.
    const count = (await warehouse.query(`SELECT count(*) AS n FROM "tags__history"`))[0]?.n;
    expect((await sync(['--full-refresh', 'tags'])).code).toBe(0);
    const again = (await warehouse.query(`SELECT count(*) AS n FROM "tags__history"`))[0]?.n;
    expect(Number(again)).toBe(Number(count));
  });

  it('keeps history for resources whose names leave no room for __history (PostgreSQL cuts at 63)', async () => {
    // Two 60-character names that share their first 55: cut naively they would be one table.
    const stem = `audit_${'x'.repeat(49)}`;
    const names = [`${stem}_aaaa`, `${stem}_bbbb`];
    const fixture: FixtureResource[] = names.map((resource) => ({
      resource,
      model: `audit.${resource.slice(-4)}`,
      cursor: 'pk',
      sealedFields: [],
      fields: { name: { kind: 'string', text: 'word' } },
    }));
    const dataset = datasetFromFixture(fixture, { seed: 7, rowsPerResource: 3 });
    server = await startFakeServer({ dataset, fixture });
    writeConfig('history: true\n');
    expect((await sync()).code).toBe(0);
    for (const resource of names) {
      dataset.edit(resource, [dataset.ids(resource)[0]!], { name: 'edited' });
    }
    // The second run finds the history tables again (no "already exists"), and adds versions.
    expect((await sync(['--full-refresh'])).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    const historyTables = (
      await warehouse.query(
        dialect === 'sqlite'
          ? `SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%history' ORDER BY name`
          : `SELECT table_name AS name FROM information_schema.tables WHERE table_name LIKE '%history' ORDER BY table_name`,
      )
    )
      .map((row) => String(row.name))
      .filter((name) => name.startsWith('audit_'));
    expect(historyTables).toHaveLength(2);
    for (const table of historyTables) {
      expect(table.length).toBeLessThanOrEqual(63);
      expect(table).toMatch(new RegExp(`^${stem.slice(0, 45)}_[0-9a-f]{8}__history$`));
      const versions = await warehouse.query(`SELECT count(*) AS n FROM "${table}"`);
      expect(Number(versions[0]?.n)).toBe(4);
    }
    const status = (
      JSON.parse((await runCli(['status', '--json'], warehouse.env)).stdout) as {
        resources: Array<{ resource: string }>;
      }
    ).resources;
    expect(status.map((row) => row.resource)).toEqual(['team', ...names]);
  });

  it('shows a resource named like a history table, and refuses to keep history into it', async () => {
    const fixture: FixtureResource[] = ['notes', 'notes__history'].map((resource) => ({
      resource,
      model: `app.${resource.replace('__', '_')}`,
      cursor: 'pk',
      sealedFields: [],
      fields: { body: { kind: 'string', text: 'word' } },
    }));
    const dataset = datasetFromFixture(fixture, { seed: 3, rowsPerResource: 4 });
    server = await startFakeServer({ dataset, fixture });
    expect((await sync()).code).toBe(0);
    const status = (
      JSON.parse((await runCli(['status', '--json'], warehouse.env)).stdout) as {
        resources: Array<{ resource: string; rows: number }>;
      }
    ).resources;
    expect(status.map((row) => `${row.resource}:${row.rows}`)).toEqual([
      'team:1',
      'notes:4',
      'notes__history:4',
    ]);

    writeConfig('history: [notes]\n');
    dataset.edit('notes', [dataset.ids('notes')[0]!], { body: 'edited' });
    const refused = await sync(['--full-refresh']);
    expect(refused.code).toBe(3);
    expect(refused.stdout + refused.logs).toMatch(
      /Cannot keep the history of notes: notes__history is already a resource table/,
    );
    // The other resource's rows are untouched, and it still syncs.
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: ['notes__history'] });
  });

  it('an interrupted full refresh marks nothing deleted; deletes: remove removes', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 6 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    expect((await sync()).code).toBe(0);
    dataset.remove('users', dataset.ids('users').slice(-2));

    let served = 0;
    server.options.onPageServed = ({ resource }) => {
      if (resource === 'users' && ++served === 1) {
        server!.faults.failNext(
          50,
          { kind: 'status', status: 400, body: ['simulated failure'] },
          { resource: 'users' },
        );
      }
    };
    const failed = await sync(['--full-refresh', 'users']);
    expect(failed.code).toBe(3);
    server.options.onPageServed = undefined;
    server.faults.clear();
    expect(await warehouse.readTable('users')).toHaveLength(12);

    writeConfig('deletes: remove\n');
    expect((await sync(['--full-refresh', 'users'])).code).toBe(0);
    expect(await warehouse.readTable('users', { includeDeleted: true })).toHaveLength(10);
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: ['users'] });
  });

  it('stores rows with NUL characters and says how many values were altered', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 30, seed: 8, nulChars: true });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const result = await sync();
    expect(result.code).toBe(0);
    const messages = await warehouse.readTable('chat_messages');
    expect(messages).toHaveLength(30);
    if (dialect === 'postgres') {
      expect(result.stdout).toMatch(/note \w+: \d+ value\(s\) had NUL characters removed/);
      expect(JSON.stringify(messages)).not.toContain('\\u0000');
    } else {
      await expectWarehouseEqualsSource(warehouse, dataset);
    }
  });
});
