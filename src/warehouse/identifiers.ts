import { UnsafeNameError } from '../errors.js';

/** The only names we ever put in SQL as identifiers (the engine checks them first; we re-check). */
const SAFE_NAME = /^[a-z][a-z0-9_]{0,62}$/;

export function assertSafeTableName(name: string): void {
  if (!SAFE_NAME.test(name)) throw new UnsafeNameError('resource', name, 'the warehouse');
}

export function assertSafeColumnName(name: string, table: string): void {
  if (!SAFE_NAME.test(name)) throw new UnsafeNameError('field', name, `table ${table}`);
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
