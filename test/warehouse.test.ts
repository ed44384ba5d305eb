/**
 * One warehouse suite, run against every dialect (kysely-style). SQLite always runs; PostgreSQL
 * runs when OCS_TEST_POSTGRES_URL is set, and FAILS in CI when it is not. OCS_TEST_DIALECTS
 * (comma list) narrows the dialects.
 */
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ColumnSpec, PageWrite, Row, Warehouse } from '../src/interfaces.js';
import { LockHeldError, UnsafeNameError, WarehouseError, describeError } from '../src/errors.js';
import { COPY_MIN_ROWS } from '../src/warehouse/postgres/copy-upsert.js';
import { markMissingAsDeleted } from '../src/warehouse/missing-rows.js';
import { SqliteConnection } from '../src/warehouse/sqlite/connection.js';
import { SqliteHandle } from '../src/warehouse/sqlite/handle.js';
import { SqliteHistoryWriter } from '../src/warehouse/sqlite/history.js';
import { sqliteMissingRows } from '../src/warehouse/sqlite/missing-rows.js';
import { dialectRules, openWarehouse } from '../src/warehouse/open.js';
import { planHistoryVersions } from '../src/warehouse/history.js';
import {
  advisoryLockKey,
  describePostgresUrl,
  postgresClientConfig,
} from '../src/warehouse/postgres/warehouse.js';
import { loadMigrations, pendingMigrations } from '../src/warehouse/migrations.js';
import { projectRoot } from '../src/package-info.js';
import {
  originalValuesOf,
  servedValue,
  servedValueHash,
  valueChangesInColumn,
} from '../src/warehouse/original-values.js';
import { canonicalJson, rowContentHash } from '../src/warehouse/canonical.js';
import { fromJsonText, toJsonText } from '../src/warehouse/values.js';

type DialectName = 'sqlite' | 'postgres';
type QueryRow = Record<string, unknown>;

interface WarehouseLoggerSpy {
  warn: ReturnType<typeof vi.fn>;
}

/** One fresh database for one test: open any number of warehouses on it, look inside with SQL. */
interface TestDatabase {
  open(options?: {
    lockStaleAfterSeconds?: number;
    logger?: WarehouseLoggerSpy;
  }): Promise<Warehouse>;
  /**
   * Raw SQL with `?` placeholders; integers come back as numbers (decimal strings past 2^53),
   * times as ISO text, so assertions read the same on every dialect.
   */
  query(sqlText: string, params?: unknown[]): Promise<QueryRow[]>;
  /** Makes the database itself reject inserting row `id` into `table` (a mid-page failure). */
  injectFailure(table: string, id: number): Promise<void>;
  /** SQLite: the side file whose lock is the writer lock. */
  lockFile?: string;
  dispose(): Promise<void>;
}

interface DialectHarness {
  name: DialectName;
  create(): Promise<TestDatabase>;
}

function normaliseValue(value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  if (value instanceof Date) return value.toISOString();
  return value;
}

function normaliseRows(rows: QueryRow[]): QueryRow[] {
  return rows.map((row) =>
    Object.fromEntries(Object.entries(row).map(([k, v]) => [k, normaliseValue(v)])),
  );
}

const sqliteHarness: DialectHarness = {
  name: 'sqlite',
  async create() {
    const directory = mkdtempSync(join(tmpdir(), 'ocs-warehouse-test-'));
    const path = join(directory, 'warehouse.db');
    const opened: Warehouse[] = [];
    let raw: Database.Database | undefined;
    const connection = () => {
      raw ??= new Database(path);
      raw.defaultSafeIntegers(true);
      raw.pragma('busy_timeout = 10000');
      return raw;
    };
    return {
      lockFile: `${path}-lock`,
      async open(options) {
        const warehouse = await openWarehouse({ url: path, ...options });
        opened.push(warehouse);
        return warehouse;
      },
      async query(sqlText, params = []) {
        const statement = connection().prepare(sqlText);
        if (statement.reader) return normaliseRows(statement.all(...params) as QueryRow[]);
        statement.run(...params);
        return [];
      },
      async injectFailure(table, id) {
        connection().exec(
          `CREATE TRIGGER ocs_test_fail BEFORE INSERT ON "${table}" WHEN NEW.id = ${id}
           BEGIN SELECT RAISE(ABORT, 'injected failure'); END`,
        );
      },
      async dispose() {
        for (const warehouse of opened) await warehouse.close();
        raw?.close();
        rmSync(directory, { recursive: true, force: true });
      },
    };
  },
};

const postgresHarness: DialectHarness = {
  name: 'postgres',
  async create() {
    const url = process.env.OCS_TEST_POSTGRES_URL!;
    const schema = `ocs_test_${randomBytes(6).toString('hex')}`;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`CREATE SCHEMA "${schema}"`);
    await client.query(`SET search_path TO "${schema}"`);
    // int8 arrives as text from pg: give it the same shape as the SQLite harness.
    client.setTypeParser(20, (text: string) => normaliseValue(BigInt(text)));
    const opened: Warehouse[] = [];
    return {
      async open(options) {
        const warehouse = await openWarehouse({ url, schema, ...options });
        opened.push(warehouse);
        return warehouse;
      },
      async query(sqlText, params = []) {
        let index = 0;
        const text = sqlText.replace(/\?/g, () => `$${++index}`);
        const result = await client.query(
          text,
          params.map((p) => (typeof p === 'bigint' ? p.toString() : p)),
        );
        return normaliseRows(result.rows as QueryRow[]);
      },
      async injectFailure(table, id) {
        await client.query(`CREATE FUNCTION ocs_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN RAISE EXCEPTION 'injected failure'; END $$`);
        await client.query(`CREATE TRIGGER ocs_test_fail BEFORE INSERT ON "${table}"
          FOR EACH ROW WHEN (NEW.id = ${id}) EXECUTE FUNCTION ocs_test_fail()`);
      },
      async dispose() {
        for (const warehouse of opened) await warehouse.close();
        await client.query(`DROP SCHEMA "${schema}" CASCADE`);
        await client.end();
      },
    };
  },
};

const requested = process.env.OCS_TEST_DIALECTS?.split(',')
  .map((name) => name.trim())
  .filter(Boolean);
const dialects = [sqliteHarness, postgresHarness].filter(
  (harness) => !requested || requested.includes(harness.name),
);

// --------------------------------------------------------------------------- helpers

const CHECKSUMS = { from: null, to: 'checksum-1' };

const MESSAGE_COLUMNS: ColumnSpec[] = [
  { name: 'content', type: 'text' },
  { name: 'is_active', type: 'boolean' },
  { name: 'created_at', type: 'datetime' },
  { name: 'score', type: 'number' },
  { name: 'participant_id', type: 'integer' },
  { name: 'metadata', type: 'json' },
];

async function createTable(
  warehouse: Warehouse,
  table: string,
  columns: ColumnSpec[],
): Promise<void> {
  await warehouse.applySchemaChanges(
    [{ kind: 'create_table', table, columns, reason: 'schema' }],
    CHECKSUMS,
  );
}

function page(overrides: Partial<PageWrite> & Pick<PageWrite, 'runId' | 'rows'>): PageWrite {
  return {
    resource: 'messages',
    columns: MESSAGE_COLUMNS,
    cursor: null,
    cursorKind: 'pk',
    history: false,
    ...overrides,
  };
}

function rowsWithIds(ids: number[], extra: Partial<Row> = {}): Row[] {
  return ids.map((id) => ({ id, content: `message ${id}`, is_active: true, ...extra }));
}

async function readAll(
  warehouse: Warehouse,
  table: string,
  column: string,
): Promise<Map<string, unknown>> {
  const values = new Map<string, unknown>();
  let after: string | null = null;
  for (;;) {
    const batch = await warehouse.tools.readColumn(table, column, after, 3);
    for (const entry of batch) values.set(entry.id, entry.value);
    if (batch.length < 3) return values;
    after = batch[batch.length - 1]!.id;
  }
}

async function count(db: TestDatabase, sqlText: string, params: unknown[] = []): Promise<number> {
  const rows = await db.query(sqlText, params);
  return Number(Object.values(rows[0]!)[0]);
}

