/**
 * Measures page upserts of chat-message-like rows into PostgreSQL, one statement per page, each
 * page in its own transaction together with a cursor save (as the sync engine writes them).
 *
 *   source .ci/postgres.sh && trap stop_test_postgres EXIT
 *   npx vite-node bench/postgres-upsert.ts            # or: npm run build && node dist/bench/postgres-upsert.js
 *
 * Env: OCS_TEST_POSTGRES_URL (required), BENCH_PAGES (default 40), BENCH_ROWS (default 1000).
 *
 * Shapes compared:
 * - values:  named (prepared) multi-row `INSERT ... VALUES ($1..$N) ON CONFLICT (id) DO UPDATE`
 * - unnest:  named `INSERT ... SELECT * FROM unnest($1::bigint[], $2::text[], ...) ON CONFLICT ...`
 * - json:    named `INSERT ... SELECT * FROM json_to_recordset($1::json) AS x(...) ON CONFLICT ...`
 * - copy:    `COPY stage FROM STDIN` (text format, through pg-copy-streams) into a temporary table
 *   emptied at commit, then `INSERT ... SELECT FROM stage ON CONFLICT ...` (the COPY + merge shape)
 * - warehouse: PostgresWarehouse.writePage (the unnest shape plus value checks, NUL cleaning and
 *   the cursor save), in a throwaway schema `ocs_bench`.
 * pg-copy-streams is what the PostgreSQL warehouse writes pages of many rows with (copy-upsert.ts).
 */
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { ColumnSpec, Row } from '../src/interfaces.js';
import { PostgresWarehouse } from '../src/warehouse/postgres/warehouse.js';

const url = process.env.OCS_TEST_POSTGRES_URL;
if (!url) {
  console.error('Set OCS_TEST_POSTGRES_URL (source .ci/postgres.sh starts a throwaway cluster).');
  process.exit(2);
}
const pages = Number(process.env.BENCH_PAGES ?? 40);
const rowsPerPage = Number(process.env.BENCH_ROWS ?? 1000);

interface Column {
  name: string;
  sql: string;
}

const columns: Column[] = [
  { name: 'id', sql: 'bigint' },
  { name: 'created_at', sql: 'timestamptz' },
  { name: 'updated_at', sql: 'timestamptz' },
  { name: 'chat_id', sql: 'bigint' },
  { name: 'message_type', sql: 'text' },
  { name: 'content', sql: 'text' },
  { name: 'summary', sql: 'text' },
  { name: 'translations', sql: 'jsonb' },
  { name: 'metadata', sql: 'jsonb' },
  { name: 'is_summarized', sql: 'boolean' },
  { name: '_run_id', sql: 'bigint' },
];

const words =
  'the quick brown fox jumps over a lazy dog while analysts wait for fresh chat data'.split(' ');

/** Deterministic text of about `length` characters. */
function text(seed: number, length: number): string {
  let out = '';
  let state = seed * 2654435761;
  while (out.length < length) {
    state = (state * 1103515245 + 12345) % 2147483648;
    out += (out ? ' ' : '') + words[state % words.length];
  }
  return out.slice(0, length);
}

type BenchRow = Record<string, unknown>;

function makePage(firstId: number, version: number): BenchRow[] {
  const rows: BenchRow[] = [];
  for (let index = 0; index < rowsPerPage; index++) {
    const id = firstId + index;
    rows.push({
      id,
      created_at: new Date(Date.UTC(2026, 0, 1) + id * 1000).toISOString(),
      updated_at: new Date(Date.UTC(2026, 0, 1) + id * 1000 + version).toISOString(),
      chat_id: Math.floor(id / 20),
      message_type: index % 2 ? 'human' : 'ai',
      content: text(id + version, 230),
      summary: index % 5 === 0 ? text(id * 7, 40) : null,
      translations: {},
      metadata: { trace_id: `t-${id}-${version}`, tags: ['a', 'b'] },
      is_summarized: index % 3 === 0,
    });
  }
  return rows;
}

const quoted = (name: string) => `"${name}"`;
const columnList = columns.map((column) => quoted(column.name)).join(', ');
const updateSet =
  columns
    .filter((column) => column.name !== 'id')
    .map((column) => `${quoted(column.name)} = excluded.${quoted(column.name)}`)
    .join(', ') + ', "_synced_at" = now()';

/** A column's value as a parameter: JSON columns pre-serialized so every shape pays the same. */
function parameter(row: BenchRow, column: Column, runId: number): unknown {
  if (column.name === '_run_id') return runId;
  const value = row[column.name];
  if (column.sql === 'jsonb')
    return value === null || value === undefined ? null : JSON.stringify(value);
  return value ?? null;
}

type Shape = (table: string, rows: BenchRow[], runId: number) => pg.QueryConfig;

