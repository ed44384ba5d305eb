/**
 * Two text forms of a UTC instant. The sortable form (`YYYY-MM-DDTHH:MM:SS.ffffffZ`, always six
 * fraction digits) orders as time when compared as text; the server form is what the export
 * server writes in rows (`Z`, fraction only when non-zero, then six digits).
 */
const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** Microseconds since the epoch, or undefined when the text is no ISO 8601 date-time. */
function toMicros(text: string): number | undefined {
  const match = ISO_8601.exec(text.trim());
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, fraction, offset] = match;
  const millis = Date.UTC(
    Number(year),
    Number(month) - 1,
    Number(day),
    Number(hour),
    Number(minute),
    Number(second),
  );
  if (!Number.isFinite(millis)) return undefined;
  // Digits past the sixth are cut, as the server's microsecond clock never writes them.
  let micros = millis * 1000 + Number((fraction ?? '').slice(0, 6).padEnd(6, '0'));
  if (offset && offset.toUpperCase() !== 'Z') {
    const digits = offset.slice(1).replace(':', '');
    const minutes = Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4) || '0');
    micros -= (offset.startsWith('-') ? -1 : 1) * minutes * 60_000_000;
  }
  return micros;
}

function formatMicros(micros: number, fraction: 'always' | 'when-non-zero'): string {
  const remainder = ((micros % 1_000_000) + 1_000_000) % 1_000_000;
  const base = new Date((micros - remainder) / 1000).toISOString().slice(0, 19);
  if (remainder === 0 && fraction === 'when-non-zero') return `${base}Z`;
  return `${base}.${String(remainder).padStart(6, '0')}Z`;
}

/** Any ISO 8601 date-time (an offset or Z; none reads as UTC) in the fixed sortable form. */
export function toSortableUtc(text: string): string {
  const micros = toMicros(text);
  return micros === undefined ? text : formatMicros(micros, 'always');
}

/** A date-time (the sortable form or any ISO 8601) in the server's form. */
export function toServerTimestamp(text: string): string {
  const micros = toMicros(text);
  return micros === undefined ? text : formatMicros(micros, 'when-non-zero');
}