/** A pid that certainly belonged to a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  const pid = child.pid!;
  await new Promise((resolve) => child.on('exit', resolve));
  return pid;
}

// --------------------------------------------------------------------------- the suite

for (const harness of dialects) {
  if (harness.name === 'postgres' && !process.env.OCS_TEST_POSTGRES_URL) {
    if (process.env.CI) {
      describe('warehouse (postgres)', () => {
        it('runs in CI', () => {
          throw new Error(
            'CI is set but OCS_TEST_POSTGRES_URL is not: the PostgreSQL warehouse would go untested. ' +
              'Set OCS_TEST_POSTGRES_URL=postgres://user:pass@host/db (or OCS_TEST_DIALECTS=sqlite on purpose).',
          );
        });
      });
    } else {
      console.warn('warehouse (postgres) skipped: set OCS_TEST_POSTGRES_URL to run it.');
      describe.skip('warehouse (postgres): skipped because OCS_TEST_POSTGRES_URL is not set', () => {
        it('needs a PostgreSQL server', () => undefined);
      });
    }
    continue;
  }

  describe(`warehouse (${harness.name})`, () => {
    let db: TestDatabase;
    let warehouse: Warehouse;

    beforeEach(async () => {
      db = await harness.create();
      warehouse = await db.open();
    });

    afterEach(async () => {
      await db.dispose();
    });

    describe('migrations', () => {
      it('are applied once and are idempotent across runs and instances', async () => {
        await warehouse.migrate();
        await warehouse.migrate();
        const second = await db.open();
        await second.migrate();
        const applied = await db.query(
          'SELECT version, name FROM _ocs_migrations ORDER BY version',
        );
        expect(applied).toEqual(
          loadMigrations(harness.name).map((migration) => ({
            version: migration.version,
            name: migration.name,
          })),
        );
        for (const table of [
          '_ocs_runs',
          '_ocs_resources',
          '_ocs_resource_runs',
          '_ocs_columns',
          '_ocs_schema_changes',
          '_ocs_state',
          '_ocs_lock',
        ]) {
          expect(await count(db, `SELECT count(*) AS n FROM ${table}`)).toBe(0);
        }
      });

      it('upgrades a warehouse from before the decimal type: its number columns become decimal, exact', async () => {
        // The state version 1 left: an exact numeric column labelled `number`.
        const columns: ColumnSpec[] = [{ name: 'amount', type: 'decimal' }];
        await createTable(warehouse, 'legacy', columns);
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        const rows: Row[] = [
          { id: 1, amount: 2n ** 62n + 1n },
          { id: 2, amount: 0.1 + 0.2 },
        ];
        await warehouse.writePage({
          runId,
          resource: 'legacy',
          columns,
          rows,
          cursor: null,
          cursorKind: 'pk',
          history: false,
        });
        await db.query("UPDATE _ocs_columns SET column_type = 'number'");
        await db.query('DELETE FROM _ocs_migrations WHERE version = 2');

        const upgraded = await db.open();
        expect(await upgraded.describeTable('legacy')).toEqual(columns);
        expect(await readAll(upgraded, 'legacy', 'amount')).toEqual(
          new Map(rows.map((row) => [String(row.id), row.amount])),
        );
        expect(await count(db, 'SELECT count(*) AS n FROM _ocs_migrations')).toBe(
          loadMigrations(harness.name).length,
        );
      });

      it('refuses a warehouse migrated by a newer ocs-sync', async () => {
        await db.query('INSERT INTO _ocs_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
          999,
          'from_the_future',
          new Date().toISOString(),
        ]);
        await expect(db.open()).rejects.toThrow(/migration 999 that this ocs-sync does not know/);
      });
    });

    describe('schema changes', () => {
      it('creates tables with id, data columns in order and our own columns', async () => {
        expect(await warehouse.describeTable('messages')).toBeUndefined();
        await createTable(warehouse, 'messages', MESSAGE_COLUMNS);
        expect(await warehouse.describeTable('messages')).toEqual(MESSAGE_COLUMNS);
        await createTable(warehouse, 'empty_table', []);
        expect(await warehouse.describeTable('empty_table')).toEqual([]);
        const changes = await db.query(
          'SELECT table_name, column_name, change, to_checksum, reason FROM _ocs_schema_changes ORDER BY id',
        );
        expect(changes).toEqual([
          {
            table_name: 'messages',
            column_name: null,
            change: 'create_table',
            to_checksum: 'checksum-1',
            reason: 'schema',
          },
          {
            table_name: 'empty_table',
            column_name: null,
            change: 'create_table',
            to_checksum: 'checksum-1',
            reason: 'schema',
          },
        ]);
        await expect(createTable(warehouse, 'messages', [])).rejects.toThrow(WarehouseError);
      });

      it('adds columns (old rows read null) and widens them keeping every value', async () => {
        const columns: ColumnSpec[] = [
          { name: 'count', type: 'integer' },
          { name: 'flag', type: 'boolean' },
          { name: 'label', type: 'text' },
          { name: 'day', type: 'date' },
          { name: 'seen_at', type: 'datetime' },
        ];
        await createTable(warehouse, 'things', columns);
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage({
          runId,
          resource: 'things',
          columns,
          rows: [
            {
              id: 1,
              count: 5,
              flag: true,
              label: 'say "hi"\n',
              day: '2026-01-02',
              seen_at: '2026-11-20T10:00:00.123456Z',
            },
            {
              id: 2,
              count: 9007199254740993n,
              flag: false,
              label: 'plain',
              day: null,
              seen_at: null,
            },
          ],
          cursor: null,
          cursorKind: null,
          history: true,
        });
        await warehouse.applySchemaChanges(
          [
            {
              kind: 'add_column',
              table: 'things',
              column: 'extra',
              toType: 'json',
              reason: 'rows',
            },
          ],
          { from: 'checksum-1', to: 'checksum-2' },
        );
        expect(await readAll(warehouse, 'things', 'extra')).toEqual(
          new Map([
            ['1', null],
            ['2', null],
          ]),
        );

        await warehouse.applySchemaChanges(
          [
            {
              kind: 'widen_column',
              table: 'things',
              column: 'count',
              fromType: 'integer',
              toType: 'decimal',
              reason: 'value',
            },
            {
              kind: 'widen_column',
              table: 'things',
              column: 'count',
              fromType: 'decimal',
              toType: 'json',
              reason: 'value',
            },
            {
              kind: 'widen_column',
              table: 'things',
              column: 'flag',
              fromType: 'boolean',
              toType: 'json',
              reason: 'value',
            },
            {
              kind: 'widen_column',
              table: 'things',
              column: 'label',
              fromType: 'text',
              toType: 'json',
              reason: 'value',
            },
            {
              kind: 'widen_column',
              table: 'things',
              column: 'day',
              fromType: 'date',
              toType: 'text',
              reason: 'value',
            },
            {
              kind: 'widen_column',
              table: 'things',
              column: 'seen_at',
              fromType: 'datetime',
              toType: 'json',
              reason: 'value',
            },
          ],
          { from: 'checksum-2', to: 'checksum-3' },
        );
        expect(await warehouse.describeTable('things')).toEqual([
          { name: 'count', type: 'json' },
          { name: 'flag', type: 'json' },
          { name: 'label', type: 'json' },
          { name: 'day', type: 'text' },
          { name: 'seen_at', type: 'json' },
          { name: 'extra', type: 'json' },
        ]);
        expect(await readAll(warehouse, 'things', 'count')).toEqual(
          new Map<string, unknown>([
            ['1', 5],
            ['2', 9007199254740993n],
          ]),
        );
        expect(await readAll(warehouse, 'things', 'flag')).toEqual(
          new Map([
            ['1', true],
            ['2', false],
          ]),
        );
        expect(await readAll(warehouse, 'things', 'label')).toEqual(
          new Map([
            ['1', 'say "hi"\n'],
            ['2', 'plain'],
          ]),
        );
        expect(await readAll(warehouse, 'things', 'day')).toEqual(
          new Map([
            ['1', '2026-01-02'],
            ['2', null],
          ]),
        );
        expect(await readAll(warehouse, 'things', 'seen_at')).toEqual(
          new Map([
            ['1', '2026-11-20T10:00:00.123456Z'],
            ['2', null],
          ]),
        );
        if (harness.name === 'sqlite') {
          // A string in a json column is stored as JSON text.
          expect(await db.query('SELECT label, count FROM things WHERE id = 1')).toEqual([
            { label: '"say \\"hi\\"\\n"', count: '5' },
          ]);
          expect(await db.query('SELECT count, flag FROM things__history ORDER BY id')).toEqual([
            { count: '5', flag: 'true' },
            { count: '9007199254740993', flag: 'false' },
          ]);
        }

        // Widening changes no content: the same rows again write no new version.
        const widened = await warehouse.describeTable('things');
        const again = await warehouse.writePage({
          runId,
          resource: 'things',
          columns: widened!,
          rows: [
            {
              id: 1,
              count: 5,
              flag: true,
              label: 'say "hi"\n',
              day: '2026-01-02',
              seen_at: '2026-11-20T10:00:00.123456Z',
            },
            {
              id: 2,
              count: 9007199254740993n,
              flag: false,
              label: 'plain',
              day: null,
              seen_at: null,
            },
          ],
          cursor: null,
          cursorKind: null,
          history: true,
        });
        expect(again.versionsWritten).toBe(0);

        const recorded = await db.query(
          `SELECT column_name, change, from_type, to_type, from_checksum, to_checksum, reason
           FROM _ocs_schema_changes WHERE change <> 'create_table' ORDER BY id`,
        );
        expect(recorded[0]).toEqual({
          column_name: 'extra',
          change: 'add_column',
          from_type: null,
          to_type: 'json',
          from_checksum: 'checksum-1',
          to_checksum: 'checksum-2',
          reason: 'rows',
        });
        expect(
          recorded.slice(1).map((row) => `${row.column_name}:${row.from_type}->${row.to_type}`),
        ).toEqual([
          'count:integer->decimal',
          'count:decimal->json',
          'flag:boolean->json',
          'label:text->json',
          'day:date->text',
          'seen_at:datetime->json',
        ]);
      });

      it('keeps doubles and 64-bit integers exact, and widens both to an exact decimal', async () => {
        const columns: ColumnSpec[] = [
          { name: 'ratio', type: 'number' },
          { name: 'total', type: 'integer' },
        ];
        await createTable(warehouse, 'measures', columns);
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        const rows: Row[] = [
          { id: 1, ratio: 0.1 + 0.2, total: 2n ** 62n + 1n },
          { id: 2, ratio: 1e300, total: -(2n ** 63n) },
          { id: 3, ratio: 5, total: 7 },
          { id: 4, ratio: -2.5e-300, total: null },
        ];
        await warehouse.writePage({
          runId,
          resource: 'measures',
          columns,
          rows,
          cursor: null,
          cursorKind: 'pk',
          history: false,
        });
        const expected = (column: 'ratio' | 'total') =>
          new Map(rows.map((row) => [String(row.id), row[column]]));
        expect(await readAll(warehouse, 'measures', 'ratio')).toEqual(expected('ratio'));
        expect(await readAll(warehouse, 'measures', 'total')).toEqual(expected('total'));

        await warehouse.applySchemaChanges(
          [
            {
              kind: 'widen_column',
              table: 'measures',
              column: 'ratio',
              fromType: 'number',
              toType: 'decimal',
              reason: 'value',
            },
            {
              kind: 'widen_column',
              table: 'measures',
              column: 'total',
              fromType: 'integer',
              toType: 'decimal',
              reason: 'value',
            },
          ],
          CHECKSUMS,
        );
        expect(await warehouse.describeTable('measures')).toEqual([
          { name: 'ratio', type: 'decimal' },
          { name: 'total', type: 'decimal' },
        ]);
        expect(await readAll(warehouse, 'measures', 'ratio')).toEqual(expected('ratio'));
        expect(await readAll(warehouse, 'measures', 'total')).toEqual(expected('total'));
        if (harness.name === 'postgres') {
          const types = await db.query(
            `SELECT data_type FROM information_schema.columns
             WHERE table_name = 'measures' AND column_name IN ('ratio', 'total')`,
          );
          expect(types.map((row) => row.data_type)).toEqual(['numeric', 'numeric']);
        }
      });

      it('refuses narrowing, duplicates, reserved and unsafe names, and changes nothing then', async () => {
        await createTable(warehouse, 'things', [{ name: 'label', type: 'text' }]);
        await expect(
          warehouse.applySchemaChanges(
            [
              {
                kind: 'add_column',
                table: 'things',
                column: 'other',
                toType: 'integer',
                reason: 'rows',
              },
              {
                kind: 'widen_column',
                table: 'things',
                column: 'label',
                fromType: 'text',
                toType: 'integer',
                reason: 'value',
              },
            ],
            CHECKSUMS,
          ),
        ).rejects.toThrow(/only widen/);
        // The whole batch rolled back: the first change is not there either.
        expect(await warehouse.describeTable('things')).toEqual([{ name: 'label', type: 'text' }]);
        await expect(
          warehouse.applySchemaChanges(
            [
              {
                kind: 'add_column',
                table: 'things',
                column: 'label',
                toType: 'text',
                reason: 'rows',
              },
            ],
            CHECKSUMS,
          ),
        ).rejects.toThrow(/already exists/);
        await expect(
          createTable(warehouse, 'bad', [{ name: '_synced_at', type: 'text' }]),
        ).rejects.toThrow(UnsafeNameError);
        await expect(createTable(warehouse, 'bad', [{ name: 'id', type: 'text' }])).rejects.toThrow(
          /reserved/,
        );
        await expect(createTable(warehouse, 'Robert"); DROP TABLE x; --', [])).rejects.toThrow(
          UnsafeNameError,
        );
        await expect(warehouse.describeTable('x"y')).rejects.toThrow(UnsafeNameError);
        expect(await count(db, 'SELECT count(*) AS n FROM _ocs_schema_changes')).toBe(1);
      });
    });

    describe('writePage', () => {
      beforeEach(async () => {
        await createTable(warehouse, 'messages', MESSAGE_COLUMNS);
      });

      it('writes pages of any length in order: a later duplicate id wins, within or across batches', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', 'checksum-1');
        // 41 rows: SQLite writes them 16 at a time, then the rest one by one; ids 7 and 8 come
        // again inside the same batch of 16, id 3 again in the next one, id 20 again in the rest.
        const rows: Row[] = Array.from({ length: 37 }, (_, index) => ({
          id: index + 1,
          content: `first ${index + 1}`,
        }));
        rows.splice(8, 0, { id: 7, content: 'second 7' }, { id: 8, content: 'second 8' });
        rows.splice(20, 0, { id: 3, content: 'second 3' });
        rows.push({ id: 20, content: 'second 20' });
        expect(rows).toHaveLength(41);
        const result = await warehouse.writePage(page({ runId, rows }));
        expect(result.rowsWritten).toBe(41);
        const stored = await readAll(warehouse, 'messages', 'content');
        expect(stored.size).toBe(37);
        for (let id = 1; id <= 37; id++) {
          const expected = [3, 7, 8, 20].includes(id) ? `second ${id}` : `first ${id}`;
          expect(stored.get(String(id)), `id ${id}`).toBe(expected);
        }
      });

      it('keeps history of long pages in order: a repeated id closes its version within or across batches', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        // The same 41 rows as above, with history: SQLite inserts versions 16 at a time, and a
        // repeated id must close the version still waiting in its batch, as row by row would.
        const rows: Row[] = Array.from({ length: 37 }, (_, index) => ({
          id: index + 1,
          content: `first ${index + 1}`,
        }));
        rows.splice(8, 0, { id: 7, content: 'second 7' }, { id: 8, content: 'second 8' });
        rows.splice(20, 0, { id: 3, content: 'second 3' });
        rows.push({ id: 20, content: 'second 20' }, { id: 20, content: 'second 20' });
        const result = await warehouse.writePage(page({ runId, rows, history: true }));
        // The last row repeats the one before it: no version of its own.
        expect(result.versionsWritten).toBe(41);
        const versions = await db.query(
          'SELECT id, content, _valid_to IS NULL AS open FROM messages__history ORDER BY _version_id',
        );
        expect(versions.map((v) => [Number(v.id), v.content, Number(v.open)])).toEqual(
          rows.slice(0, 41).map((row) => {
            const repeated = [3, 7, 8, 20].includes(Number(row.id));
            const open = !repeated || String(row.content).startsWith('second');
            return [Number(row.id), row.content, Number(open)];
          }),
        );
      });

      it('upserts idempotently and keeps every value exact', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', 'checksum-1');
        const rows: Row[] = [
          {
            id: 9007199254740993n,
            content: 'quotes \' " and\nnewlines\r\n\ttabs, emoji 🎉👩‍👩‍👧, backslash \\',
            is_active: true,
            created_at: '2026-11-20T10:00:00.123456Z',
            score: 0.1,
            participant_id: 9223372036854775807n,
            metadata: {
              nested: { big: 9007199254740993n, list: [1, 'two', null, false] },
              'key with "quotes"': 1,
            },
          },
          {
            id: 1,
            content: '',
            is_active: false,
            created_at: '2026-11-20T10:00:00Z',
            score: 3,
            participant_id: -5,
            metadata: [1, 2, 3],
          },
          { id: 2, metadata: 'abc' },
          { id: 3, metadata: 42 },
          { id: 4, metadata: true },
          { id: 5, metadata: null },
        ];
        const first = await warehouse.writePage(page({ runId, rows }));
        expect(first).toEqual({ rowsWritten: 6, valuesAltered: 0, versionsWritten: 0 });
        await warehouse.writePage(page({ runId, rows }));
        expect(await count(db, 'SELECT count(*) AS n FROM messages')).toBe(6);

        const expectColumn = async (column: string, expected: Array<[string, unknown]>) => {
          expect(await readAll(warehouse, 'messages', column)).toEqual(new Map(expected));
        };
        await expectColumn('content', [
          ['1', ''],
          ['2', null],
          ['3', null],
          ['4', null],
          ['5', null],
          ['9007199254740993', rows[0]!.content],
        ]);
        await expectColumn('is_active', [
          ['1', false],
          ['2', null],
          ['3', null],
          ['4', null],
          ['5', null],
          ['9007199254740993', true],
        ]);
        await expectColumn('created_at', [
          ['1', '2026-11-20T10:00:00Z'],
          ['2', null],
          ['3', null],
          ['4', null],
          ['5', null],
          ['9007199254740993', '2026-11-20T10:00:00.123456Z'],
        ]);
        await expectColumn('score', [
          ['1', 3],
          ['2', null],
          ['3', null],
          ['4', null],
          ['5', null],
          ['9007199254740993', 0.1],
        ]);
        await expectColumn('participant_id', [
          ['1', -5],
          ['2', null],
          ['3', null],
          ['4', null],
          ['5', null],
          ['9007199254740993', 9223372036854775807n],
        ]);
        await expectColumn('metadata', [
          ['1', [1, 2, 3]],
          ['2', 'abc'],
          ['3', 42],
          ['4', true],
          ['5', null],
          ['9007199254740993', rows[0]!.metadata],
        ]);
        const stored = await db.query(
          'SELECT id, _run_id, _deleted_at FROM messages WHERE id = ?',
          [9007199254740993n],
        );
        expect(stored).toEqual([{ id: '9007199254740993', _run_id: runId, _deleted_at: null }]);
        if (harness.name === 'sqlite') {
          expect(await db.query('SELECT metadata FROM messages WHERE id = 2')).toEqual([
            { metadata: '"abc"' },
          ]);
        }
      });

      it('writes a page of many rows (by COPY on PostgreSQL) exactly as pages of a few', async () => {
        await createTable(warehouse, 'few', MESSAGE_COLUMNS);
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        const texts = ['a\tb', 'line\nbreak\r\n', 'back\\slash \\N', '\\N', '', 'é😀', 'x\u0000y'];
        const rows: Row[] = Array.from({ length: 90 }, (_, index) => ({
          id: index % 7 === 3 ? 9007199254740993n + BigInt(index) : index + 1,
          content: index % 11 === 0 ? null : texts[index % texts.length],
          is_active: index % 3 === 0 ? null : index % 2 === 0,
          created_at:
            index % 5 === 0 ? null : `2026-11-20T10:00:0${index % 10}.12345${index % 10}Z`,
          score: [0.1, -0, 1e21, 3, null, 2.5e-8][index % 6],
          participant_id: index % 4 === 0 ? 9223372036854775807n : -index,
          metadata: [
            { nested: { big: 9007199254740993n, list: [1, 'two\t', null, false] } },
            [1, 'back\\slash', '\\N'],
            'text\nvalue',
            { nul: 'a\u0000b' },
            null,
          ][index % 5],
        }));
        // Ids repeated within the page: the last row of each is the one kept.
        rows.push({ ...rows[10]!, content: 'again' }, { ...rows[20]!, score: 7 });
        expect(rows.length - 2).toBeGreaterThanOrEqual(COPY_MIN_ROWS);
        const many = await warehouse.writePage(page({ runId, rows, history: true }));
        let altered = 0;
        for (let start = 0; start < rows.length; start += 7) {
          const written = await warehouse.writePage(
            page({ runId, resource: 'few', rows: rows.slice(start, start + 7), history: true }),
          );
          altered += written.valuesAltered;
        }
        expect(many.valuesAltered).toBe(altered);
        // PostgreSQL takes NUL out of text and JSON, and says so.
        expect(many.valuesAltered > 0).toBe(harness.name !== 'sqlite');
        for (const column of MESSAGE_COLUMNS) {
          const stored = await readAll(warehouse, 'messages', column.name);
          expect(stored.size, column.name).toBe(90);
          expect(stored, column.name).toEqual(await readAll(warehouse, 'few', column.name));
        }
        expect((await readAll(warehouse, 'messages', 'content')).get(String(rows[10]!.id))).toBe(
          'again',
        );
        expect(await count(db, 'SELECT count(*) AS n FROM messages__history')).toBe(
          await count(db, 'SELECT count(*) AS n FROM few__history'),
        );
      });

      it('overwrites a row completely: a field the row lacks becomes null', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage(
          page({ runId, rows: [{ id: 1, content: 'old', score: 1.5, metadata: { a: 1 } }] }),
        );
        await warehouse.writePage(page({ runId, rows: [{ id: 1, content: 'new' }] }));
        expect(await readAll(warehouse, 'messages', 'content')).toEqual(new Map([['1', 'new']]));
        expect(await readAll(warehouse, 'messages', 'score')).toEqual(new Map([['1', null]]));
        expect(await readAll(warehouse, 'messages', 'metadata')).toEqual(new Map([['1', null]]));
      });

      it('keeps NUL characters on SQLite and reports removing them on PostgreSQL', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        const result = await warehouse.writePage(
          page({ runId, rows: [{ id: 1, content: 'a\u0000b', metadata: { t: 'x\u0000' } }] }),
        );
        if (harness.name === 'sqlite') {
          expect(result.valuesAltered).toBe(0);
          expect(await readAll(warehouse, 'messages', 'content')).toEqual(
            new Map([['1', 'a\u0000b']]),
          );
          expect(await readAll(warehouse, 'messages', 'metadata')).toEqual(
            new Map([['1', { t: 'x\u0000' }]]),
          );
        } else {
          expect(result.valuesAltered).toBe(2);
          expect(await readAll(warehouse, 'messages', 'content')).toEqual(new Map([['1', 'ab']]));
        }
      });

      it('saves the cursor with the page and leaves it alone when the cursor is null', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage(
          page({ runId, rows: rowsWithIds([1, 2]), cursor: '2', cursorKind: 'pk' }),
        );
        expect(await warehouse.bookkeeping.getResourceState('messages')).toMatchObject({
          resource: 'messages',
          cursor: '2',
          cursorKind: 'pk',
          lastRunId: runId,
        });
        await warehouse.writePage(page({ runId, rows: rowsWithIds([3]), cursor: null }));
        expect((await warehouse.bookkeeping.getResourceState('messages'))?.cursor).toBe('2');
        // An empty page still moves the cursor.
        await warehouse.writePage(page({ runId, rows: [], cursor: '3' }));
        expect((await warehouse.bookkeeping.getResourceState('messages'))?.cursor).toBe('3');
        await warehouse.bookkeeping.resetCursor('messages');
        expect(await warehouse.bookkeeping.getResourceState('messages')).toMatchObject({
          cursor: null,
          cursorKind: null,
        });
        expect(await warehouse.bookkeeping.getResourceState('unknown')).toBeUndefined();
      });

      it('saves a cursor alone (the end of a full refresh): its kind, choice and run, no row touched', async () => {
        const first = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage(page({ runId: first, rows: rowsWithIds([1, 2]), cursor: '2' }));
        const runId = await warehouse.bookkeeping.startRun('full_refresh', null);
        await warehouse.saveCursor({
          runId,
          resource: 'messages',
          cursor: 'eyJpZCI6IDJ9',
          cursorKind: 'updated_at_id',
          selection: 'all',
        });
        expect(await warehouse.bookkeeping.getResourceState('messages')).toMatchObject({
          cursor: 'eyJpZCI6IDJ9',
          cursorKind: 'updated_at_id',
          cursorSelection: 'all',
          lastRunId: runId,
        });
        expect(await readAll(warehouse, 'messages', 'content')).toEqual(
          new Map([
            ['1', 'message 1'],
            ['2', 'message 2'],
          ]),
        );
        // A resource never written before gets its row of bookkeeping.
        await warehouse.saveCursor({ runId, resource: 'fresh', cursor: '9', cursorKind: 'pk' });
        expect(await warehouse.bookkeeping.getResourceState('fresh')).toMatchObject({
          cursor: '9',
          cursorKind: 'pk',
          cursorSelection: null,
        });
      });

      it('leaves neither rows nor cursor when the database rejects a row mid-page', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage(page({ runId, rows: rowsWithIds([1, 2, 3]), cursor: '3' }));
        await db.injectFailure('messages', 60);
        const ids = Array.from({ length: 100 }, (_, index) => index + 10);
        await expect(
          warehouse.writePage(
            page({ runId, rows: rowsWithIds(ids), cursor: '109', history: true }),
          ),
        ).rejects.toThrow(/injected failure/);
        expect(await count(db, 'SELECT count(*) AS n FROM messages')).toBe(3);
        expect((await warehouse.bookkeeping.getResourceState('messages'))?.cursor).toBe('3');
        // The warehouse stays usable.
        await warehouse.writePage(page({ runId, rows: rowsWithIds([4]), cursor: '4' }));
        expect((await warehouse.bookkeeping.getResourceState('messages'))?.cursor).toBe('4');
      });

      it('refuses a value that does not fit its column, and a bad id, storing nothing of the page', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        const rows = rowsWithIds([1, 2, 3]);
        rows[2] = { id: 3, participant_id: { not: 'an integer' } };
        const attempt = warehouse.writePage(page({ runId, rows, cursor: '3' }));
        await expect(attempt).rejects.toThrow(WarehouseError);
        await expect(attempt).rejects.toThrow(/messages\.participant_id in row id 3/);
        await expect(
          warehouse.writePage(page({ runId, rows: [{ id: 1 }, { id: 2n ** 64n }], cursor: '3' })),
        ).rejects.toThrow(/64-bit/);
        expect(await count(db, 'SELECT count(*) AS n FROM messages')).toBe(0);
        expect(await warehouse.bookkeeping.getResourceState('messages')).toBeUndefined();
        // The engine's column list must match the stored one.
        await expect(
          warehouse.writePage(
            page({ runId, rows: [{ id: 1 }], columns: [{ name: 'content', type: 'json' }] }),
          ),
        ).rejects.toThrow(/apply the schema changes first/);
        await expect(
          warehouse.writePage(page({ runId, resource: 'nowhere', rows: [{ id: 1 }] })),
        ).rejects.toThrow(/does not exist/);
      });

      it('keeps history: edits add a version, the same content does not, delete closes, return reopens', async () => {
        const run1 = await warehouse.bookkeeping.startRun('full_refresh', null);
        const first = await warehouse.writePage(
          page({ runId: run1, rows: rowsWithIds([1, 2, 3]), history: true }),
        );
        expect(first.versionsWritten).toBe(3);
        const same = await warehouse.writePage(
          page({ runId: run1, rows: rowsWithIds([1, 2, 3]), history: true }),
        );
        expect(same.versionsWritten).toBe(0);
        // Key order and null-versus-missing are not edits.
        const reordered = await warehouse.writePage(
          page({
            runId: run1,
            rows: [{ is_active: true, content: 'message 1', id: 1, metadata: null }],
            history: true,
          }),
        );
        expect(reordered.versionsWritten).toBe(0);

        const run2 = await warehouse.bookkeeping.startRun('full_refresh', null);
        const edited = rowsWithIds([1, 2]);
        edited[0] = { ...edited[0]!, content: 'edited' };
        edited[1] = { ...edited[1]!, content: 'edited 2' };
        // The same id twice in one page: two versions, the first closed at once.
        const twice = await warehouse.writePage(
          page({
            runId: run2,
            rows: [...edited, { ...edited[1]!, content: 'edited twice' }],
            history: true,
          }),
        );
        expect(twice.versionsWritten).toBe(3);
        const versions = await db.query(
          'SELECT id, content, _run_id, _valid_to IS NULL AS open FROM messages__history ORDER BY _version_id',
        );
        expect(versions.map((v) => [v.id, v.content, Number(v.open)])).toEqual([
          [1, 'message 1', 0],
          [2, 'message 2', 0],
          [3, 'message 3', 1],
          [1, 'edited', 1],
          [2, 'edited 2', 0],
          [2, 'edited twice', 1],
        ]);
        // One open version per id, always.
        expect(
          await count(db, 'SELECT count(*) AS n FROM messages__history WHERE _valid_to IS NULL'),
        ).toBe(3);

        expect(await warehouse.markMissingAsDeleted('messages', run2, 'mark', true)).toBe(1);
        expect(
          await db.query('SELECT id FROM messages__history WHERE _valid_to IS NULL ORDER BY id'),
        ).toEqual([{ id: 1 }, { id: 2 }]);

        const run3 = await warehouse.bookkeeping.startRun('incremental', null);
        const back = await warehouse.writePage(
          page({ runId: run3, rows: rowsWithIds([3]), history: true }),
        );
        expect(back.versionsWritten).toBe(1);
        expect(await db.query('SELECT _deleted_at FROM messages WHERE id = 3')).toEqual([
          { _deleted_at: null },
        ]);
        expect(await count(db, 'SELECT count(*) AS n FROM messages__history WHERE id = 3')).toBe(2);
        expect(
          await count(
            db,
            'SELECT count(*) AS n FROM messages__history WHERE id = 3 AND _valid_to IS NULL',
          ),
        ).toBe(1);
      });

      it('adds columns to an existing history table', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage(page({ runId, rows: rowsWithIds([1]), history: true }));
        await warehouse.applySchemaChanges(
          [
            {
              kind: 'add_column',
              table: 'messages',
              column: 'topic',
              toType: 'text',
              reason: 'rows',
            },
          ],
          CHECKSUMS,
        );
        const columns = [...MESSAGE_COLUMNS, { name: 'topic', type: 'text' as const }];
        const result = await warehouse.writePage(
          page({
            runId,
            columns,
            rows: [{ ...rowsWithIds([1])[0]!, topic: 'news' }],
            history: true,
          }),
        );
        expect(result.versionsWritten).toBe(1);
        expect(
          await db.query('SELECT topic FROM messages__history WHERE _valid_to IS NULL'),
        ).toEqual([{ topic: 'news' }]);
      });
    });

    describe('markMissingAsDeleted', () => {
      beforeEach(async () => {
        await createTable(warehouse, 'messages', MESSAGE_COLUMNS);
      });

      it('marks rows a complete full refresh did not see, once', async () => {
        const run1 = await warehouse.bookkeeping.startRun('full_refresh', null);
        await warehouse.writePage(page({ runId: run1, rows: rowsWithIds([1, 2, 3, 4, 5]) }));
        const run2 = await warehouse.bookkeeping.startRun('full_refresh', null);
        await warehouse.writePage(page({ runId: run2, rows: rowsWithIds([1, 3, 5]) }));
        expect(await warehouse.markMissingAsDeleted('messages', run2, 'mark', false)).toBe(2);
        expect(await warehouse.markMissingAsDeleted('messages', run2, 'mark', false)).toBe(0);
        expect(
          await db.query('SELECT id FROM messages WHERE _deleted_at IS NOT NULL ORDER BY id'),
        ).toEqual([{ id: 2 }, { id: 4 }]);
        const status = (await warehouse.status()).find((entry) => entry.resource === 'messages');
        expect(status).toMatchObject({ rows: 3, rowsDeleted: 2 });
        expect(await warehouse.markMissingAsDeleted('never_created', run2, 'mark', false)).toBe(0);
      });

      it('removes them in remove mode', async () => {
        const run1 = await warehouse.bookkeeping.startRun('full_refresh', null);
        await warehouse.writePage(
          page({ runId: run1, rows: rowsWithIds([1, 2, 3]), history: true }),
        );
        const run2 = await warehouse.bookkeeping.startRun('full_refresh', null);
        await warehouse.writePage(page({ runId: run2, rows: rowsWithIds([2]), history: true }));
        expect(await warehouse.markMissingAsDeleted('messages', run2, 'remove', true)).toBe(2);
        expect(await db.query('SELECT id FROM messages ORDER BY id')).toEqual([{ id: 2 }]);
        expect(await db.query('SELECT id FROM messages__history WHERE _valid_to IS NULL')).toEqual([
          { id: 2 },
        ]);
        expect(await count(db, 'SELECT count(*) AS n FROM messages__history')).toBe(3);
      });
    });

    describe('bookkeeping', () => {
      it('records runs, state and resource outcomes', async () => {
        const runId = await warehouse.bookkeeping.startRun('full_refresh', 'abc');
        await warehouse.bookkeeping.finishRun(runId, {
          status: 'partial',
          rows: 10,
          pages: 2,
          requests: 3,
          error: 'one failed',
        });
        expect(
          await db.query(
            'SELECT kind, status, schema_checksum, rows, pages, requests, error FROM _ocs_runs',
          ),
        ).toEqual([
          {
            kind: 'full_refresh',
            status: 'partial',
            schema_checksum: 'abc',
            rows: 10,
            pages: 2,
            requests: 3,
            error: 'one failed',
          },
        ]);
        await expect(
          warehouse.bookkeeping.finishRun(runId + 100, {
            status: 'ok',
            rows: 0,
            pages: 0,
            requests: 0,
          }),
        ).rejects.toThrow(WarehouseError);

        expect(await warehouse.bookkeeping.getState('last_schema_checksum')).toBeUndefined();
        await warehouse.bookkeeping.setState('last_schema_checksum', 'one');
        await warehouse.bookkeeping.setState('last_schema_checksum', 'two');
        expect(await warehouse.bookkeeping.getState('last_schema_checksum')).toBe('two');

        await warehouse.bookkeeping.recordResourceOutcome({
          runId,
          resource: 'messages',
          status: 'failed',
          rows: 0,
          pages: 0,
          durationMs: 12,
          error: 'HTTP 500',
        });
        let state = await warehouse.bookkeeping.getResourceState('messages');
        expect(state).toMatchObject({
          lastError: 'HTTP 500',
          lastSuccessAt: null,
          lastFullRefreshAt: null,
        });
        expect(state?.lastErrorAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);

        await warehouse.bookkeeping.recordResourceOutcome({
          runId,
          resource: 'messages',
          status: 'ok',
          rows: 5,
          pages: 1,
          durationMs: 7.6,
        });
        state = await warehouse.bookkeeping.getResourceState('messages');
        expect(state).toMatchObject({ lastError: null });
        expect(state?.lastSuccessAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
        expect(state?.lastFullRefreshAt).toBe(state?.lastSuccessAt);

        const incremental = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.bookkeeping.recordResourceOutcome({
          runId: incremental,
          resource: 'other',
          status: 'ok',
          rows: 1,
          pages: 1,
          durationMs: 1,
        });
        expect(
          (await warehouse.bookkeeping.getResourceState('other'))?.lastFullRefreshAt,
        ).toBeNull();
        await warehouse.bookkeeping.recordResourceOutcome({
          runId: incremental,
          resource: 'other',
          status: 'skipped',
          rows: 0,
          pages: 0,
          durationMs: 0,
        });
        expect((await warehouse.bookkeeping.getResourceState('other'))?.lastError).toBe('skipped');

        expect(
          await db.query(
            'SELECT run_id, resource, status, rows, pages, duration_ms, error FROM _ocs_resource_runs ORDER BY id',
          ),
        ).toEqual([
          {
            run_id: runId,
            resource: 'messages',
            status: 'failed',
            rows: 0,
            pages: 0,
            duration_ms: 12,
            error: 'HTTP 500',
          },
          {
            run_id: runId,
            resource: 'messages',
            status: 'ok',
            rows: 5,
            pages: 1,
            duration_ms: 8,
            error: null,
          },
          {
            run_id: incremental,
            resource: 'other',
            status: 'ok',
            rows: 1,
            pages: 1,
            duration_ms: 1,
            error: null,
          },
          {
            run_id: incremental,
            resource: 'other',
            status: 'skipped',
            rows: 0,
            pages: 0,
            duration_ms: 0,
            error: 'skipped',
          },
        ]);
      });

      it('reports status per resource and per table, newest updated_at first by time', async () => {
        const columns: ColumnSpec[] = [{ name: 'updated_at', type: 'datetime' }];
        await createTable(warehouse, 'sessions', columns);
        await createTable(warehouse, 'team', [{ name: 'name', type: 'text' }]);
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage({
          runId,
          resource: 'sessions',
          columns,
          rows: [
            { id: 1, updated_at: '2026-11-20T10:00:00Z' },
            { id: 2, updated_at: '2026-11-20T10:00:00.500000Z' },
            { id: 3, updated_at: '2026-11-19T23:59:59.999999Z' },
          ],
          cursor: 'c',
          cursorKind: 'updated_at_id',
          history: true,
        });
        await warehouse.writePage({
          runId,
          resource: 'team',
          columns: [{ name: 'name', type: 'text' }],
          rows: [{ id: 7, name: 'Team' }],
          cursor: null,
          cursorKind: null,
          history: false,
        });
        await warehouse.bookkeeping.recordResourceOutcome({
          runId,
          resource: 'not_created',
          status: 'failed',
          rows: 0,
          pages: 0,
          durationMs: 1,
          error: 'HTTP 404',
        });

        const status = await warehouse.status();
        expect(status.map((entry) => entry.resource)).toEqual(['not_created', 'sessions', 'team']);
        expect(status[0]).toMatchObject({
          rows: 0,
          rowsDeleted: 0,
          newestUpdatedAt: null,
          lastError: 'HTTP 404',
        });
        expect(status[1]).toMatchObject({
          rows: 3,
          rowsDeleted: 0,
          cursor: 'c',
          cursorKind: 'updated_at_id',
          lastRunId: runId,
        });
        expect(Date.parse(status[1]!.newestUpdatedAt!)).toBe(
          Date.parse('2026-11-20T10:00:00.500Z'),
        );
        expect(status[2]).toMatchObject({ rows: 1, newestUpdatedAt: null, cursor: null });
      });

      it('counts over a hundred tables in a few statements, and reads a text updated_at by its time', async () => {
        const names = Array.from(
          { length: 105 },
          (_, index) => `t${String(index).padStart(3, '0')}`,
        );
        const textColumns: ColumnSpec[] = [{ name: 'updated_at', type: 'text' }];
        for (const name of names) await createTable(warehouse, name, textColumns);
        // The last table, past the first statement's hundred: one row deleted, times in two forms.
        const rows = [
          { id: 1, updated_at: '2026-11-20T10:00:00.500000Z' },
          { id: 2, updated_at: '2026-11-20 09:00:00+00:00' },
          { id: 3, updated_at: '2026-11-21T10:00:00Z' },
        ];
        const last = { resource: 't104', columns: textColumns };
        const run1 = await warehouse.bookkeeping.startRun('full_refresh', null);
        await warehouse.writePage(page({ ...last, runId: run1, rows }));
        const run2 = await warehouse.bookkeeping.startRun('full_refresh', null);
        await warehouse.writePage(page({ ...last, runId: run2, rows: rows.slice(0, 2) }));
        expect(await warehouse.markMissingAsDeleted('t104', run2, 'mark', false)).toBe(1);

        const status = await warehouse.status();
        expect(status.map((entry) => entry.resource)).toEqual(names);
        expect(status[0]).toMatchObject({ rows: 0, rowsDeleted: 0, newestUpdatedAt: null });
        expect(status[104]).toMatchObject({ rows: 2, rowsDeleted: 1 });
        // The deleted row counts too: the newest time the table holds.
        expect(Date.parse(status[104]!.newestUpdatedAt!)).toBe(Date.parse('2026-11-21T10:00:00Z'));
      });
    });

    describe('readColumn and updateColumn', () => {
      beforeEach(async () => {
        await createTable(warehouse, 'messages', MESSAGE_COLUMNS);
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        await warehouse.writePage(
          page({
            runId,
            rows: [
              { id: 1, metadata: 'sealed-1' },
              { id: 5, metadata: 'sealed-5' },
              { id: 9007199254740993n, metadata: 'sealed-big' },
            ],
          }),
        );
      });

      it('pages by id and decodes values', async () => {
        expect(await warehouse.tools.readColumn('messages', 'metadata', null, 2)).toEqual([
          { id: '1', value: 'sealed-1' },
          { id: '5', value: 'sealed-5' },
        ]);
        expect(await warehouse.tools.readColumn('messages', 'metadata', '5', 2)).toEqual([
          { id: '9007199254740993', value: 'sealed-big' },
        ]);
        expect(
          await warehouse.tools.readColumn('messages', 'metadata', '9007199254740993', 2),
        ).toEqual([]);
        await expect(warehouse.tools.readColumn('messages', 'nope', null, 2)).rejects.toThrow(
          /no column nope/,
        );
        await expect(warehouse.tools.readColumn('messages', 'metadata', 'abc', 2)).rejects.toThrow(
          /not a decimal integer/,
        );
        await expect(warehouse.tools.readColumn('messages', 'metadata', null, 0)).rejects.toThrow(
          /positive integer/,
        );
      });

      it('updates values in one transaction, encoded per type', async () => {
        await warehouse.tools.updateColumn('messages', 'metadata', [
          { id: '1', value: { opened: true, n: 9007199254740993n } },
          { id: '9007199254740993', value: null },
        ]);
        expect(await readAll(warehouse, 'messages', 'metadata')).toEqual(
          new Map<string, unknown>([
            ['1', { opened: true, n: 9007199254740993n }],
            ['5', 'sealed-5'],
            ['9007199254740993', null],
          ]),
        );
        await expect(
          warehouse.tools.updateColumn('messages', 'is_active', [
            { id: '5', value: true },
            { id: '1', value: 'not a boolean' },
          ]),
        ).rejects.toThrow(WarehouseError);
        expect(await readAll(warehouse, 'messages', 'is_active')).toEqual(
          new Map([
            ['1', null],
            ['5', null],
            ['9007199254740993', null],
          ]),
        );
      });
    });

    describe('writer lock', () => {
      it('makes a second writer wait, then name the holder', async () => {
        const other = await db.open();
        const lock = await warehouse.acquireLock(0);
        const refused = other.acquireLock(300);
        await expect(refused).rejects.toThrow(LockHeldError);
        await expect(refused).rejects.toThrow(new RegExp(`pid ${process.pid} on ${hostname()}`));
        await expect(warehouse.acquireLock(0)).rejects.toThrow(/already holds/);

        // A waiting writer gets the lock as soon as the holder lets go.
        const waiting = other.acquireLock(60_000);
        await lock.release();
        await lock.release();
        const second = await waiting;
        await expect(warehouse.acquireLock(0)).rejects.toThrow(LockHeldError);
        await second.release();
        const again = await warehouse.acquireLock(0);
        await again.release();
        expect(await count(db, 'SELECT count(*) AS n FROM _ocs_lock')).toBe(0);
      });

      it('takes over the record of a process that no longer exists', async () => {
        const pid = await deadPid();
        const now = new Date().toISOString();
        await db.query(
          'INSERT INTO _ocs_lock (name, pid, host, since, heartbeat_at, owner_token) VALUES (?, ?, ?, ?, ?, ?)',
          ['writer', pid, hostname(), now, now, 'dead'],
        );
        const logger = { warn: vi.fn() };
        const other = await db.open({ logger });
        const lock = await other.acquireLock(0);
        expect(logger.warn).toHaveBeenCalledWith(
          expect.objectContaining({ holder: expect.objectContaining({ pid }) }),
          expect.stringMatching(/ended without releasing it/),
        );
        expect(await db.query('SELECT pid FROM _ocs_lock')).toEqual([{ pid: process.pid }]);
        await lock.release();
      });

      it('judges only the lock itself: a fresh record of this very pid and host, or of another host, is taken over', async () => {
        // What a container restarted after kill -9 finds: its own pid (1) and host name, a fresh heartbeat.
        const fresh = new Date().toISOString();
        for (const [pid, host] of [
          [process.pid, hostname()],
          [4242, 'some-other-host'],
        ] as const) {
          await db.query('DELETE FROM _ocs_lock');
          await db.query(
            'INSERT INTO _ocs_lock (name, pid, host, since, heartbeat_at, owner_token) VALUES (?, ?, ?, ?, ?, ?)',
            ['writer', pid, host, fresh, fresh, 'dead'],
          );
          const logger = { warn: vi.fn() };
          const other = await db.open({ logger });
          const lock = await other.acquireLock(0);
          expect(logger.warn).toHaveBeenCalledOnce();
          await lock.release();
          await other.close();
        }
      });

      it('closes the runs a dead holder left running as interrupted, ending at its last heartbeat', async () => {
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        const beat = new Date(Date.now() + 1000).toISOString();
        await db.query(
          'INSERT INTO _ocs_lock (name, pid, host, since, heartbeat_at, owner_token) VALUES (?, ?, ?, ?, ?, ?)',
          ['writer', 4242, 'some-other-host', beat, beat, 'dead'],
        );
        const logger = { warn: vi.fn() };
        const other = await db.open({ logger });
        const lock = await other.acquireLock(0);
        expect(logger.warn).toHaveBeenCalledWith(
          expect.objectContaining({ runs: [runId] }),
          expect.stringMatching(/^Closed run \d+ as interrupted/),
        );
        const [run] = await db.query('SELECT status, finished_at, error FROM _ocs_runs');
        expect(run?.status).toBe('interrupted');
        expect(Date.parse(String(run?.finished_at))).toBe(Date.parse(beat));
        expect(String(run?.error)).toMatch(/^Closed by the next start \(pid \d+ on /);
        // Any run still running when the lock is taken is closed: its process let go without finishing it.
        const own = await other.bookkeeping.startRun('incremental', null);
        await lock.release();
        const again = await other.acquireLock(0);
        await again.release();
        expect(
          (await db.query('SELECT status FROM _ocs_runs WHERE id = ?', [own]))[0]?.status,
        ).toBe('interrupted');
      });

      it('stops waiting for the lock as soon as the signal aborts', async () => {
        const lock = await warehouse.acquireLock(0);
        const other = await db.open();
        const controller = new AbortController();
        const waiting = other.acquireLock(600_000, controller.signal);
        controller.abort();
        await expect(waiting).rejects.toThrow(/Stopped while waiting for the writer lock/);
        await lock.release();
        const taken = await other.acquireLock(0);
        await taken.release();
      });

      it('keeps the heartbeat fresh and stops writing when the lock was taken away', async () => {
        const logger = { warn: vi.fn() };
        const holder = await db.open({ lockStaleAfterSeconds: 4, logger });
        await createTable(holder, 'messages', MESSAGE_COLUMNS);
        await holder.acquireLock(0);
        const old = new Date(Date.now() - 60_000).toISOString();
        await db.query('UPDATE _ocs_lock SET heartbeat_at = ?', [old]);
        await vi.waitFor(
          async () => {
            const [row] = await db.query('SELECT heartbeat_at FROM _ocs_lock');
            expect(row?.heartbeat_at).not.toBe(old);
          },
          { timeout: 20_000, interval: 100 },
        );
        // SQLite: the side file is replaced (a second writer would lock the new one);
        // PostgreSQL: the record is removed.
        if (db.lockFile) {
          rmSync(db.lockFile);
          writeFileSync(db.lockFile, '');
        } else {
          await db.query('DELETE FROM _ocs_lock');
        }
        await vi.waitFor(
          () =>
            expect(logger.warn).toHaveBeenCalledWith(
              expect.anything(),
              expect.stringMatching(/stopping writes/),
            ),
          {
            timeout: 20_000,
            interval: 100,
          },
        );
        const runId = await holder.bookkeeping.startRun('incremental', null);
        await expect(holder.writePage(page({ runId, rows: rowsWithIds([1]) }))).rejects.toThrow(
          /lost the warehouse lock/,
        );
        // Nor does the sync's page thread get a sink, nor a walk hand over another page.
        expect(() => holder.pageSinkSetup()).toThrow(/lost the warehouse lock/);
        expect(() => holder.assertLockHeld()).toThrow(/lost the warehouse lock/);
      });

      it('releases the lock on close', async () => {
        const first = await db.open();
        await first.acquireLock(0);
        await first.close();
        await first.close();
        const lock = await warehouse.acquireLock(0);
        await lock.release();
        await expect(first.status()).rejects.toThrow(/closed/);
      });
    });
  });
}

// --------------------------------------------------------------------------- dialect-free parts

describe('openWarehouse (SQLite specifics)', () => {
  let directory: string;
  beforeEach(() => {
    directory = mkdtempSync(join(tmpdir(), 'ocs-open-test-'));
  });
  afterEach(() => {
    rmSync(directory, { recursive: true, force: true });
  });

  it('rolls the marking of missing rows back whole when a step of it fails', async () => {
    const connection = new SqliteConnection(':memory:', 'sqlite::memory:', 1000);
    try {
      const { db } = connection;
      db.exec(
        'CREATE TABLE t ("id" INTEGER PRIMARY KEY, "_run_id" INTEGER, "_deleted_at" TEXT);' +
          'CREATE TABLE t__history ("id" INTEGER, "_valid_to" TEXT);' +
          'INSERT INTO t ("id", "_run_id") VALUES (1, 1), (2, 1);',
      );
      // Closing the versions writes, then fails: nothing of the marking may stay.
      const history = {
        close: () => {
          db.exec(`UPDATE t__history SET "_valid_to" = 'now'`);
          db.exec(`UPDATE t SET "_deleted_at" = 'half-done'`);
          throw new Error('the disk is full');
        },
      } as unknown as SqliteHistoryWriter;
      await expect(
        markMissingAsDeleted(sqliteMissingRows(connection, history), 't', {
          runId: 2,
          mode: 'mark',
          history: true,
          audit: false,
        }),
      ).rejects.toThrow('the disk is full');
      expect(db.inTransaction).toBe(false);
      expect(db.prepare('SELECT count(*) FROM t WHERE "_deleted_at" IS NULL').pluck().get()).toBe(
        2,
      );
      // And the connection marks them once the step works.
      const working = new SqliteHistoryWriter(db);
      await expect(
        markMissingAsDeleted(sqliteMissingRows(connection, working), 't', {
          runId: 2,
          mode: 'mark',
          history: false,
          audit: false,
        }),
      ).resolves.toBe(2);
    } finally {
      await connection.close();
    }
  });

  it('locks a private side file, and names it with the fix when it cannot be used', async () => {
    const path = join(directory, 'ocs.db');
    const warehouse = await openWarehouse({ url: path });
    try {
      const lock = await warehouse.acquireLock(0);
      expect(statSync(`${path}-lock`).mode & 0o777).toBe(0o600);
      expect(statSync(`${path}-lock`).size).toBe(0);
      await lock.release();
      writeFileSync(`${path}-lock`, 'not the lock file. '.repeat(10));
      const error = await warehouse.acquireLock(0).catch((caught: unknown) => caught);
      expect(describeError(error)).toMatch(
        new RegExp(
          `The writer lock file ${path}-lock of sqlite:${path} cannot be used: file is not a database\\n  hint: It is not the \\(empty\\) file ocs-sync locks`,
        ),
      );
    } finally {
      await warehouse.close();
    }
  });

  it('names a parent folder that does not exist instead of creating it (a typo), and sets WAL', async () => {
    const missing = join(directory, 'a', 'b', 'ocs.db');
    await expect(openWarehouse({ url: `sqlite:${missing}` })).rejects.toThrow(
      `The folder ${join(directory, 'a', 'b')} of the SQLite warehouse ${missing} does not exist.`,
    );
    expect(existsSync(join(directory, 'a'))).toBe(false);

    const path = join(directory, 'ocs.db');
    const warehouse = await openWarehouse({ url: `sqlite:${path}` });
    expect(warehouse.dialect).toBe('sqlite');
    expect(warehouse.description).toBe(`sqlite:${path}`);
    await warehouse.close();
    expect(existsSync(path)).toBe(true);
    const raw = new Database(path, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    raw.close();
  });

  it('tells whether the schema changed since it last looked, by this connection or another', () => {
    const path = join(directory, 'schema.db');
    const handle = new SqliteHandle(path, 20, { sql: 'SELECT 1', parameters: [] });
    const other = new Database(path);
    try {
      expect(handle.schemaChanged()).toBe(true);
      expect(handle.schemaChanged()).toBe(false);
      handle.db.prepare('SELECT 1').get();
      expect(handle.schemaChanged()).toBe(false);
      other.exec('CREATE TABLE t (id INTEGER)');
      expect(handle.schemaChanged()).toBe(true);
      expect(handle.schemaChanged()).toBe(false);
      handle.db.exec('ALTER TABLE t ADD COLUMN name TEXT');
      expect(handle.schemaChanged()).toBe(true);
      other.exec('INSERT INTO t (id) VALUES (1)');
      expect(handle.schemaChanged()).toBe(false);
    } finally {
      other.close();
      handle.db.close();
    }
  });

  it('keeps its prepared statements over refresh() until some connection changes the schema', async () => {
    const path = join(directory, 'kept.db');
    const warehouse = await openWarehouse({ url: `sqlite:${path}` });
    const prepare = vi.spyOn(Database.prototype, 'prepare');
    try {
      const preparedBy = async (work: () => Promise<unknown>): Promise<number> => {
        prepare.mockClear();
        await work();
        return prepare.mock.calls.length;
      };
      const startRun = () => warehouse.bookkeeping.startRun('incremental', null);
      // The first refresh() has nothing to compare with: it lets them go.
      await startRun();
      await warehouse.refresh();
      expect(await preparedBy(startRun)).toBeGreaterThan(0);
      await warehouse.refresh();
      expect(await preparedBy(startRun)).toBe(0);
      const other = new Database(path);
      other.exec('CREATE TABLE elsewhere (id INTEGER)');
      other.close();
      await warehouse.refresh();
      expect(await preparedBy(startRun)).toBeGreaterThan(0);
    } finally {
      prepare.mockRestore();
      await warehouse.close();
    }
  });

  it('gives each of its connections a 4 MB page cache, not the 16 MB a sync would fill', () => {
    const path = join(directory, 'cache.db');
    const handle = new SqliteHandle(path, 20, { sql: 'SELECT 1', parameters: [] });
    try {
      expect(handle.db.pragma('cache_size', { simple: true })).toBe(-4000);
    } finally {
      handle.db.close();
    }
  });

  it("checkpoints an audited warehouse's WAL every 40 MB, and any other's at SQLite's 1000 pages", async () => {
    const walHighWater = async (audited: boolean): Promise<number> => {
      const path = join(directory, audited ? 'audited.db' : 'plain.db');
      const warehouse = await openWarehouse({ url: `sqlite:${path}` });
      try {
        if (audited) await warehouse.audit.enable();
        await createTable(warehouse, 'messages', MESSAGE_COLUMNS);
        const runId = await warehouse.bookkeeping.startRun('incremental', null);
        // About 12 MB of rows in 24 commits: past 1000 pages (4 MB), short of 40 MB.
        const content = 'x'.repeat(5000);
        for (let index = 0; index < 24; index += 1) {
          const ids = Array.from({ length: 100 }, (_, row) => index * 100 + row + 1);
          await warehouse.writePage(page({ runId, rows: rowsWithIds(ids, { content }) }));
        }
        // A checkpoint rewinds the WAL but leaves the file at its largest.
        return statSync(`${path}-wal`).size / 2 ** 20;
      } finally {
        await warehouse.close();
      }
    };
    expect(await walHighWater(false)).toBeLessThan(6);
    // The rows and their versions (audit keeps history), all still in the WAL.
    expect(await walHighWater(true)).toBeGreaterThan(20);
  });

  it('works in memory', async () => {
    const warehouse = await openWarehouse({ url: ':memory:' });
    expect(await warehouse.describeTable('anything')).toBeUndefined();
    await warehouse.close();
  });

  it('refuses a file that is not SQLite, leaving it as it was', async () => {
    const path = join(directory, 'not-a-db.db');
    writeFileSync(path, 'hello, this is not a database file at all, really not. '.repeat(20));
    await expect(openWarehouse({ url: path })).rejects.toThrow(WarehouseError);
  });

  it('fails to open an unreachable PostgreSQL with a WarehouseError that hides the password', async () => {
    const attempt = openWarehouse({ url: 'postgres://user:hunter2secret@127.0.0.1:1/db' });
    await expect(attempt).rejects.toThrow(WarehouseError);
    await expect(attempt).rejects.not.toThrow(/hunter2secret/);
  });
});

describe('migration files', () => {
  it('exist for both dialects with the same versions and the same tables', () => {
    const sqlite = loadMigrations('sqlite');
    const postgres = loadMigrations('postgres');
    expect(sqlite.map((m) => m.file)).toEqual(postgres.map((m) => m.file));
    // A table SQLite rebuilds under a new name and renames back is not a new table.
    const tablesOf = (text: string) => {
      const renamed = new Set([...text.matchAll(/ALTER TABLE (\w+) RENAME TO/g)].map((m) => m[1]));
      return [...text.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+)/g)]
        .map((m) => m[1])
        .filter((table) => !renamed.has(table));
    };
    for (const [index, migration] of sqlite.entries()) {
      expect(tablesOf(migration.sql)).toEqual(tablesOf(postgres[index]!.sql));
    }
    expect(existsSync(join(projectRoot(), 'package.json'))).toBe(true);
  });

  it('plans only missing versions', () => {
    const all = [
      { version: 1, name: 'init', file: '001_init.sql', sql: '' },
      { version: 2, name: 'more', file: '002_more.sql', sql: '' },
    ];
    expect(pendingMigrations(all, new Set([1])).map((m) => m.version)).toEqual([2]);
    expect(pendingMigrations(all, new Set([1, 2]))).toEqual([]);
    expect(() => pendingMigrations(all, new Set([3]))).toThrow(/does not know/);
  });
});

describe('value encoding', () => {
  it('writes JSON text with bigints exact and reads it back', () => {
    expect(toJsonText({ a: 1, b: 'x' })).toBe('{"a":1,"b":"x"}');
    const big = { n: 9007199254740993n, list: [1n, 2.5] };
    expect(toJsonText(big)).toBe('{"n":9007199254740993,"list":[1,2.5]}');
    expect(fromJsonText(toJsonText(big))).toEqual({ n: 9007199254740993n, list: [1, 2.5] });
    expect(toJsonText('abc')).toBe('"abc"');
  });

  it('hashes content independent of key order, nulls and missing fields', () => {
    const columns: ColumnSpec[] = [
      { name: 'a', type: 'json' },
      { name: 'b', type: 'text' },
    ];
    expect(canonicalJson({ b: 1, a: { d: 2, c: [3] } })).toBe('{"a":{"c":[3],"d":2},"b":1}');
    const hash = rowContentHash({ id: 1, a: { y: 1, x: 2 } }, columns);
    expect(rowContentHash({ id: 2, b: null, a: { x: 2, y: 1 } }, columns)).toBe(hash);
    expect(rowContentHash({ id: 1, a: { x: 2, y: 1 }, b: '' }, columns)).not.toBe(hash);
    expect(rowContentHash({ id: 1, a: 5 }, columns)).toBe(
      rowContentHash({ id: 1, a: 5n }, columns),
    );
  });

  it('keeps an original for every value of every column its column gives back differently', () => {
    const columns: ColumnSpec[] = [
      { name: 'at', type: 'datetime' },
      { name: 'n', type: 'integer' },
      { name: 'label', type: 'text' },
      { name: 'data', type: 'json' },
      { name: 'day', type: 'date' },
    ];
    const rows: Row[] = [
      { id: 1, at: '2026-01-01T00:00:00.137251Z', n: 1, label: 'a', data: { b: 1, a: 2 } },
      { id: 2, at: '2026-01-01T00:02:05+00:00', label: 'nul\u0000', data: { é: 1, z: 2 } },
      { id: 3, at: '2026-01-01T00:02:05.000000Z', data: ['\uD800', 2 ** 60], day: '2026-01-01' },
      { id: 4, at: null, n: null, label: null, data: null },
    ];
    for (const dialect of ['sqlite', 'postgres'] as const) {
      // Every column of every row, whatever its type: the answer does not skip any that matter.
      const expected = rows.flatMap((row) =>
        columns
          .filter((column) =>
            valueChangesInColumn(dialectRules(dialect).values, column.type, row[column.name]),
          )
          .map((column) => ({
            id: String(row.id),
            column: column.name,
            servedHash: servedValueHash(
              servedValue(dialectRules(dialect).values, column.type, row[column.name]),
            ),
            original: toJsonText(row[column.name]),
          })),
      );
      expect(originalValuesOf(dialectRules(dialect).values, columns, rows)).toEqual(expected);
    }
    expect(
      originalValuesOf(dialectRules('sqlite').values, columns, rows).map((kept) => kept.id),
    ).toEqual(['2', '3']);
    expect(originalValuesOf(dialectRules('sqlite').values, columns.slice(1), rows)).toEqual([]);
  });

  it('orders jsonb keys by UTF-8 length, then bytes, ASCII or not', () => {
    const keys = ['b', 'a', 'aa', 'é', 'z', '\u{1F600}', 'ab', 'ä', 'B', '', 'zz', 'é1'];
    const utf8 = new TextEncoder();
    const byBytes = [...keys].sort((left, right) => {
      const [a, b] = [utf8.encode(left), utf8.encode(right)];
      return a.length - b.length || Buffer.compare(a, b);
    });
    const value = Object.fromEntries(keys.map((key, index) => [key, index]));
    expect(
      Object.keys(servedValue(dialectRules('postgres').values, 'json', value) as object),
    ).toEqual(byBytes);
    expect(valueChangesInColumn(dialectRules('postgres').values, 'json', value)).toBe(true);
    const ordered = Object.fromEntries(byBytes.map((key, index) => [key, index]));
    expect(valueChangesInColumn(dialectRules('postgres').values, 'json', ordered)).toBe(false);
    // 'é' is one character but two bytes (C3 A9): after 'z', and after 'zz' (7A 7A) too.
    expect(valueChangesInColumn(dialectRules('postgres').values, 'json', { z: 1, é: 2 })).toBe(
      false,
    );
    expect(valueChangesInColumn(dialectRules('postgres').values, 'json', { é: 1, z: 2 })).toBe(
      true,
    );
    expect(valueChangesInColumn(dialectRules('postgres').values, 'json', { zz: 1, é: 2 })).toBe(
      false,
    );
    expect(valueChangesInColumn(dialectRules('postgres').values, 'json', { é: 1, zz: 2 })).toBe(
      true,
    );
    expect(valueChangesInColumn(dialectRules('postgres').values, 'json', { b: 1, a: 2 })).toBe(
      true,
    );
    expect(
      valueChangesInColumn(dialectRules('postgres').values, 'json', { a: 1, b: 2, aa: 3 }),
    ).toBe(false);
  });

  it('plans history versions without writing one twice', () => {
    const open = new Map([
      ['1', 'h1'],
      ['2', 'h2'],
    ]);
    expect(
      planHistoryVersions(['1', '2', '3', '3', '3'], ['h1', 'x', 'h3', 'h3', 'y'], open),
    ).toEqual([
      { index: 1, closeOpen: true, kind: 'served' },
      { index: 2, closeOpen: false, kind: 'served' },
      { index: 4, closeOpen: true, kind: 'served' },
    ]);
  });

  it('plans a scope_return version for a row whose open version is a scope exit, same content or not', () => {
    const open = new Map([
      ['1', 'h1'],
      ['2', 'h2'],
    ]);
    expect(planHistoryVersions(['1', '2', '1'], ['h1', 'h2', 'h1'], open, new Set(['1']))).toEqual([
      { index: 0, closeOpen: true, kind: 'scope_return' },
    ]);
  });
});

// --------------------------------------------------------------------------- PostgreSQL only

describe('PostgreSQL connection settings', () => {
  it('describes the URL without its password or other query parameters', () => {
    const description = describePostgresUrl(
      'postgres://sync:s3cret%40pw@db.example:6543/warehouse?sslmode=require&password=other',
      'ocs',
    );
    expect(description).toBe(
      'postgres://sync@db.example:6543/warehouse?sslmode=require (schema ocs)',
    );
    expect(description).not.toMatch(/s3cret|other/);
  });

  it("puts its session settings after the URL's own options, so they win", () => {
    const config = postgresClientConfig(
      'postgres://u@h/db?options=-c%20work_mem%3D64MB&sslmode=disable',
      { schema: 'analytics', statementTimeoutSeconds: 1.5 },
    );
    expect(config.options).toBe(
      '-c work_mem=64MB -c search_path=analytics -c TimeZone=UTC -c DateStyle=ISO ' +
        '-c extra_float_digits=3 -c statement_timeout=1500',
    );
    expect(config.connectionString).toBe('postgres://u@h/db?sslmode=disable');
  });

  it('derives a stable signed 64-bit advisory lock key per schema', () => {
    const key = BigInt(advisoryLockKey('writer', 'ocs'));
    expect(advisoryLockKey('writer', 'ocs')).toBe(key.toString());
    expect(key).toBe(BigInt.asIntN(64, key));
    expect(advisoryLockKey('writer', 'other')).not.toBe(key.toString());
  });
});

describe.skipIf(!process.env.OCS_TEST_POSTGRES_URL)(
  'PostgreSQL specifics (needs OCS_TEST_POSTGRES_URL)',
  () => {
    const url = process.env.OCS_TEST_POSTGRES_URL!;
    let admin: pg.Client;
    let schema: string;
    let opened: Warehouse[];

    const open = async (options: Partial<Parameters<typeof openWarehouse>[0]> = {}) => {
      const warehouse = await openWarehouse({ url, schema, ...options });
      opened.push(warehouse);
      return warehouse;
    };

    beforeEach(async () => {
      // The warehouse creates its schema itself here.
      schema = `ocs_pg_${randomBytes(6).toString('hex')}`;
      admin = new pg.Client({ connectionString: url });
      await admin.connect();
      opened = [];
    });

    afterEach(async () => {
      for (const warehouse of opened) await warehouse.close();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });

    it('creates its schema, keeps every table in it and uses native column types', async () => {
      // A pool of one connection must do too (nothing may hold one connection and wait for another).
      const warehouse = await open({ poolSize: 1 });
      await createTable(warehouse, 'typed', [
        { name: 'a_integer', type: 'integer' },
        { name: 'a_number', type: 'number' },
        { name: 'a_decimal', type: 'decimal' },
        { name: 'a_boolean', type: 'boolean' },
        { name: 'a_text', type: 'text' },
        { name: 'updated_at', type: 'datetime' },
        { name: 'a_date', type: 'date' },
        { name: 'a_json', type: 'json' },
      ]);
      const columns = await admin.query(
        `SELECT column_name, data_type FROM information_schema.columns
         WHERE table_schema = $1 AND table_name = 'typed' ORDER BY ordinal_position`,
        [schema],
      );
      expect(columns.rows.map((row) => `${row.column_name} ${row.data_type}`)).toEqual([
        'id bigint',
        'a_integer bigint',
        'a_number double precision',
        'a_decimal numeric',
        'a_boolean boolean',
        'a_text text',
        'updated_at timestamp with time zone',
        'a_date date',
        'a_json jsonb',
        '_synced_at timestamp with time zone',
        '_run_id bigint',
        '_deleted_at timestamp with time zone',
        '_ocs_out_of_scope_since timestamp with time zone',
        '_ocs_served_under text',
      ]);
      const tables = await admin.query(
        `SELECT table_schema, count(*)::int AS n FROM information_schema.tables
         WHERE table_name IN ('typed', '_ocs_runs', '_ocs_lock') AND table_schema IN ($1, 'public')
         GROUP BY table_schema`,
        [schema],
      );
      expect(tables.rows).toEqual([{ table_schema: schema, n: 3 }]);
      expect(warehouse.description).toContain(`(schema ${schema})`);
      expect(await warehouse.status()).toMatchObject([
        { resource: 'typed', rows: 0, newestUpdatedAt: null },
      ]);
    });

    it('keeps the instant of a date-time, the largest 64-bit id, and reads both back exactly', async () => {
      const warehouse = await open();
      const columns: ColumnSpec[] = [{ name: 'created_at', type: 'datetime' }];
      await createTable(warehouse, 'events', columns);
      const runId = await warehouse.bookkeeping.startRun('incremental', null);
      await warehouse.writePage({
        runId,
        resource: 'events',
        columns,
        rows: [
          { id: 9223372036854775807n, created_at: '2026-11-20T10:00:00.123456Z' },
          { id: -9223372036854775808n, created_at: '2026-11-20T12:00:00.5+02:00' },
          { id: 1, created_at: '2026-11-20T10:00:00Z' },
        ],
        cursor: '9223372036854775807',
        cursorKind: 'pk',
        history: true,
      });
      const stored = await admin.query(
        `SELECT id::text AS id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS utc
         FROM "${schema}".events ORDER BY id`,
      );
      expect(stored.rows).toEqual([
        { id: '-9223372036854775808', utc: '2026-11-20 10:00:00.500000' },
        { id: '1', utc: '2026-11-20 10:00:00.000000' },
        { id: '9223372036854775807', utc: '2026-11-20 10:00:00.123456' },
      ]);
      const expected = new Map([
        ['-9223372036854775808', '2026-11-20T10:00:00.500000Z'],
        ['1', '2026-11-20T10:00:00Z'],
        ['9223372036854775807', '2026-11-20T10:00:00.123456Z'],
      ]);
      expect(await readAll(warehouse, 'events', 'created_at')).toEqual(expected);
      expect(await warehouse.tools.readColumn('events', 'created_at', '1', 5)).toEqual([
        { id: '9223372036854775807', value: '2026-11-20T10:00:00.123456Z' },
      ]);
      // Widened to text, a date-time reads as the same UTC ISO text.
      await warehouse.applySchemaChanges(
        [
          {
            kind: 'widen_column',
            table: 'events',
            column: 'created_at',
            fromType: 'datetime',
            toType: 'text',
            reason: 'value',
          },
        ],
        CHECKSUMS,
      );
      expect(await readAll(warehouse, 'events', 'created_at')).toEqual(expected);
      const history = await admin.query(
        `SELECT created_at FROM "${schema}".events__history WHERE id = 9223372036854775807`,
      );
      expect(history.rows).toEqual([{ created_at: '2026-11-20T10:00:00.123456Z' }]);
    });

    it('removes NUL (and lone surrogates) from text and JSON, counting each altered value once', async () => {
      const warehouse = await open();
      await createTable(warehouse, 'messages', MESSAGE_COLUMNS);
      const runId = await warehouse.bookkeeping.startRun('incremental', null);
      const result = await warehouse.writePage(
        page({
          runId,
          history: true,
          rows: [
            {
              id: 1,
              content: 'a\u0000b\u0000',
              metadata: { 'k\u0000': ['v\u0000', { x: 'y\u0000' }], clean: 1 },
            },
            // Backslash-u-zero-zero-zero-zero as six characters is not a NUL.
            { id: 2, content: 'literal \\u0000 stays', metadata: { s: 'back\\u0000slash' } },
            { id: 3, content: 'lone \uD800 surrogate', metadata: ['\uDC00'] },
          ],
        }),
      );
      expect(result).toEqual({ rowsWritten: 3, valuesAltered: 4, versionsWritten: 3 });
      expect(await readAll(warehouse, 'messages', 'content')).toEqual(
        new Map([
          ['1', 'ab'],
          ['2', 'literal \\u0000 stays'],
          ['3', 'lone \uFFFD surrogate'],
        ]),
      );
      expect(await readAll(warehouse, 'messages', 'metadata')).toEqual(
        new Map<string, unknown>([
          ['1', { k: ['v', { x: 'y' }], clean: 1 }],
          ['2', { s: 'back\\u0000slash' }],
          ['3', ['\uFFFD']],
        ]),
      );
      const history = await admin.query(
        `SELECT content FROM "${schema}".messages__history WHERE id = 1`,
      );
      expect(history.rows).toEqual([{ content: 'ab' }]);
    });

    it('applies statement_timeout to its statements', async () => {
      const warehouse = await open({ statementTimeoutSeconds: 0.2 });
      await admin.query('BEGIN');
      await admin.query(`LOCK TABLE "${schema}"._ocs_state IN ACCESS EXCLUSIVE MODE`);
      try {
        await expect(warehouse.bookkeeping.setState('k', 'v')).rejects.toThrow(
          /statement timeout.*SQLSTATE 57014/,
        );
      } finally {
        await admin.query('ROLLBACK');
      }
      await warehouse.bookkeeping.setState('k', 'v');
      expect(await warehouse.bookkeeping.getState('k')).toBe('v');
    });

    it("frees the lock when the holder's session ends, and the holder stops writing", async () => {
      const logger = { warn: vi.fn() };
      const holder = await open({ logger });
      await createTable(holder, 'messages', MESSAGE_COLUMNS);
      await holder.acquireLock(0);
      const other = await open();
      await expect(other.acquireLock(0)).rejects.toThrow(
        new RegExp(`pid ${process.pid} on ${hostname()}`),
      );

      // What happens to a killed process: PostgreSQL ends its session and frees the lock.
      const key = BigInt.asUintN(64, BigInt(advisoryLockKey('writer', schema)));
      const terminated = await admin.query(
        `SELECT pg_terminate_backend(pid) AS done FROM pg_locks
         WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2 AND objsubid = 1`,
        [(key >> 32n).toString(), (key & 0xffffffffn).toString()],
      );
      expect(terminated.rows).toEqual([{ done: true }]);

      const lock = await other.acquireLock(30_000);
      await vi.waitFor(
        () =>
          expect(logger.warn).toHaveBeenCalledWith(
            expect.anything(),
            expect.stringMatching(/Lost the warehouse lock/),
          ),
        { timeout: 20_000, interval: 50 },
      );
      const runId = await holder.bookkeeping.startRun('incremental', null);
      await expect(holder.writePage(page({ runId, rows: rowsWithIds([1]) }))).rejects.toThrow(
        /lost the warehouse lock/,
      );
      const record = await admin.query(`SELECT pid FROM "${schema}"._ocs_lock`);
      expect(record.rows).toEqual([{ pid: process.pid }]);
      await lock.release();
    });
  },
);
