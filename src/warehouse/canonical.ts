/**
 * The canonical form of a row's content: the text whose SHA-256 is a history version's
 * `_content_hash` and, with audit on, the digest its chain entry commits to. It is defined from
 * the values as the server sent them (after the secrets policy), never from a dialect's rendering,
 * so the same data gives the same text on SQLite and PostgreSQL, and it is what `audit verify`
 * recomputes from the stored values read back. docs/audit.md ("The canonical form") states it
 * byte for byte; the rules that make a stored value read back to the same text are:
 *
 * - a number that is an integer is written as the digits of that integer (a double past 2^53 as
 *   the integer its shortest round-trip decimal names, which is what `numeric`, `jsonb` and JSON
 *   text give back); any other number in ECMAScript's shortest round-trip form;
 * - text is written without U+0000 and with lone surrogates as U+FFFD, as PostgreSQL stores it;
 * - a value of a date-time column in the server's own form (UTC, `Z`, six fraction digits only
 *   when not zero), as every dialect gives a date-time back;
 * - null fields are left out, so a column added later (null in old versions) changes nothing, and
 *   a widened column gives back the same value, so old digests survive schema changes;
 * - a row served under a team's chatbot choice has one more key, `_ocs_served_under`, the
 *   choice's selection key: the same data served under another choice is another version, so the
 *   key that decides whether a missing row was deleted is itself chained (no data field can be
 *   named so: `_ocs` names are ours).
 */
import type { ColumnSpec, Row } from '../interfaces.js';
import { recordByName } from '../names.js';
import { SERVED_UNDER_COLUMN } from './table-definitions.js';
import { isServerTimestamp, servedTimestamp } from '../timestamps.js';
import { sha256Hex } from './values.js';

type WellFormedString = string & { isWellFormed?: () => boolean };
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

function isWellFormed(text: string): boolean {
  const candidate = text as WellFormedString;
  return candidate.isWellFormed ? candidate.isWellFormed() : !LONE_SURROGATE.test(text);
}

/**
 * Text UTF-8 can carry: lone surrogates (which have no UTF-8 form) become U+FFFD, as SQLite
 * would otherwise store them as three bytes that read back as three U+FFFD. The same string when
 * well formed (nearly always; one native check).
 */
export function wellFormedText(text: string): string {
  return isWellFormed(text) ? text : text.replace(LONE_SURROGATES, '\uFFFD');
}

/** Text as PostgreSQL can hold it: no NUL; lone surrogates (no UTF-8 for them) become U+FFFD. */
export function storableText(text: string): string {
  return wellFormedText(text.includes('\u0000') ? text.replaceAll('\u0000', '') : text);
}

/** storableText on every string and object key at every depth; the same object when unchanged. */
export function storableJsonValue(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) {
    let changed = false;
    const cleaned = value.map((item) => {
      const next = storableJsonValue(item);
      if (next !== item) changed = true;
      return next;
    });
    return changed ? cleaned : value;
  }
  if (value !== null && typeof value === 'object') {
    let changed = false;
    // No prototype: a key `__proto__` in the server's JSON is a key like any other.
    const cleaned = recordByName<unknown>();
    for (const [key, item] of Object.entries(value)) {
      const cleanKey = storableText(key);
      const next = storableJsonValue(item);
      if (cleanKey !== key || next !== item) changed = true;
      cleaned[cleanKey] = next;
    }
    return changed ? cleaned : value;
  }
  return value;
}

/**
 * The digits of the integer a double names by its shortest round-trip decimal text: `1e21` ->
 * `1000000000000000000000`, `2**60` -> `1152921504606847000` (as PostgreSQL's numeric and jsonb
 * read `1.152921504606847e+18`). For a safe integer, its own digits.
 */
