/** How each logical column type is declared, written and read in SQLite. */
import type { ColumnType } from '../../interfaces.js';
import { isInt64 } from '../../column-types.js';
import { integralNumberText, wellFormedText } from '../canonical.js';
import type { DialectTypes } from '../table-definitions.js';
import { toServerTimestamp, toSortableUtc } from '../../timestamps.js';
import { fromJsonText, narrowInteger, toJsonText } from '../values.js';

export type SqliteValue = number | bigint | string | null;

/** Declared SQLite types. NUMERIC (not REAL) keeps 64-bit integers exact in a widened column. */
export const SQLITE_TYPE: Record<ColumnType, string> = {
  integer: 'INTEGER',
  number: 'NUMERIC',
  decimal: 'NUMERIC',
  boolean: 'INTEGER',
  text: 'TEXT',
  datetime: 'TEXT',
  date: 'TEXT',
  // Never a type name containing neither TEXT nor CHAR: "JSON" would get NUMERIC affinity and
  // turn the JSON text `5` into the integer 5.
  json: 'TEXT',
};

export const SQLITE_TYPES: DialectTypes = {
  column: SQLITE_TYPE,
  integer: 'INTEGER',
  time: 'TEXT',
  versionId: 'INTEGER PRIMARY KEY AUTOINCREMENT',
};

export function encodeValue(type: ColumnType, value: unknown): SqliteValue {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'integer':
      return value as number | bigint;
    case 'number':
    case 'decimal':
      return typeof value === 'number' && !Number.isSafeInteger(value) && Number.isInteger(value)
        ? integralDouble(value)
        : (value as number | bigint);
    case 'boolean':
      return value ? 1 : 0;
    case 'datetime':
      // One fixed-width UTC form, so text order is time order (ORDER BY, indexes, min/max).
      return toSortableUtc(value as string);
    case 'text':
      // UTF-8 has no form for a lone surrogate: stored as U+FFFD, as PostgreSQL stores it.
      return wellFormedText(value as string);
    case 'date':
      return value as string;
    case 'json':
      return toJsonText(value);
  }
}

/**
 * A double past 2^53 with no fraction. NUMERIC would store its exact binary value as an integer
 * (2**60 as 1152921504606846976); stored instead is the integer its shortest decimal names
 * (1152921504606847000), as PostgreSQL's numeric and every JSON column hold it, so both dialects
 * give the same digits back (../canonical.ts). Past 64 bits it stays a double.
 */
function integralDouble(value: number): number | bigint {
  const integer = BigInt(integralNumberText(value));
  return isInt64(integer) ? integer : value;
}

/** Decodes a value read with safeIntegers (integers arrive as bigint). */
export function decodeValue(type: ColumnType, stored: unknown): unknown {
  if (stored === null || stored === undefined) return null;
  switch (type) {
    case 'integer':
    case 'number':
    case 'decimal':
      return typeof stored === 'bigint' ? narrowInteger(stored) : stored;
    case 'boolean':
      return typeof stored === 'bigint' ? stored !== 0n : Boolean(stored);
    case 'datetime':
      // Read back in the server's form, as PostgreSQL's reads are.
      return serverFormOf(stored);
    case 'text':
    case 'date':
      return stored;
    case 'json':
      return fromJsonText(String(stored));
  }
}

/** A stored date-time in the server's form; text that is no date-time is returned as it is. */
export function serverFormOf(stored: unknown): unknown {
  if (typeof stored !== 'string') return stored;
  try {
    return toServerTimestamp(stored);
  } catch {
    return stored;
  }
}
