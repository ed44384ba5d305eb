/**
 * The two text forms of a date-time. SQLite stores every `datetime` column in ONE fixed-width UTC
 * form, `YYYY-MM-DDTHH:MM:SS.ffffffZ` (always six fraction digits), so that text order is time
 * order; the server writes the varying form Python's isoformat gives (`Z`, fraction only when
 * non-zero, six digits when present). PostgreSQL keeps timestamptz and renders the server's form
 * with isoTextSql.
 */

const ISO_DATE_TIME =
  /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/** The UTC forms (`Z`, `+00:00`, `-00:00`) with at most six fraction digits: no arithmetic needed. */
const UTC_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]00:00)$/;

/** What follows the fraction digits (none to six) to make the fixed form, by their number. */
const FRACTION_COMPLETION = ['.000000Z', '00000Z', '0000Z', '000Z', '00Z', '0Z', 'Z'];

/**
 * Any ISO 8601 date-time with `Z` or an offset (up to nine fraction digits, rounded to
 * microseconds as PostgreSQL does) as the fixed-width UTC form. Throws a RangeError on anything
 * else. Runs for every date-time value written to SQLite: the UTC forms the server and most
 * clients write take one regex test (no capture groups, no match array) and at most one
 * concatenation. A test is cheaper than reading the characters one by one with charCodeAt, which
 * measured slower than the regex on Node 20.
 */
export function toSortableUtc(text: string): string {
  if (!UTC_DATE_TIME.test(text)) return toSortableUtcByPattern(text);
  const length = text.length;
  const zoneStart = text.charCodeAt(length - 1) === 90 /* Z */ ? length - 1 : length - 6;
  const fractionDigits = zoneStart === 19 ? 0 : zoneStart - 20;
  if (fractionDigits === 6 && zoneStart === length - 1) return text;
  return text.slice(0, zoneStart) + FRACTION_COMPLETION[fractionDigits]!;
}

/**
 * toSortableUtc by the general path alone (match groups and Date arithmetic), for the forms the
 * fast path leaves to it. Exported so tests can hold the fast path to it.
 */
export function toSortableUtcByPattern(text: string): string {
  const match = ISO_DATE_TIME.exec(text);
  if (!match)
    throw new RangeError(`Not an ISO 8601 date-time with an offset: ${text.slice(0, 40)}`);
  const [, day, clock, fraction = '', offset] = match as unknown as [
    string,
    string,
    string,
    string | undefined,
    string,
  ];
  const utc = offset === 'Z' || offset === '+00:00' || offset === '-00:00';
  if (utc && fraction.length <= 6) return `${day}T${clock}.${fraction.padEnd(6, '0')}Z`;
  let micros =
    fraction.length <= 6
      ? Number(fraction.padEnd(6, '0'))
      : Math.round(Number(fraction.padEnd(9, '0')) / 1000);
  let milliseconds = Date.parse(`${day}T${clock}Z`);
  if (!utc) {
    const sign = offset.startsWith('-') ? -1 : 1;
    const minutes = Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4, 6));
    milliseconds -= sign * minutes * 60_000;
  }
  if (micros === 1_000_000) {
    micros = 0;
    milliseconds += 1000;
  }
  if (!Number.isFinite(milliseconds)) {
    throw new RangeError(`Not a real date-time: ${text.slice(0, 40)}`);
  }
  return `${new Date(milliseconds).toISOString().slice(0, 19)}.${String(micros).padStart(6, '0')}Z`;
}

const SORTABLE_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/**
 * The server's own form of a date-time (given in the fixed form, or any form toSortableUtc
 * takes): UTC with `Z`, the fraction only when it is not zero, six digits when present, e.g.
 * `2026-11-20T10:00:00Z`, `2026-11-20T10:00:00.123456Z`.
 */
export function toServerTimestamp(text: string): string {
  const sortable = toSortableUtc(text);
  return sortable.endsWith('.000000Z') ? `${sortable.slice(0, 19)}Z` : sortable;
}

/** The server's own form: `Z`, and six fraction digits only when the fraction is not zero. */
const SERVER_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?Z$/;

/** Whether a date-time text is already in the server's own form (one regex test). */
export function isServerTimestamp(text: string): boolean {
  return SERVER_TIMESTAMP.test(text) && !text.endsWith('.000000Z');
}

/** A date-time text as a datetime column gives it back; text that is no date-time as it is. */
export function servedTimestamp(text: string): string {
  if (isServerTimestamp(text)) return text;
  try {
    return toServerTimestamp(text);
  } catch {
    // Not a date-time after all: the column keeps the text as it is.
    return text;
  }
}

/** Whether text is already in the fixed form (a cheap check for readers). */
export function isSortableUtc(text: string): boolean {
  return SORTABLE_UTC.test(text);
}

/** Now, in the fixed form (our own time columns use it too, so they sort with the data's). */
export function nowSortableUtc(): string {
  return `${new Date().toISOString().slice(0, 23)}000Z`;
}

/** The forms databases write that toSortableUtc does not take: a space, `+00`, `+0130`, no zone. */
const LOOSE_TIMESTAMP =
  /^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d(?:\.\d{1,9})?)(Z|[+-]\d\d(?::?\d\d)?)?$/;

/**
 * A stored `updated_at` in one fixed form, `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC, six fraction
 * digits), so the same instant compares equal whichever form the database or server wrote.
 * Text that is not a timestamp is kept as it is.
 */
export function canonicalTimestamp(text: string): string {
  const match = LOOSE_TIMESTAMP.exec(text.trim());
  if (!match) return text;
  const [, date, time, zone = 'Z'] = match;
  const offset =
    zone === 'Z'
      ? zone
      : zone.length === 3
        ? `${zone}:00`
        : zone.replace(/^([+-]\d\d)(\d\d)$/, '$1:$2');
  try {
    return toSortableUtc(`${date}T${time}${offset}`);
  } catch {
    return text;
  }
}
