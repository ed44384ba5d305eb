/**
 * Which values a warehouse column would give back differently from how the server sent them, and
 * what it would give back. Pure: both the sync (which keeps the original of such a value in
 * `_ocs_original_values`) and `serve` (which puts it back) use the same rules.
 *
 * - date-times come back in the server's form (`Z`, fraction only when non-zero): a value the
 *   server wrote another way (an offset, three fraction digits) is kept;
 * - PostgreSQL text and jsonb cannot hold NUL (removed) or lone surrogates (U+FFFD), nor can
 *   SQLite text hold lone surrogates (U+FFFD);
 * - jsonb orders object keys (shorter first, then by bytes) and writes integral numbers past 2^53
 *   as digits, which read back as bigint.
 */
import type { ColumnSpec, ColumnType, OriginalValue, Row } from '../interfaces.js';
import { recordByName } from '../names.js';
import { integralNumberText, storableText, wellFormedText } from './canonical.js';
import { isServerTimestamp, servedTimestamp } from '../timestamps.js';
import { sha256Hex, toJsonText } from './values.js';

export { servedTimestamp };

export type Dialect = 'sqlite' | 'postgres';

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

/** Whether a column of `type` gives this value back differently. Cheap for the common case. */
export function valueChangesInColumn(dialect: Dialect, type: ColumnType, value: unknown): boolean {
  if (value === null || value === undefined) return false;
  switch (type) {
    case 'datetime':
      return typeof value === 'string' && !isServerTimestamp(value);
    case 'text':
      return (
        typeof value === 'string' &&
        (dialect === 'postgres' ? postgresTextChanges(value) : wellFormedText(value) !== value)
      );
    case 'json':
      return dialect === 'postgres' && jsonbChanges(value);
    default:
      return false;
  }
}

/** What a column of `type` gives back for a value (as `serve` reads it). */
export function servedValue(dialect: Dialect, type: ColumnType, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'datetime':
      return typeof value === 'string' ? servedTimestamp(value) : value;
    case 'text':
      if (typeof value !== 'string') return value;
      return dialect === 'postgres' ? postgresText(value) : wellFormedText(value);
    case 'json':
      return dialect === 'postgres' ? jsonbValue(value) : value;
    default:
      return value;
  }
}

/** sha256 hex of a served value's JSON text: the key that ties an original to a stored value. */
export function servedValueHash(value: unknown): string {
  return sha256Hex(toJsonText(value));
}

/** The originals a page needs kept: one per value its column would give back differently. */
export function originalValuesOf(
  dialect: Dialect,
  columns: readonly ColumnSpec[],
  rows: readonly Row[],
): OriginalValue[] {
  const found: OriginalValue[] = [];
  // Once a page, not once a value: only these types ever give a value back differently.
  const changing = columns.filter(
    (column) =>
      column.type === 'datetime' ||
      column.type === 'text' ||
      (column.type === 'json' && dialect === 'postgres'),
  );
  if (changing.length === 0) return found;
  for (const row of rows) {
    for (const column of changing) {
      const value = row[column.name];
      if (!valueChangesInColumn(dialect, column.type, value)) continue;
      found.push({
        id: String(row.id),
        column: column.name,
        servedHash: servedValueHash(servedValue(dialect, column.type, value)),
        original: toJsonText(value),
      });
    }
  }
  return found;
}
