/**
 * The analysts' warehouse on every dialect, end to end through the CLI: sortable date-times,
 * relationships and their indexes, live views, field exclusion, the schema command, Parquet.
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset, sampleFixture } from '../src/fake-server/fixture.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { ColumnSpec, StoredRow, Warehouse } from '../src/interfaces.js';
import { exportParquet, PARQUET_TYPE } from '../src/export/parquet.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { fromJsonText } from '../src/warehouse/values.js';
import type { Relationship } from '../src/sync/relationships.js';
import {
  createTestWarehouse,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  type TestWarehouse,
} from './support.js';

const SORTABLE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

describe.each(splitDialects)("analysts' warehouse (%s)", (dialect) => {
  let server: FakeServer | undefined;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let directory: ReturnType<typeof temporaryDirectory>;

  const cli = (args: string[], env: Record<string, string> = {}) =>
    runCli(args, {
      ...syncEnv(server!.url, warehouse.env, { OCS_PAGE_SIZE: '7' }),
      ...env,
    });
  const sync = (args: string[] = [], env: Record<string, string> = {}) =>
    cli(['sync', ...args], env);
  const open = (): Promise<Warehouse> =>
    openWarehouse({
      url: warehouse.env.OCS_WAREHOUSE_URL!,
      schema: warehouse.env.OCS_WAREHOUSE_SCHEMA,
    });
  const state = async (key: string): Promise<unknown> => {
    const rows = await warehouse.query(`SELECT value FROM "_ocs_state" WHERE key = '${key}'`);
    return rows[0] ? JSON.parse(String(rows[0].value)) : undefined;
  };
  const indexNames = async (): Promise<string[]> =>
    (
      await warehouse.query(
        dialect === 'sqlite'
          ? "SELECT name FROM sqlite_master WHERE type = 'index'"
          : 'SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema()',
      )
    ).map((row) => String(row.name));
  const columnsOf = async (table: string): Promise<string[]> =>
    (
      await warehouse.query(
        dialect === 'sqlite'
          ? `SELECT name FROM pragma_table_info('${table}')`
          : `SELECT column_name AS name FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = '${table}' ORDER BY ordinal_position`,
      )
    ).map((row) => String(row.name));

  beforeEach(async () => {
    directory = temporaryDirectory();
    warehouse = await createTestWarehouse(dialect);
    dataset = createSampleDataset({ rowsPerResource: 9, seed: 5 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await warehouse.dispose();
    directory.remove();
  });

  it('an unchanged run keeps the relationships and indexes unchecked; a change, or a run cut short before them, finds them again', async () => {
    const dropIndex = () => warehouse.query('DROP INDEX chat_messages__chat_idx');
    const current = async () =>
      (
        await warehouse.query(`SELECT value FROM "_ocs_state" WHERE key = 'relationships_current'`)
      )[0]?.value;
    expect((await sync()).code).not.toBe(1);
    expect(await current()).toBe('yes');
    const relationships = await state('relationships');
    // Nothing changed: nothing is checked or indexed again (the dropped index stays dropped).
    await dropIndex();
    expect((await sync()).code).not.toBe(1);
    expect(await indexNames()).not.toContain('chat_messages__chat_idx');
    expect(await current()).toBe('yes');
    // A run that stopped between its walks and the relationships leaves them to the next one.
    await warehouse.query(
      `UPDATE "_ocs_state" SET value = 'no' WHERE key = 'relationships_current'`,
    );
    expect((await sync()).code).not.toBe(1);
    expect(await indexNames()).toContain('chat_messages__chat_idx');
    // New rows: found again.
    await dropIndex();
    dataset.insert('chat_messages', 2);
    expect((await sync()).code).not.toBe(1);
    expect(await indexNames()).toContain('chat_messages__chat_idx');
    expect(await state('relationships')).toEqual(relationships);
    expect(await current()).toBe('yes');
  });

  it('finds the relationships the data supports, indexes them and updated_at, and prints them', async () => {
    expect((await sync()).code).not.toBe(1);
    const relationships = (await state('relationships')) as Relationship[];
    const found = new Map(relationships.map((r) => [`${r.table}.${r.column}`, r]));

    // Every relationship found is one the fake server's data really has.
    const truth = new Map<string, string>();
    for (const resource of sampleFixture()) {
      for (const [field, spec] of Object.entries(resource.fields)) {
        if (spec.references) truth.set(`${resource.resource}.${field}`, spec.references);
      }
    }
    for (const relationship of relationships) {
      expect(
        truth.get(`${relationship.table}.${relationship.column}`),
        `${relationship.table}.${relationship.column}`,
      ).toBe(relationship.references);
    }
    // The joins analysts ask for first, found by model name, resource name and plural.
    expect(found.get('chat_messages.chat')).toMatchObject({
      references: 'chats',
      basis: 'verified',
    });
    expect(found.get('sessions.experiment')?.references).toBe('chatbots');
    expect(found.get('sessions.participant')?.references).toBe('participants');
    expect(found.get('traces.session')?.references).toBe('sessions');
    // By the model name's ending (chat.chatmessage), verified by the data.
    expect(found.get('traces.input_message')?.references).toBe('chat_messages');
    expect(relationships.length).toBeGreaterThanOrEqual(truth.size / 2);

    const indexes = await indexNames();
    expect(indexes).toEqual(
      expect.arrayContaining([
        'chat_messages__chat_idx',
        'chat_messages__updated_at_idx',
        'sessions__experiment_idx',
      ]),
    );

    const text = await cli(['schema']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^chat_messages {2}\(live rows: chat_messages__live\)$/m);
    expect(text.stdout).toMatch(/chat_messages\.chat -> chats\.id \(verified\)/);
    expect(text.stdout).toMatch(/^ {2}updated_at +datetime +(TEXT|timestamptz)$/m);
    const mermaid = await cli(['schema', '--format', 'mermaid']);
    expect(mermaid.stdout.startsWith('erDiagram\n')).toBe(true);
    expect(mermaid.stdout).toContain('chat_messages }o--o| chats : "chat"');
    expect(mermaid.stdout).toMatch(/^ {4}integer chat FK$/m);
    const json = JSON.parse((await cli(['schema', '--format', 'json'])).stdout) as {
      relationships: Relationship[];
    };
    expect(json.relationships).toEqual(relationships);
    expect((await cli(['schema', '--format', 'dot'])).code).toBe(2);

    // A second run keeps what was verified without new work.
    expect((await sync()).code).not.toBe(1);
    expect(await state('relationships')).toEqual(relationships);
  });

  it('rejects a name match the data contradicts', async () => {
    const db = await open();
    try {
      const runId = await db.bookkeeping.startRun('incremental', null);
      await db.applySchemaChanges(
        [
          { kind: 'create_table', table: 'chats', columns: [], reason: 'rows' },
          {
            kind: 'create_table',
            table: 'notes',
            columns: [{ name: 'chat', type: 'integer' }],
            reason: 'rows',
          },
        ],
        { from: null, to: null },
      );
      const write = (
        table: string,
        rows: Array<Record<string, unknown> & { id: number }>,
        columns: ColumnSpec[],
      ) =>
        db.writePage({
          runId,
          resource: table,
          columns,
          rows,
          cursor: null,
          cursorKind: null,
          history: false,
        });
      await write('chats', [{ id: 1 }, { id: 2 }], []);
      await write(
        'notes',
        [
          { id: 1, chat: 1 },
          { id: 2, chat: 3 },
        ],
        [{ name: 'chat', type: 'integer' }],
      );
      expect(await db.reads.checkReference('notes', 'chat', 'chats')).toEqual({
        values: 2,
        unmatched: 1,
      });
    } finally {
      await db.close();
    }
  });

  it('keeps indexes idempotent, and widens or drops an indexed column', async () => {
    const db = await open();
    try {
      const columns: ColumnSpec[] = [
        { name: 'chat', type: 'integer' },
        { name: 'updated_at', type: 'datetime' },
        { name: 'note', type: 'text' },
      ];
      await db.applySchemaChanges(
        [{ kind: 'create_table', table: 'notes', columns, reason: 'rows' }],
        { from: null, to: null },
      );
      const wanted = [
        { table: 'notes', column: 'chat' },
        { table: 'notes', column: 'updated_at' },
        { table: 'notes', column: 'not_there' },
      ];
      expect(await db.reads.ensureIndexes(wanted)).toBe(2);
      expect(await db.reads.ensureIndexes(wanted)).toBe(0);
      await db.applySchemaChanges(
        [
          {
            kind: 'widen_column',
            table: 'notes',
            column: 'chat',
            fromType: 'integer',
            toType: 'decimal',
            reason: 'value',
          },
          {
            kind: 'drop_column',
            table: 'notes',
            column: 'updated_at',
            fromType: 'datetime',
            reason: 'excluded',
          },
        ],
        { from: null, to: null },
      );
      expect(await db.describeTable('notes')).toEqual([
        { name: 'chat', type: 'decimal' },
        { name: 'note', type: 'text' },
      ]);
      expect(await indexNames()).not.toContain('notes__updated_at_idx');
      expect(await db.reads.ensureIndexes(wanted)).toBe(dialect === 'sqlite' ? 1 : 0);
      expect(await indexNames()).toContain('notes__chat_idx');
      expect(await columnsOf('notes__live')).toEqual([
        'id',
        'chat',
        'note',
        '_synced_at',
        '_run_id',
        '_ocs_out_of_scope_since',
      ]);
    } finally {
      await db.close();
    }
  });

  it('keeps date-times sortable as stored and reads them back in the server form', async () => {
    const db = await open();
    const times = [
      '2026-11-20T09:15:00.250000Z',
      '2026-11-20T09:15:00Z',
      '2026-11-20T10:15:00.1+01:00',
      '2026-11-20T09:14:59.999999Z',
    ];
    try {
      const columns: ColumnSpec[] = [{ name: 'updated_at', type: 'datetime' }];
      await db.applySchemaChanges(
        [{ kind: 'create_table', table: 'events', columns, reason: 'rows' }],
        { from: null, to: null },
      );
      const runId = await db.bookkeeping.startRun('incremental', null);
      await db.writePage({
        runId,
        resource: 'events',
        columns,
        rows: times.map((updated_at, index) => ({ id: index + 1, updated_at })),
        cursor: null,
        cursorKind: null,
        history: false,
      });
      expect(
        (await db.tools.readColumn('events', 'updated_at', null, 10)).map((r) => r.value),
      ).toEqual([
        '2026-11-20T09:15:00.250000Z',
        '2026-11-20T09:15:00Z',
        '2026-11-20T09:15:00.100000Z',
        '2026-11-20T09:14:59.999999Z',
      ]);
    } finally {
      await db.close();
    }
    const ordered = await warehouse.query('SELECT id FROM "events" ORDER BY "updated_at", "id"');
    expect(ordered.map((row) => Number(row.id))).toEqual([4, 2, 3, 1]);
    if (dialect === 'sqlite') {
      const stored = await warehouse.query('SELECT "updated_at", "_synced_at" FROM "events"');
      for (const row of stored) {
        expect(row.updated_at).toMatch(SORTABLE);
        expect(row._synced_at).toMatch(SORTABLE);
      }
    }
  });

  it('migrates a warehouse from before 004: date-times become sortable, live views appear', async () => {
    expect((await sync(['--resources', 'chats'])).code).not.toBe(1);
    // Back to what an older ocs-sync left: the server's varying text, no view, no 004.
    await warehouse.query('DROP VIEW "chats__live"');
    await warehouse.query('DELETE FROM "_ocs_migrations" WHERE version = 4');
    if (dialect === 'sqlite') {
      await warehouse.query(
        `UPDATE "chats" SET "updated_at" = replace("updated_at", '.000000Z', 'Z'), "_synced_at" = substr("_synced_at", 1, 23) || 'Z'`,
      );
      await warehouse.query(
        `UPDATE "chats" SET "updated_at" = '2026-01-01T12:00:00+02:00' WHERE id = (SELECT min(id) FROM "chats")`,
      );
    }
    const db = await open(); // migrates
    await db.close();
    const live = await warehouse.query('SELECT count(*) AS n FROM "chats__live"');
    expect(Number(live[0]!.n)).toBe(dataset.count('chats'));
    if (dialect === 'sqlite') {
      const rows = await warehouse.query(
        'SELECT "updated_at", "_synced_at" FROM "chats" ORDER BY id',
      );
      for (const row of rows) {
        expect(row.updated_at).toMatch(SORTABLE);
        expect(row._synced_at).toMatch(SORTABLE);
      }
      expect(rows[0]!.updated_at).toBe('2026-01-01T10:00:00.000000Z');
      const runs = await warehouse.query('SELECT started_at FROM "_ocs_runs"');
      for (const row of runs) expect(row.started_at).toMatch(SORTABLE);
    }
  });

  it('shows in <table>__live only the rows not marked deleted', async () => {
    expect((await sync()).code).not.toBe(1);
    const [gone] = dataset.ids('chats');
    dataset.remove('chats', [gone!]);
    expect((await sync(['--full-refresh', 'chats'])).code).not.toBe(1);
    const all = await warehouse.query('SELECT id FROM "chats" ORDER BY id');
    const live = await warehouse.query('SELECT * FROM "chats__live" ORDER BY id');
    expect(all).toHaveLength(dataset.count('chats') + 1);
    expect(live.map((row) => Number(row.id))).toEqual(dataset.ids('chats').map(Number));
    expect(Object.keys(live[0]!)).not.toContain('_deleted_at');
    expect(Object.keys(live[0]!)).toEqual(
      expect.arrayContaining(['id', 'updated_at', '_synced_at']),
    );
  });

  it('never stores an excluded field, and empties and drops one newly excluded, history included', async () => {
    const history = { OCS_HISTORY: 'chat_messages' };
    expect((await sync([], history)).code).not.toBe(1);
    expect(await columnsOf('chat_messages')).toContain('content');
    expect(await columnsOf('chat_messages__history')).toContain('content');

    const secret = String(dataset.rows('chat_messages')[0]!.content);
    const fileHolds = async (text: string) => {
      await warehouse.query('PRAGMA wal_checkpoint(TRUNCATE)');
      return readFileSync(warehouse.env.OCS_WAREHOUSE_URL!).includes(Buffer.from(text));
    };
    if (dialect === 'sqlite') expect(await fileHolds(secret)).toBe(true);

    const excluded = {
      ...history,
      OCS_EXCLUDE_FIELDS: 'chat_messages.content,participants.identifier',
    };
    const result = await sync([], excluded);
    expect(result.code).not.toBe(1);
    expect(result.logs).toMatch(/column chat_messages\.content emptied and dropped/);
    expect(await columnsOf('chat_messages')).not.toContain('content');
    expect(await columnsOf('chat_messages__history')).not.toContain('content');
    expect(await columnsOf('chat_messages__live')).not.toContain('content');
    expect(await columnsOf('participants')).not.toContain('identifier');
    const drops = await warehouse.query(
      `SELECT table_name, column_name, from_type, reason FROM "_ocs_schema_changes" WHERE change = 'drop_column' ORDER BY table_name`,
    );
    expect(drops).toEqual([
      {
        table_name: 'chat_messages',
        column_name: 'content',
        from_type: 'text',
        reason: 'excluded',
      },
      {
        table_name: 'participants',
        column_name: 'identifier',
        from_type: 'text',
        reason: 'excluded',
      },
    ]);
    const typed = await warehouse.query(
      `SELECT column_name FROM "_ocs_columns" WHERE table_name = 'chat_messages' AND column_name = 'content'`,
    );
    expect(typed).toEqual([]);

    // Edited rows come back without it, in the table and in new history versions.
    dataset.edit('chat_messages', dataset.ids('chat_messages').slice(0, 3));
    const again = await sync([], excluded);
    expect(again.code).not.toBe(1);
    expect(again.logs).not.toMatch(/emptied and dropped/);
    expect(await columnsOf('chat_messages__history')).not.toContain('content');

    // The old values are gone from the SQLite file itself (rebuilt), not just hidden.
    if (dialect === 'sqlite') expect(await fileHolds(secret)).toBe(false);
  });

  it('creates a table without an excluded field from the first run', async () => {
    const result = await sync([], { OCS_EXCLUDE_FIELDS: 'chat_messages.content' });
    expect(result.code).not.toBe(1);
    expect(await columnsOf('chat_messages')).not.toContain('content');
    const drops = await warehouse.query(
      `SELECT count(*) AS n FROM "_ocs_schema_changes" WHERE change = 'drop_column'`,
    );
    expect(Number(drops[0]!.n)).toBe(0);
  });

  it('exports Parquet files with real types that read back equal to the tables', async () => {
    expect((await sync()).code).not.toBe(1);
    const [gone] = dataset.ids('chat_messages');
    dataset.remove('chat_messages', [gone!]);
    expect((await sync(['--full-refresh', 'chat_messages'])).code).not.toBe(1);

    const out = join(directory.path, 'parquet');
    const exported = await cli(['export', 'parquet', out]);
    expect(exported.code).toBe(0);
    expect(exported.stdout).toMatch(/chat_messages\.parquet {2}\d+ rows/);
    const files = readdirSync(out).sort();
    expect(files).toContain('chat_messages.parquet');
    expect(files.some((file) => file.endsWith('.partial'))).toBe(false);

    const db = await open();
    try {
      for (const table of ['chat_messages', 'sessions', 'chats', 'team']) {
        const columns = (await db.describeTable(table))!;
        const stored = await db.reads.readRows({
          table,
          columns,
          afterId: null,
          limit: 10_000,
          live: false,
        });
        const { types, rows } = await readParquet(join(out, `${table}.parquet`));
        expect(types.get('id')).toBe('BIGINT');
        for (const column of columns) {
          expect(types.get(column.name), `${table}.${column.name}`).toBe(duckTypeName(column));
        }
        const jsonColumns = columns.filter((column) => column.type === 'json');
        expect(
          rows.map((row) => {
            const normalised = normaliseParquetRow(row);
            for (const { name } of jsonColumns) {
              // JSON is text in Parquet: compared as the value it spells.
              if (typeof normalised[name] === 'string') {
                normalised[name] = fromJsonText(normalised[name] as string);
              }
            }
            return normalised;
          }),
        ).toEqual(stored.map((row) => normaliseStoredRow(row, columns)));
      }

      // --live leaves out rows marked deleted and the _deleted_at column; --resources limits.
      const liveOut = join(directory.path, 'live');
      const live = await cli([
        'export',
        'parquet',
        liveOut,
        '--live',
        '--resources',
        'chat_messages',
      ]);
      expect(live.code).toBe(0);
      expect(readdirSync(liveOut)).toEqual(['chat_messages.parquet']);
      const { types, rows } = await readParquet(join(liveOut, 'chat_messages.parquet'));
      expect(types.has('_deleted_at')).toBe(false);
      expect(rows.map((row) => Number(row.id))).toEqual(dataset.ids('chat_messages').map(Number));

      // Small batches: the same rows, read in many steps.
      const batched = await exportParquet(db, {
        directory: join(directory.path, 'batched'),
        tables: ['chat_messages'],
        live: false,
        batchRows: 2,
      });
      expect(batched[0]!.rows).toBe(dataset.count('chat_messages') + 1);
    } finally {
      await db.close();
    }

    const unknown = await cli(['export', 'parquet', out, '--resources', 'chat_messages,nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/nope, which is not a table of this warehouse/);
  });
});

function duckTypeName(column: ColumnSpec): string {
  const type = PARQUET_TYPE[column.type];
  return type === 'TIMESTAMPTZ' ? 'TIMESTAMP WITH TIME ZONE' : type;
}

async function readParquet(
  file: string,
): Promise<{ types: Map<string, string>; rows: Array<Record<string, unknown>> }> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  try {
    const source = `read_parquet('${file.replaceAll("'", "''")}')`;
    const described = await connection.runAndReadAll(`DESCRIBE SELECT * FROM ${source}`);
    const types = new Map(
      described
        .getRowObjectsJS()
        .map((row) => [String(row.column_name), String(row.column_type)] as const),
    );
    // Instants as microseconds since the epoch, dates as text: exact on both sides.
    const selected = [...types].map(([name, type]) =>
      type === 'TIMESTAMP WITH TIME ZONE'
        ? `epoch_us("${name}") AS "${name}"`
        : type === 'DATE'
          ? `CAST("${name}" AS VARCHAR) AS "${name}"`
          : `"${name}"`,
    );
    const result = await connection.runAndReadAll(
      `SELECT ${selected.join(', ')} FROM ${source} ORDER BY id`,
    );
    return { types, rows: result.getRowObjectsJS() as Array<Record<string, unknown>> };
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

function normaliseParquetRow(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(row).map(([key, value]) => [
      key,
      typeof value === 'bigint' ? value.toString() : value,
    ]),
  );
}

/** The warehouse's row as the Parquet reader gives it: integers and instants as decimal text. */
function normaliseStoredRow(row: StoredRow, columns: ColumnSpec[]): Record<string, unknown> {
  const types = new Map(columns.map((column) => [column.name, column.type]));
  types.set('id', 'integer');
  types.set('_run_id', 'integer');
  types.set('_synced_at', 'datetime');
  types.set('_deleted_at', 'datetime');
  return Object.fromEntries(
    Object.entries(row).map(([key, value]) => {
      if (value === null || value === undefined) return [key, null];
      switch (types.get(key)) {
        case 'integer':
          return [key, String(value)];
        case 'datetime':
          return [key, microsOf(String(value)).toString()];
        case 'json':
          return [key, value];
        default:
          return [key, value];
      }
    }),
  );
}

function microsOf(text: string): bigint {
  const match = /^(.{19})(?:\.(\d{1,6}))?Z$/.exec(text);
  if (!match) throw new Error(`not a server date-time: ${text}`);
  return BigInt(Date.parse(`${match[1]}Z`)) * 1000n + BigInt((match[2] ?? '').padEnd(6, '0'));
}
