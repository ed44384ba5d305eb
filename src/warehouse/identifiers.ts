import { createHash } from 'node:crypto';
import { UnsafeNameError, WarehouseError } from '../errors.js';
import { isSafeFieldName, isSafeResourceName } from '../names.js';

// The engine checks names first; the warehouse checks again before any name reaches SQL.

export function assertSafeTableName(name: string): void {
  if (!isSafeResourceName(name)) throw new UnsafeNameError('resource', name, 'the warehouse');
}

export function assertSafeColumnName(name: string, table: string): void {
  if (!isSafeFieldName(name)) throw new UnsafeNameError('field', name, `table ${table}`);
}

/** Double-quoted identifier; only called on names that passed the checks above. */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** PostgreSQL cuts longer identifiers silently, so two long names could become one. */
const MAX_IDENTIFIER_LENGTH = 63;

/**
 * `base` + `suffix`, or, when that is too long for PostgreSQL, `base` cut short plus a hash of the
 * whole of it, so the name stays unique and the same on every dialect and every run.
 */
function suffixedIdentifier(base: string, suffix: string): string {
  const name = `${base}${suffix}`;
  if (name.length <= MAX_IDENTIFIER_LENGTH) return name;
  const hash = createHash('sha256').update(base).digest('hex').slice(0, 8);
  return `${base.slice(0, MAX_IDENTIFIER_LENGTH - suffix.length - hash.length - 1)}_${hash}${suffix}`;
}

/** The table that keeps every version of a resource's rows: `<table>__history`, at most 63 long. */
export function historyTableName(table: string): string {
  return suffixedIdentifier(table, '__history');
}

/**
 * The view of a resource's rows not marked deleted: `<table>__live`, at most 63 long. It sorts
 * right after its table, and a double underscore never starts a name the server gives a resource
 * in practice (`x__history` is ours already); a resource that does take such a name keeps its
 * table and the view is not created.
 */
export function liveViewName(table: string): string {
  return suffixedIdentifier(table, '__live');
}

/** The index ocs-sync keeps on one column of a resource table. */
export function columnIndexName(table: string, column: string): string {
  return suffixedIdentifier(`${table}__${column}`, '_idx');
}

/** The index on a history table's (id, _valid_to). */
export function historyIndexName(historyTable: string): string {
  return suffixedIdentifier(historyTable, '_by_id');
}

/**
 * Refuses a `<table>__history` that is not a history table (a resource of that very name), so
 * history versions never land in another resource's rows.
 */
export function assertHistoryTable(
  table: string,
  history: string,
  columns: ReadonlySet<string>,
): void {
  if (columns.has('_version_id')) return;
  throw new WarehouseError(
    `Cannot keep the history of ${table}: ${history} is already a resource table, not a history table.`,
    { hint: `Leave ${table} out of \`history\`, or exclude the resource named ${history}.` },
  );
}
