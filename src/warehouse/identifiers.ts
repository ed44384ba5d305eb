import { UnsafeNameError } from '../errors.js';
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

/** The table that keeps every version of a resource's rows. */
export function historyTableName(table: string): string {
  return `${table}__history`;
}

export function isHistoryTableName(table: string): boolean {
  return table.endsWith('__history');
}
