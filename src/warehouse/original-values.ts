/**
 * Which values a warehouse column would give back differently from how the server sent them, and
 * what it would give back. Pure: both the sync (which keeps the original of such a value in
 * `_ocs_original_values`) and `serve` (which puts it back) use the same rules.
 *
 * - date-times come back in the server's form (`Z`, fraction only when non-zero): a value the
 *   server wrote another way (an offset, three fraction digits) is kept;
 * - text and JSON come back as the dialect's columns hold them (DialectRules.values: SQLite's
 *   text cannot hold lone surrogates; PostgreSQL's text and jsonb are in postgres/rules.ts).
 */
import type { ColumnSpec, ColumnType, OriginalValue, Row } from '../interfaces.js';
import type { StoredValueRules } from './dialect-rules.js';
import { isServerTimestamp, servedTimestamp } from '../timestamps.js';
import { sha256Hex, toJsonText } from './values.js';

export { servedTimestamp };

/** Whether a column of `type` gives this value back differently. Cheap for the common case. */
export function valueChangesInColumn(
  rules: StoredValueRules,
  type: ColumnType,
  value: unknown,
): boolean {
  if (value === null || value === undefined) return false;
  switch (type) {
    case 'datetime':
      return typeof value === 'string' && !isServerTimestamp(value);
    case 'text':
      return typeof value === 'string' && rules.textChanges(value);
    case 'json':
      return rules.jsonChanges(value);
    default:
      return false;
  }
}

/** What a column of `type` gives back for a value (as `serve` reads it). */
export function servedValue(rules: StoredValueRules, type: ColumnType, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'datetime':
      return typeof value === 'string' ? servedTimestamp(value) : value;
    case 'text':
      if (typeof value !== 'string') return value;
      return rules.text(value);
    case 'json':
      return rules.json === undefined ? value : rules.json(value);
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
  rules: StoredValueRules,
  columns: readonly ColumnSpec[],
  rows: readonly Row[],
): OriginalValue[] {
  const found: OriginalValue[] = [];
  // Once a page, not once a value: only these types ever give a value back differently.
  const changing = columns.filter(
    (column) =>
      column.type === 'datetime' ||
      column.type === 'text' ||
      (column.type === 'json' && rules.json !== undefined),
  );
  if (changing.length === 0) return found;
  for (const row of rows) {
    for (const column of changing) {
      const value = row[column.name];
      if (!valueChangesInColumn(rules, column.type, value)) continue;
      found.push({
        id: String(row.id),
        column: column.name,
        servedHash: servedValueHash(servedValue(rules, column.type, value)),
        original: toJsonText(value),
      });
    }
  }
  return found;
}
