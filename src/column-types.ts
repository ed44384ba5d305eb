import type { ColumnType } from './interfaces.js';

/**
 * ISO 8601 date-time with an offset or Z, as the server writes them, with every field in range
 * (year past 0, month 1-12, day 1-31, clock up to 23:59:59, offset under 16 h): one regex test
 * does what would otherwise take the test and reading a dozen digits back with charCodeAt, which
 * costs as much again. Only a day past 28 is left to check against its month.
 */
const DATE_TIME =
  /^(?!0000)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:Z|[+-](?:0\d|1[0-5]):[0-5]\d)$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** The number written by the digits at value[start, start + length); the caller knows they are digits. */
function digitsAt(value: string, start: number, length: number): number {
  let number = 0;
  for (let index = start; index < start + length; index++) {
    number = number * 10 + value.charCodeAt(index) - 48;
  }
  return number;
}

/**
 * Whether the `YYYY-MM-DD` at the start of a pattern-matched value names a real day. A string can
 * match the pattern and still not be a date (2026-02-30); PostgreSQL refuses such a value for a
 * date or timestamptz column, so it must widen the column to text rather than fail the page.
 * Reads digits in place: this runs for every date value of every row.
 */
function isRealDay(value: string): boolean {
  const year = digitsAt(value, 0, 4);
  const month = digitsAt(value, 5, 2);
  const day = digitsAt(value, 8, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  return day <= 28 || day <= daysInMonth(year, month);
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Days in `month` (1-12) of `year`. */
function daysInMonth(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!;
}

/** A date-time every dialect stores as a date-time: a real day and clock, an offset under 16 h. */
function isDateTime(value: string): boolean {
  if (!DATE_TIME.test(value)) return false;
  // The pattern has checked every field's range but a day's against its month.
  const day = digitsAt(value, 8, 2);
  return day <= 28 || day <= daysInMonth(digitsAt(value, 0, 4), digitsAt(value, 5, 2));
}

function isDate(value: string): boolean {
  return DATE.test(value) && isRealDay(value);
}

/** An integer every dialect stores exactly as a 64-bit integer. */
export function isInt64(value: unknown): boolean {
  return typeof value === 'bigint'
    ? BigInt.asIntN(64, value) === value
    : typeof value === 'number' && Number.isSafeInteger(value);
}

/** The narrowest column type that holds this value; undefined for null (fits anything). */
export function inferColumnType(value: unknown): ColumnType | undefined {
  if (value === null || value === undefined) return undefined;
  switch (typeof value) {
    case 'boolean':
      return 'boolean';
    case 'bigint':
      // Past 64 bits only JSON keeps every digit (SQLite would round it to a double).
      return isInt64(value) ? 'integer' : 'json';
    case 'number':
      // 1e20 is integral but no 64-bit integer: a double.
      return Number.isSafeInteger(value) ? 'integer' : 'number';
    case 'string':
      if (isDateTime(value)) return 'datetime';
      if (isDate(value)) return 'date';
      return 'text';
    default:
      return 'json';
  }
}

/** Whether a value can be stored in a column of this type without losing anything. */
export function valueFits(value: unknown, type: ColumnType): boolean {
  if (value === null || value === undefined || type === 'json') return true;
  switch (type) {
    case 'integer':
      return isInt64(value);
    case 'number':
      return typeof value === 'number';
    case 'decimal':
      return typeof value === 'number' || isInt64(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'text':
      return typeof value === 'string';
    case 'datetime':
      return typeof value === 'string' && isDateTime(value);
    case 'date':
      return typeof value === 'string' && isDate(value);
  }
}

/**
 * The narrowest type that holds values of both types. Columns only ever move up this lattice:
 * integer | number -> decimal -> json; boolean -> json; date | datetime -> text -> json.
 */
export function widenColumnType(current: ColumnType, incoming: ColumnType): ColumnType {
  if (current === incoming) return current;
  const numeric: ColumnType[] = ['integer', 'number', 'decimal'];
  if (numeric.includes(current) && numeric.includes(incoming)) return 'decimal';
  const textual: ColumnType[] = ['date', 'datetime', 'text'];
  if (textual.includes(current) && textual.includes(incoming)) return 'text';
  return 'json';
}

/** True when `to` is reachable from `from` by widening (so a migration never narrows). */
export function isWidening(from: ColumnType, to: ColumnType): boolean {
  return from !== to && widenColumnType(from, to) === to;
}