export function integralNumberText(value: number): string {
  const text = JSON.stringify(value);
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i.exec(text);
  if (!match) return BigInt(value).toString();
  const [, sign, whole, fraction = '', exponent = '0'] = match;
  const shift = Number(exponent) - fraction.length;
  const digits = BigInt(`${whole}${fraction}`);
  const magnitude = shift >= 0 ? digits * 10n ** BigInt(shift) : digits / 10n ** BigInt(-shift);
  return (sign === '-' && magnitude !== 0n ? -magnitude : magnitude).toString();
}

function canonicalNumber(value: number): string {
  if (!Number.isFinite(value)) return 'null';
  // JSON.stringify writes every safe integer and every fraction as wanted; -0 as 0.
  return Number.isSafeInteger(value) || !Number.isInteger(value)
    ? JSON.stringify(value)
    : integralNumberText(value);
}

/** JSON with object keys sorted (UTF-16 code units) at every depth, so equal content gives equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'number':
      return canonicalNumber(value);
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
      const entries = Object.keys(value)
        .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
        .sort()
        .map(
          (key) =>
            `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`,
        );
      return `{${entries.join(',')}}`;
    }
    default:
      return 'null';
  }
}

/** `\u0000` or a lone surrogate, as JSON.stringify escapes them. */
const SUSPECT_JSON_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Whether JSON text written by JSON.stringify holds a NUL or a lone surrogate (written only as
 * `\u` escapes, so most texts are cleared by one `includes`).
 */
export function hasUnstorableEscape(jsonText: string): boolean {
  return jsonText.includes('\\u') && SUSPECT_JSON_ESCAPE.test(jsonText);
}

/**
 * A row's canonical text: `{"field":value,...}` over the non-null data fields and, when the row
 * was served under a chatbot choice, its key (`servedUnder`), keys sorted.
 */
export type RowCanonicalizer = (row: Row, servedUnder?: string | null) => string;

/**
 * Builds a RowCanonicalizer once per column list: the top-level keys are sorted and quoted once,
 * not per row. Text is cleaned only when JSON.stringify wrote a NUL or a lone surrogate as an
 * escape, which almost no row has.
 */
export function rowCanonicalizer(columns: readonly ColumnSpec[]): RowCanonicalizer {
  const sorted = [...columns, { name: SERVED_UNDER_COLUMN, type: 'text' } as const].sort(
    (left, right) => (left.name < right.name ? -1 : left.name > right.name ? 1 : 0),
  );
  const names = sorted.map((column) => column.name);
  const prefixes = names.map((name) => `${JSON.stringify(name)}:`);
  const dateTimes = sorted.map((column) => column.type === 'datetime');
  const servedUnderAt = names.indexOf(SERVED_UNDER_COLUMN);
  const build = (row: Row, servedUnder: string | null | undefined, clean: boolean): string => {
    let text = '{';
    for (let index = 0; index < names.length; index += 1) {
      let value = index === servedUnderAt ? servedUnder : row[names[index]!];
      if (value === null || value === undefined) continue;
      if (dateTimes[index] && typeof value === 'string' && !isServerTimestamp(value)) {
        value = servedTimestamp(value);
      }
      if (clean) value = storableJsonValue(value);
      if (text.length > 1) text += ',';
      text += prefixes[index]! + canonicalJson(value);
    }
    return `${text}}`;
  };
  return (row, servedUnder) => {
    const text = build(row, servedUnder, false);
    return hasUnstorableEscape(text) ? build(row, servedUnder, true) : text;
  };
}

/**
 * A function giving the sha256 (hex) of a row's canonical text: a history version's
 * `_content_hash`, and the digest of its audit chain entry.
 */
export function rowContentHasher(
  columns: readonly ColumnSpec[],
): (row: Row, servedUnder?: string | null) => string {
  const canonical = rowCanonicalizer(columns);
  return (row, servedUnder) => sha256Hex(canonical(row, servedUnder));
}

export function rowContentHash(
  row: Row,
  columns: readonly ColumnSpec[],
  servedUnder?: string | null,
): string {
  return rowContentHasher(columns)(row, servedUnder);
}
