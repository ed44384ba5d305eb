import type { ColumnType } from '../interfaces.js';

/** ISO 8601 date-time with an offset or Z, as the server writes them. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** The narrowest column type that holds this value; undefined for null (fits anything). */
export function inferColumnType(value: unknown): ColumnType | undefined {
  if (value === null || value === undefined) return undefined;
  switch (typeof value) {
    case 'boolean':
      return 'boolean';
    case 'bigint':
      return 'integer';
    case 'number':
      return Number.isInteger(value) ? 'integer' : 'number';
    case 'string':
      if (DATE_TIME.test(value)) return 'datetime';
      if (DATE.test(value)) return 'date';
      return 'text';
    default:
      return 'json';
  }
}

/** Whether a value can be stored in a column of this type without losing anything. */
export function valueFits(value: unknown, type: ColumnType): boolean {
  if (value === null || value === undefined || type === 'json') return true;
  switch (type) {
    case 'integer':
      return typeof value === 'bigint' || (typeof value === 'number' && Number.isInteger(value));
    case 'number':
      return typeof value === 'number' || typeof value === 'bigint';
    case 'boolean':
      return typeof value === 'boolean';
    case 'text':
      return typeof value === 'string';
    case 'datetime':
      return typeof value === 'string' && DATE_TIME.test(value);
    case 'date':
      return typeof value === 'string' && DATE.test(value);
  }
}

/**
 * The narrowest type that holds values of both types. Columns only ever move up this lattice:
 * integer -> number -> json; boolean -> json; date | datetime -> text -> json.
 */
export function widenColumnType(current: ColumnType, incoming: ColumnType): ColumnType {
  if (current === incoming) return current;
  const numeric: ColumnType[] = ['integer', 'number'];
  if (numeric.includes(current) && numeric.includes(incoming)) return 'number';
  const textual: ColumnType[] = ['date', 'datetime', 'text'];
  if (textual.includes(current) && textual.includes(incoming)) return 'text';
  return 'json';
}

/** True when `to` is reachable from `from` by widening (so a migration never narrows). */
export function isWidening(from: ColumnType, to: ColumnType): boolean {
  return from !== to && widenColumnType(from, to) === to;
}
