import * as crypto from 'node:crypto';
import { stringify as stringifyLossless } from 'lossless-json';
import { parseJsonExact } from '../json.js';
import type { ColumnType } from '../interfaces.js';
import { WarehouseError } from '../errors.js';
import { valueFits } from '../column-types.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * JSON text of a value. JSON.stringify is the fast path; only values holding a BigInt (ids past
 * 2^53 inside JSON fields) go through lossless-json, which writes them as plain JSON numbers.
 */
export function toJsonText(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof TypeError) || !/bigint/i.test(error.message)) throw error;
    text = stringifyLossless(value);
  }
  if (text === undefined) throw new TypeError(`Cannot encode a ${typeof value} as JSON`);
  return text;
}

/**
 * Parse JSON text stored by toJsonText without rounding 64-bit integers: JSON.parse, and
 * lossless-json only for text holding a number past 2^53 (lossless-json on every value made
 * reading JSON columns back several times slower).
 */
export function fromJsonText(text: string): unknown {
  return parseJsonExact(text);
}

/** One-shot sha256 (crypto.hash, Node >= 20.12) is about twice as fast as createHash per row. */
export const sha256Hex: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (text) =>
        (crypto as unknown as { hash(algorithm: string, data: string): string }).hash(
          'sha256',
          text,
        )
    : (text) => crypto.createHash('sha256').update(text).digest('hex');

/** A row id checked to be a 64-bit integer; bigint past 2^53, number otherwise. */
export function checkedRowId(id: unknown, table: string): number | bigint {
  if (typeof id === 'number' && Number.isSafeInteger(id)) return id;
  if (typeof id === 'bigint' && id >= INT64_MIN && id <= INT64_MAX) return id;
  throw new WarehouseError(
    `A row of ${table} has an id that is not a 64-bit integer (a ${typeof id}); the page was not stored.`,
  );
}

/** Parse an id given as decimal text (the form ids take outside the warehouse). */
export function parseIdText(id: string, table: string): bigint {
  if (!/^-?\d{1,19}$/.test(id)) {
    throw new WarehouseError(
      `Row id ${JSON.stringify(id.slice(0, 40))} for ${table} is not a decimal integer.`,
    );
  }
  const value = BigInt(id);
  if (value < INT64_MIN || value > INT64_MAX) {
    throw new WarehouseError(`Row id ${id} for ${table} is outside the 64-bit range.`);
  }
  return value;
}

/** Throws a WarehouseError (naming table, column and row id, never the value) for a misfit. */
export function assertValueFits(
  value: unknown,
  type: ColumnType,
  table: string,
  column: string,
  rowId: unknown,
): void {
  if (!valueFits(value, type)) {
    throw new WarehouseError(
      `Value of ${table}.${column} in row id ${String(rowId)} does not fit the column's type ` +
        `${type} (got a ${Array.isArray(value) ? 'list' : typeof value}); nothing of this page was stored.`,
      {
        hint: 'The column should have been widened first; this is a bug in ocs-sync, please report it.',
      },
    );
  }
}

/** A 64-bit integer read exactly (bigint) as a number when it is safe, else kept as bigint. */
export function narrowInteger(value: bigint): number | bigint {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : value;
}
