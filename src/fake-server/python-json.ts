/** JSON as the server (Django, Python) writes it: 64-bit ids with every digit, floats as `3.0`. */
import { stringify as stringifyLossless } from 'lossless-json';

const floatMarker = '\u0001ocs-float:';
const floatMarkerPattern = /"\\u0001ocs-float:(-?\d+)"/g;

/** Python writes floats with a point: integral values of float fields get `.0` back. */
export function markFloats(
  row: Record<string, unknown>,
  fields: Set<string>,
): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const field of fields) {
    const value = row[field];
    if (typeof value === 'number' && Number.isInteger(value) && Math.abs(value) < 1e16) {
      copy ??= { ...row };
      copy[field] = floatMarker + String(value);
    } else if (
      Array.isArray(value) &&
      value.some((item) => typeof item === 'number' && Number.isInteger(item))
    ) {
      copy ??= { ...row };
      copy[field] = value.map((item) =>
        typeof item === 'number' && Number.isInteger(item) && Math.abs(item) < 1e16
          ? floatMarker + String(item)
          : item,
      );
    }
  }
  return copy ?? row;
}

/** JSON as the server writes it: 64-bit ids with every digit, floats in Python's form. */
export function serializeJson(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    // Only bigint (ids past 2^53) makes JSON.stringify throw here; keep the plain path fast.
    if (!(error instanceof TypeError)) throw error;
    text = stringifyLossless(value) ?? 'null';
  }
  return text.includes('\\u0001ocs-float:') ? text.replace(floatMarkerPattern, '$1.0') : text;
}