const valuesShape: Shape = (table, rows, runId) => {
  const values: unknown[] = [];
  const tuples: string[] = [];
  for (const row of rows) {
    const slots: string[] = [];
    for (const column of columns) {
      values.push(parameter(row, column, runId));
      slots.push(`$${values.length}::${column.sql}`);
    }
    tuples.push(`(${slots.join(', ')}, now())`);
  }
  return {
    name: `${table}_${rows.length}`,
    text:
      `INSERT INTO ${quoted(table)} (${columnList}, "_synced_at") VALUES ${tuples.join(', ')} ` +
      `ON CONFLICT ("id") DO UPDATE SET ${updateSet}`,
    values,
  };
};

const unnestShape: Shape = (table, rows, runId) => {
  const arrays = columns.map((column) => rows.map((row) => parameter(row, column, runId)));
  return {
    name: table,
    text:
      `INSERT INTO ${quoted(table)} (${columnList}, "_synced_at") ` +
      `SELECT *, now() FROM unnest(${columns.map((column, index) => `$${index + 1}::${column.sql}[]`).join(', ')}) ` +
      `ON CONFLICT ("id") DO UPDATE SET ${updateSet}`,
    values: arrays,
  };
};

const jsonShape: Shape = (table, rows, runId) => {
  const records = rows.map((row) => {
    const record: BenchRow = {};
    for (const column of columns)
      record[column.name] = column.name === '_run_id' ? runId : (row[column.name] ?? null);
    return record;
  });
  return {
    name: table,
    text:
      `INSERT INTO ${quoted(table)} (${columnList}, "_synced_at") ` +
      `SELECT ${columnList}, now() FROM json_to_recordset($1::json) AS x(${columns
        .map((column) => `${quoted(column.name)} ${column.sql}`)
        .join(', ')}) ` +
      `ON CONFLICT ("id") DO UPDATE SET ${updateSet}`,
    values: [JSON.stringify(records)],
  };
};

/** A value in COPY's text format: `\\N` for null, backslash escapes for the rest. */
function copyField(value: unknown): string {
  if (value === null || value === undefined) return '\\N';
  const text = typeof value === 'boolean' ? (value ? 't' : 'f') : String(value);
  return text.replace(/[\\\t\n\r]/g, (character) =>
    character === '\\' ? '\\\\' : character === '\t' ? '\\t' : character === '\n' ? '\\n' : '\\r',
  );
}

const COPY_STAGE = 'bench_copy_stage';

/** COPY the page into the session's stage table, then merge it into `table` in one statement. */
async function copyAndMerge(
  client: pg.Client,
  table: string,
  rows: BenchRow[],
  runId: number,
): Promise<void> {
  const lines = rows.map(
    (row) => `${columns.map((column) => copyField(parameter(row, column, runId))).join('\t')}\n`,
  );
  await pipeline(
    Readable.from([lines.join('')]),
    client.query(copyFrom(`COPY ${COPY_STAGE} (${columnList}) FROM STDIN`)),
  );
  await client.query({
    name: `${table}_merge`,
    text:
      `INSERT INTO ${quoted(table)} (${columnList}, "_synced_at") ` +
      `SELECT ${columnList}, now() FROM ${COPY_STAGE} ON CONFLICT ("id") DO UPDATE SET ${updateSet}`,
  });
}

