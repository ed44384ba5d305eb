/**
 * The two text forms of a date-time. SQLite stores every `datetime` column in ONE fixed-width UTC
 * form, `YYYY-MM-DDTHH:MM:SS.ffffffZ` (always six fraction digits), so that text order is time
 * order; the server writes the varying form Python's isoformat gives (`Z`, fraction only when
 * non-zero, six digits when present). PostgreSQL keeps timestamptz and renders the server's form
 * with isoTextSql.
 */

const ISO_DATE_TIME =
  /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Any ISO 8601 date-time with `Z` or an offset (up to nine fraction digits, rounded to
 * microseconds as PostgreSQL does) as the fixed-width UTC form. Throws a RangeError on anything
 * else. Runs for every date-time value written to SQLite: the server's usual forms (UTC with
 * `Z`) take character checks and one concatenation.
 */
export function toSortableUtc(text: string): string {
  const digits = utcFractionDigits(text);
  if (digits === 6) return text;
  if (digits === 0) return `${text.slice(0, 19)}.000000Z`;
  if (digits > 0) return `${text.slice(0, text.length - 1)}${'0'.repeat(6 - digits)}Z`;
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

const DIGIT_POSITIONS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];

/**
 * For `YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z`, the number of fraction digits; -1 for anything else.
 * Character checks, not a regex: this runs for every date-time written (about 10x faster).
 */
function utcFractionDigits(text: string): number {
  const length = text.length;
  if (length < 20 || length > 27 || text.charCodeAt(length - 1) !== 90 /* Z */) return -1;
  if (length === 21) return -1; // a dot with no digit
  if (
    text.charCodeAt(4) !== 45 ||
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(10) !== 84 ||
    text.charCodeAt(13) !== 58 ||
    text.charCodeAt(16) !== 58
  ) {
    return -1;
  }
  for (const position of DIGIT_POSITIONS) {
    const code = text.charCodeAt(position);
    if (code < 48 || code > 57) return -1;
  }
  if (length === 20) return 0;
  if (text.charCodeAt(19) !== 46 /* . */) return -1;
  for (let position = 20; position < length - 1; position++) {
    const code = text.charCodeAt(position);
    if (code < 48 || code > 57) return -1;
  }
  return length - 21;
}

/**
 * The server's own form of a date-time (given in the fixed form, or any form toSortableUtc
 * takes): UTC with `Z`, the fraction only when it is not zero, six digits when present, e.g.
 * `2026-11-20T10:00:00Z`, `2026-11-20T10:00:00.123456Z`.
 */
export function toServerTimestamp(text: string): string {
  const sortable = toSortableUtc(text);
  return sortable.endsWith('.000000Z') ? `${sortable.slice(0, 19)}Z` : sortable;
}

/** Whether text is already in the fixed form (a cheap check for readers). */
export function isSortableUtc(text: string): boolean {
  return utcFractionDigits(text) === 6;
}

/** Now, in the fixed form (our own time columns use it too, so they sort with the data's). */
export function nowSortableUtc(): string {
  return `${new Date().toISOString().slice(0, 23)}000Z`;
}
