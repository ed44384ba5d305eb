/**
 * The export API's wire rules, shared by the two servers ocs-sync runs (the fake for tests and
 * the demo, `serve` for restores).
 *
 * Row ids, timestamps and paging cursors exactly as the real export server writes and reads them
 * (see REFERENCE.md, "Paging"). Timestamps are kept as integer microseconds since the epoch so
 * `(updated_at, id)` compares exactly; a double holds them without loss until the year 2255.
 */
import { parse as parseLosslessJson } from 'lossless-json';
import type { CursorKind } from '../interfaces.js';

/** A row id: a number, or a bigint when it is past 2^53. Always normalized (see normalizeId). */
export type RowId = number | bigint;

export type DecodedCursor =
  { kind: 'pk'; id: RowId } | { kind: 'updated_at_id'; updatedAtMicros: number; id: RowId };

/** Thrown for a cursor the server would answer with `400 ["Invalid pagination cursor."]`. */
export class InvalidCursorError extends Error {
  constructor(reason: string) {
    super(`Invalid pagination cursor: ${reason}`);
    this.name = 'InvalidCursorError';
  }
}

/** The one canonical form of an id: a number when it is a safe integer, else a bigint. */
export function normalizeId(value: unknown): RowId | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : value;
  }
  if (typeof value === 'string' && /^[+-]?\d+$/.test(value)) return normalizeId(BigInt(value));
  return undefined;
}

/** Ids compare across number and bigint with the relational operators. */
export function compareIds(left: RowId, right: RowId): number {
  return left < right ? -1 : left > right ? 1 : 0;
}

/** Adds a small integer to an id, moving to bigint past 2^53. */
export function addToId(id: RowId, amount: number): RowId {
  if (typeof id === 'number' && Number.isSafeInteger(id + amount)) return id + amount;
  return normalizeId(BigInt(id) + BigInt(amount)) as RowId;
}

const isoTimestampPattern =
  /^(\d{4})-(\d{1,2})-(\d{1,2})[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:[.,](\d{1,6})\d*)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/**
 * Parses an ISO 8601 timestamp the way Django's `parse_datetime` does (offset optional; a naive
 * time is read as UTC, the server's time zone). Returns microseconds, or undefined when invalid.
 */
export function parseTimestamp(text: string): number | undefined {
  const match = isoTimestampPattern.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, fraction, offset] = match;
  const parts = [year, month, day, hour, minute, second ?? '0'].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const [y, mo, d, h, mi, s] = parts;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return undefined;
  const millis = Date.UTC(y, mo - 1, d, h, mi, s);
  // Date.UTC rolls 31 February into March: reject such dates as Python does.
  if (new Date(millis).getUTCDate() !== d) return undefined;
  let micros = millis * 1000 + (fraction ? Number(fraction.padEnd(6, '0')) : 0);
  if (offset && offset.toUpperCase() !== 'Z') {
    const sign = offset.startsWith('-') ? -1 : 1;
    const digits = offset.slice(1).replace(':', '');
    const offsetMinutes = Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4) || '0');
    micros -= sign * offsetMinutes * 60_000_000;
  }
  return micros;
}

/**
 * Formats microseconds as the server does in rows: UTC, microseconds only when non-zero, suffix
 * `Z` (`2026-11-20T10:00:00.123456Z`). With `'+00:00'` it matches Python's `isoformat()`, which
 * the server uses inside cursors.
 */
export function formatTimestamp(micros: number, suffix: 'Z' | '+00:00' = 'Z'): string {
  if (micros === lastFormattedMicros && suffix === 'Z') return lastFormatted;
  const fraction = ((micros % 1_000_000) + 1_000_000) % 1_000_000;
  const seconds = (micros - fraction) / 1_000_000;
  // Generating a million rows formats a million timestamps, mostly within the same second.
  if (seconds !== lastFormattedSeconds) {
    lastFormattedSeconds = seconds;
    lastFormattedBase = new Date(seconds * 1000).toISOString().slice(0, 19);
  }
  // Array.join gives a flat string (cheaper to keep a million of than a concatenation tree).
  const text =
    fraction === 0
      ? [lastFormattedBase, suffix].join('')
      : [lastFormattedBase, '.', String(fraction).padStart(6, '0'), suffix].join('');
  if (suffix === 'Z') {
    lastFormattedMicros = micros;
    lastFormatted = text;
  }
  return text;
}
let lastFormattedSeconds = Number.NaN;
let lastFormattedBase = '';
let lastFormattedMicros = Number.NaN;
let lastFormatted = '';

export function encodePkCursor(id: RowId): string {
  return String(id);
}

/** base64 of Python's `json.dumps({"updated_at": ..., "id": ...})`, as the server emits it. */
export function encodeUpdatedAtCursor(updatedAtMicros: number, id: RowId): string {
  const json = `{"updated_at": "${formatTimestamp(updatedAtMicros, '+00:00')}", "id": ${String(id)}}`;
  return Buffer.from(json, 'utf8').toString('base64');
}

function parseIdText(text: string): RowId {
  const id = normalizeId(text.trim());
  if (id === undefined) throw new InvalidCursorError('the id is not an integer');
  return id;
}

/** Reads a cursor sent by a client; throws InvalidCursorError where the server answers 400. */
export function decodeCursor(kind: CursorKind, cursor: string): DecodedCursor {
  if (kind === 'pk') {
    if (!/^\s*[+-]?\d+\s*$/.test(cursor)) throw new InvalidCursorError('not a decimal id');
    return { kind: 'pk', id: parseIdText(cursor) };
  }
  const compact = cursor.trim();
  // Standard or URL-safe alphabet, padding optional; Node's decoder would silently skip junk.
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(compact)) throw new InvalidCursorError('not base64');
  const text = Buffer.from(compact.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString(
    'utf8',
  );
  let decoded: unknown;
  try {
    // Integers keep every digit (64-bit ids), as Python's json does.
    decoded = parseLosslessJson(text, null, (digits) =>
      /^-?\d+$/.test(digits) ? (normalizeId(BigInt(digits)) as RowId) : Number(digits),
    );
  } catch {
    throw new InvalidCursorError('not JSON');
  }
  if (decoded === null || typeof decoded !== 'object' || Array.isArray(decoded)) {
    throw new InvalidCursorError('not a JSON object');
  }
  const { updated_at: updatedAt, id } = decoded as Record<string, unknown>;
  if (typeof updatedAt !== 'string') throw new InvalidCursorError('updated_at missing');
  const updatedAtMicros = parseTimestamp(updatedAt);
  if (updatedAtMicros === undefined) throw new InvalidCursorError('updated_at is not a timestamp');
  let rowId: RowId | undefined;
  if (typeof id === 'number' || typeof id === 'bigint') rowId = normalizeId(id);
  else if (typeof id === 'string') rowId = parseIdText(id);
  if (rowId === undefined) throw new InvalidCursorError('id is not an integer');
  return { kind: 'updated_at_id', updatedAtMicros, id: rowId };
}

/** The value Python's `int()` accepts, as the server parses `limit`; undefined when it does not. */
export function parsePythonInt(text: string): number | undefined {
  if (!/^\s*[+-]?\d+(?:_\d+)*\s*$/.test(text)) return undefined;
  return Number(text.replace(/_/g, '').trim());
}

/** The last value of a query parameter, as Django's `QueryDict` gives it; null when absent. */
export function lastParam(params: URLSearchParams, name: string): string | null {
  const values = params.getAll(name);
  return values.length === 0 ? null : values[values.length - 1]!;
}