async function resetTables(client: pg.Client, tables: string[]): Promise<void> {
  for (const table of tables) {
    await client.query(`DROP TABLE IF EXISTS ${quoted(table)}`);
    await client.query(
      `CREATE TABLE ${quoted(table)} (${columns
        .map(
          (column) =>
            `${quoted(column.name)} ${column.sql}${column.name === 'id' ? ' PRIMARY KEY' : ''}`,
        )
        .join(', ')}, "_synced_at" timestamptz)`,
    );
  }
  await client.query(
    `CREATE TEMPORARY TABLE IF NOT EXISTS ${COPY_STAGE} (${columns
      .map((column) => `${quoted(column.name)} ${column.sql}`)
      .join(', ')}) ON COMMIT DELETE ROWS`,
  );
  await client.query('DROP TABLE IF EXISTS "bench_cursor"');
  await client.query('CREATE TABLE "bench_cursor" ("resource" text PRIMARY KEY, "cursor" text)');
  for (const table of tables)
    await client.query(`INSERT INTO "bench_cursor" VALUES ($1, NULL)`, [table]);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** One page in one transaction with its cursor save, as the warehouse writes it; returns seconds. */
async function writePage(
  client: pg.Client,
  shape: Shape | 'copy',
  table: string,
  rows: BenchRow[],
  runId: number,
): Promise<number> {
  const started = process.hrtime.bigint();
  await client.query('BEGIN');
  if (shape === 'copy') await copyAndMerge(client, table, rows, runId);
  else await client.query(shape(table, rows, runId));
  await client.query({
    name: 'bench_cursor_save',
    text: `UPDATE "bench_cursor" SET "cursor" = $1 WHERE "resource" = $2`,
    values: [String(rows.length), table],
  });
  await client.query('COMMIT');
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** One contender: writes one page and returns the seconds it took. */
interface Contender {
  label: string;
  write(rows: BenchRow[], runId: number, page: number): Promise<number>;
}

async function main(): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const version = (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]
    ?.server_version;
  const fsync = (await client.query<{ fsync: string }>('SHOW fsync')).rows[0]?.fsync;
  const sample = JSON.stringify(makePage(1, 0)).length / rowsPerPage;
  console.log(
    `PostgreSQL ${version} (fsync=${fsync}), node ${process.version}, ${pages} pages x ${rowsPerPage} rows per contender and pass, ` +
      `~${Math.round(sample)} bytes a row as JSON`,
  );
  const shapes: Array<{ label: string; table: string; shape: Shape | 'copy' }> = [
    { label: 'values (named multi-row VALUES)', table: 'bench_values', shape: valuesShape },
    { label: 'unnest (named, typed arrays)', table: 'bench_unnest', shape: unnestShape },
    { label: 'json (named, json_to_recordset)', table: 'bench_json', shape: jsonShape },
    { label: 'copy (COPY to a temp table + merge)', table: 'bench_copy', shape: 'copy' },
  ];
  await resetTables(
    client,
    shapes.map((entry) => entry.table),
  );
  await client.query('DROP SCHEMA IF EXISTS "ocs_bench" CASCADE');
  const warehouse = await openBenchWarehouse();
  try {
    const contenders: Contender[] = [
      ...shapes.map((entry) => ({
        label: entry.label,
        write: (rows: BenchRow[], runId: number) =>
          writePage(client, entry.shape, entry.table, rows, runId),
      })),
      {
        label: 'warehouse (PostgresWarehouse.writePage)',
        write: async (rows: BenchRow[], runId: number, page: number) => {
          const started = process.hrtime.bigint();
          await warehouse.writePage({
            runId,
            resource: 'chat_messages',
            columns: warehouseColumns,
            rows: rows as Row[],
            cursor: String(page),
            cursorKind: 'pk',
            history: false,
          });
          return Number(process.hrtime.bigint() - started) / 1e9;
        },
      },
    ];
    // Contenders take turns page by page (in rotating order) so the machine's drift hits all
    // alike: on a noisy 2-core machine only numbers from one such run compare.
    for (const [pass, runId] of [
      ['insert', 1],
      ['update', 2],
    ] as const) {
      const seconds = contenders.map(() => [] as number[]);
      for (let page = 0; page < pages; page++) {
        const rows = makePage(page * rowsPerPage + 1, runId);
        for (let turn = 0; turn < contenders.length; turn++) {
          const index = (page + turn) % contenders.length;
          seconds[index]!.push(await contenders[index]!.write(rows, runId, page));
        }
      }
      contenders.forEach((entry, index) => {
        const rate = Math.round(rowsPerPage / median(seconds[index]!));
        console.log(
          `${pass.padEnd(7)} ${entry.label.padEnd(40)} ${String(rate).padStart(7)} rows/s (median page)`,
        );
      });
    }
    // Every shape must have stored the same rows, or its speed means nothing.
    const digests = new Set<string>();
    for (const entry of shapes) {
      const result = await client.query<{ digest: string }>(
        `SELECT md5(string_agg(row(${columnList})::text, '|' ORDER BY "id")) AS digest FROM ${quoted(entry.table)}`,
      );
      digests.add(result.rows[0]!.digest);
    }
    if (digests.size !== 1) throw new Error('The shapes stored different rows; a shape is wrong.');
    console.log('Every shape stored the same rows.');
  } finally {
    await warehouse.close();
    for (const entry of shapes) await client.query(`DROP TABLE IF EXISTS ${quoted(entry.table)}`);
    await client.query('DROP TABLE IF EXISTS "bench_cursor"');
    await client.query('DROP SCHEMA IF EXISTS "ocs_bench" CASCADE');
    await client.end();
  }
}

const logicalType: Record<string, ColumnSpec['type']> = {
  timestamptz: 'datetime',
  bigint: 'integer',
  text: 'text',
  jsonb: 'json',
  boolean: 'boolean',
};
const warehouseColumns: ColumnSpec[] = columns
  .filter((column) => column.name !== 'id' && column.name !== '_run_id')
  .map((column) => ({ name: column.name, type: logicalType[column.sql]! }));

/** The dialect itself, in a throwaway schema, with the bench table created through it. */
async function openBenchWarehouse(): Promise<PostgresWarehouse> {
  const warehouse = new PostgresWarehouse({ url: url!, schema: 'ocs_bench' });
  await warehouse.migrate();
  await warehouse.applySchemaChanges(
    [{ kind: 'create_table', table: 'chat_messages', columns: warehouseColumns, reason: 'schema' }],
    { from: null, to: null },
  );
  return warehouse;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
