/**
 * PostgreSQL's answers to what the shared code asks of a dialect (../dialect-rules.ts): `$n`
 * placeholders, the audit head locked FOR UPDATE, entries inserted in one statement of arrays,
 * timestamptz read back in the fixed form, and what text and jsonb columns give back:
 *
 * - text and jsonb cannot hold NUL (removed) or lone surrogates (U+FFFD);
 * - jsonb orders object keys (shorter first, then by bytes) and writes integral numbers past 2^53
 *   as digits, which read back as bigint.
 */
import { recordByName } from '../../names.js';
import { ENTRY_COLUMNS, HEAD_SELECT_SQL, HEAD_UPDATE_SQL, entryValues } from '../audit-chain.js';
import { integralNumberText, storableText } from '../canonical.js';
import type { DialectRules } from '../dialect-rules.js';

/** Text as PostgreSQL stores it: NUL removed, lone surrogates replaced. */
const postgresText = storableText;

function postgresTextChanges(text: string): boolean {
  return storableText(text) !== text;
}

const utf8 = new TextEncoder();

function isAscii(text: string): boolean {
  for (let index = 0; index < text.length; index++) {
    if (text.charCodeAt(index) > 0x7f) return false;
  }
  return true;
}

/** jsonb's key order: shorter keys first (in UTF-8 bytes), then bytewise. */
function jsonbKeyOrder(left: string, right: string): number {
  // ASCII (nearly every key) is one byte a character: compared in place, without encoding.
  if (isAscii(left) && isAscii(right)) {
    if (left.length !== right.length) return left.length - right.length;
    return left < right ? -1 : left > right ? 1 : 0;
  }
  const a = utf8.encode(left);
  const b = utf8.encode(right);
  if (a.length !== b.length) return a.length - b.length;
  return Buffer.compare(a, b);
}

/** A JSON value as a jsonb column gives it back. */
function jsonbValue(value: unknown): unknown {
  if (typeof value === 'string') return postgresText(value);
  if (typeof value === 'number') {
    if (Object.is(value, -0)) return 0;
    return Number.isInteger(value) && !Number.isSafeInteger(value)
      ? BigInt(integralNumberText(value))
      : value;
  }
  if (Array.isArray(value)) return value.map(jsonbValue);
  if (value !== null && typeof value === 'object') {
    const entries = new Map<string, unknown>();
    // A later duplicate key (after cleaning) wins, as in jsonb.
    for (const [key, item] of Object.entries(value))
      entries.set(postgresText(key), jsonbValue(item));
    // No prototype: a key `__proto__` in the server's JSON is a key like any other.
    const result = recordByName<unknown>();
    for (const key of [...entries.keys()].sort(jsonbKeyOrder)) result[key] = entries.get(key);
    return result;
  }
  return value;
}

/** Whether jsonb would give this JSON value back differently (checked without copying). */
function jsonbChanges(value: unknown): boolean {
  if (typeof value === 'string') return postgresTextChanges(value);
  if (typeof value === 'number') {
    return Object.is(value, -0) || (Number.isInteger(value) && !Number.isSafeInteger(value));
  }
  if (Array.isArray(value)) return value.some(jsonbChanges);
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    for (let index = 0; index < keys.length; index += 1) {
      const key = keys[index]!;
      if (postgresTextChanges(key)) return true;
      if (index > 0 && jsonbKeyOrder(keys[index - 1]!, key) >= 0) return true;
      if (jsonbChanges((value as Record<string, unknown>)[key])) return true;
    }
  }
  return false;
}

/** A timestamptz as the fixed form `YYYY-MM-DDTHH:MM:SS.ffffffZ`, exactly. */
export function postgresFixedTimeSql(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

export const POSTGRES_RULES: DialectRules = {
  name: 'postgres',
  placeholders: (sql) => {
    let index = 0;
    return sql.replace(/\?/g, () => `$${++index}`);
  },
  // Locked for the rest of the transaction: appends wait for it.
  headSelectSql: `${HEAD_SELECT_SQL} FOR UPDATE`,
  holdHeadSql: undefined,
  // One round trip: the entries as arrays, and the head moved in the same statement.
  insertEntries: async (run, entries, head) => {
    const columns = entries.map(entryValues);
    await run(
      `WITH appended AS (INSERT INTO _ocs_audit (${ENTRY_COLUMNS}) SELECT * FROM unnest(` +
        '?::bigint[], ?::bigint[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])) ' +
        HEAD_UPDATE_SQL,
      [
        ...Array.from({ length: 9 }, (_, index) => columns.map((values) => values[index])),
        head.seq,
        head.hash,
      ],
    );
  },
  fixedTime: postgresFixedTimeSql,
  keptBetweenRuns: false,
  values: {
    text: postgresText,
    textChanges: postgresTextChanges,
    json: jsonbValue,
    jsonChanges: jsonbChanges,
  },
};
