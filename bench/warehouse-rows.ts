/**
 * A warehouse's tables read back in the fake server's shape, and the fake server's rows in the
 * warehouse's: what the end-to-end tests (test/support.ts) and the chaos soak (chaos.ts) compare
 * to tell that a warehouse holds what the server serves, on every dialect.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { RESERVED_COLUMNS } from '../src/names.js';

export type StoredRow = Record<string, unknown>;
export type Dialect = 'sqlite' | 'postgres';
export type Query = (sql: string) => Promise<StoredRow[]>;

/** SQL on a SQLite file, 64-bit integers exact; the file is open only while a statement runs. */
export function sqliteQuery(path: string): Query {
  return async (sql) => {
    const db = new Database(path);
    db.defaultSafeIntegers(true);
    try {
      const statement = db.prepare(sql);
      if (statement.reader) return statement.all() as StoredRow[];
      statement.run();
      return [];
    } finally {
      db.close();
    }
  };
}

/** A PostgreSQL connection whose statements run in `schema`, values read as the tests expect. */
export async function connectPostgres(
  url: string,
  schema: string,
): Promise<{ query: Query; close(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url, types: { getTypeParser: typeParser } });
  await client.connect();
  await client.query(`SET TIME ZONE 'UTC'; SET search_path TO "${schema.replace(/"/g, '""')}"`);
  return {
    query: async (sql) => (await client.query(sql)).rows as StoredRow[],
    close: () => client.end(),
  };
}

/** int8 as bigint, timestamps/dates as the server's text form, jsonb parsed, the rest as pg gives it. */
function typeParser(oid: number, format?: string): (value: string) => unknown {
  switch (oid) {
    case 20:
      return (value) => BigInt(value);
    case 1700:
      // numeric: exact when it is a 64-bit integer, as the warehouse reads it.
      return (value) => {
        const integer = /^-?\d{1,19}$/.test(value) ? BigInt(value) : undefined;
        return integer !== undefined && BigInt.asIntN(64, integer) === integer
          ? integer
          : Number(value);
      };
    case 1184:
    case 1114:
      return (value) => value.replace(' ', 'T').replace(/\+00$/, 'Z');
    case 1082:
      return (value) => value;
    default:
      return pg.types.getTypeParser(oid, format as 'text');
  }
}

/**
 * A table's rows in id order, as the server sent them: bookkeeping columns left out, JSON
 * parsed, booleans and date-times in one form. Without `includeDeleted`, live rows only.
 */
export async function readTable(
  query: Query,
  dialect: Dialect,
  table: string,
  options: { includeDeleted?: boolean } = {},
): Promise<StoredRow[]> {
  const columns = await query(
    `SELECT column_name, column_type FROM "_ocs_columns" WHERE table_name = '${table}'`,
  );
  const types = new Map(columns.map((row) => [String(row.column_name), String(row.column_type)]));
  const where = options.includeDeleted ? '' : 'WHERE "_deleted_at" IS NULL';
  const rows = await query(`SELECT * FROM "${table}" ${where} ORDER BY id`);
  return rows.map((row) => {
    const decoded: StoredRow = {};
    for (const [key, value] of Object.entries(row)) {
      if (RESERVED_COLUMNS.has(key)) continue;
      // SQLite keeps JSON as text; pg hands jsonb over parsed.
      decoded[key] = decode(value, key === 'id' ? 'integer' : types.get(key), dialect === 'sqlite');
    }
    return decoded;
  });
}

/** Date-times compare as instants written one way: six fraction digits, or none when zero. */
const DATE_TIME_TEXT = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(Z|\+00:00)$/;
function canonicalDateTime(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const match = DATE_TIME_TEXT.exec(value);
  if (!match) return value;
  const fraction = (match[2] ?? '').padEnd(6, '0');
  return `${match[1]}${/^0+$/.test(fraction) ? '' : `.${fraction}`}Z`;
}

function decode(value: unknown, type: string | undefined, jsonAsText: boolean): unknown {
  if (value === null) return null;
  if (typeof value === 'string') value = canonicalDateTime(value);
  if (typeof value === 'bigint') {
    const asNumber = Number(value);
    value = Number.isSafeInteger(asNumber) ? asNumber : value;
  }
  switch (type) {
    case 'boolean':
      return value === true || value === 1 || value === 1n;
    case 'json':
      return jsonAsText && typeof value === 'string' ? JSON.parse(value) : value;
    default:
      return value;
  }
}

/** The source row as the warehouse should hold it (big ids stay bigint, the rest as JSON has them). */
export function normalizeSourceRow(row: Record<string, unknown>): StoredRow {
  const normalized: StoredRow = {};
  for (const [key, value] of Object.entries(row)) {
    if (typeof value === 'bigint') {
      normalized[key] = Number.isSafeInteger(Number(value)) ? Number(value) : value;
    } else {
      normalized[key] =
        value === undefined ? null : canonicalDateTime(JSON.parse(JSON.stringify(value)));
    }
  }
  return normalized;
}

/**
 * A row as the server sent it, as a warehouse of `dialect` should hold it (PostgreSQL cannot hold
 * `\u0000`: it is removed from text and JSON there, and counted).
 */
export function storedFormOf(row: Record<string, unknown>, dialect: Dialect): StoredRow {
  const normalized = normalizeSourceRow(row);
  return dialect === 'postgres' ? (withoutNul(normalized) as StoredRow) : normalized;
}

function withoutNul(value: unknown): unknown {
  if (typeof value === 'string') return value.replaceAll('\u0000', '');
  if (Array.isArray(value)) return value.map(withoutNul);
  if (value !== null && typeof value === 'object' && typeof value !== 'bigint') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [withoutNul(key), withoutNul(item)]),
    );
  }
  return value;
}
