/**
 * Checks every dialect makes before it touches a table's shape. Pure: the dialects differ only in
 * the DDL they run afterwards.
 */
import { WarehouseError } from '../errors.js';
import type { ColumnSpec, ColumnType, SchemaChange } from '../interfaces.js';
import { RESERVED_COLUMNS } from '../names.js';
import { isWidening } from '../column-types.js';
import { assertSafeColumnName, assertSafeTableName } from './identifiers.js';

const LOGICAL_TYPES: ReadonlySet<string> = new Set<ColumnType>([
  'integer',
  'number',
  'decimal',
  'boolean',
  'text',
  'datetime',
  'date',
  'json',
]);

/** Every table and column name in a batch of changes is safe SQL, before any of it runs. */
export function assertSafeSchemaChanges(changes: readonly SchemaChange[]): void {
  for (const change of changes) {
    assertSafeTableName(change.table);
    if (change.column !== undefined) assertSafeColumnName(change.column, change.table);
    for (const column of change.columns ?? []) assertSafeColumnName(column.name, change.table);
  }
}

/** Data columns must be safe, not ours, listed once, and of a known logical type. */
export function checkDataColumns(table: string, columns: readonly ColumnSpec[]): void {
  const seen = new Set<string>();
  for (const column of columns) {
    assertSafeColumnName(column.name, table);
    // `__ocs_widening` is the temporary column SQLite widening copies through.
    if (
      column.name === 'id' ||
      RESERVED_COLUMNS.has(column.name) ||
      column.name.endsWith('__ocs_widening')
    ) {
      throw new WarehouseError(`Column name ${column.name} of ${table} is reserved by ocs-sync.`);
    }
    if (seen.has(column.name)) {
      throw new WarehouseError(`Column ${table}.${column.name} is listed twice.`);
    }
    if (!LOGICAL_TYPES.has(column.type)) {
      throw new WarehouseError(
        `Column ${table}.${column.name} has unknown type ${String(column.type)}.`,
      );
    }
    seen.add(column.name);
  }
}

export function requireColumn(change: SchemaChange): string {
  if (!change.column) {
    throw new WarehouseError(`A ${change.kind} change of ${change.table} names no column.`);
  }
  return change.column;
}

export function requireType(change: SchemaChange, type: ColumnType | undefined): ColumnType {
  if (!type || !LOGICAL_TYPES.has(type)) {
    throw new WarehouseError(
      `The ${change.kind} change of ${change.table}.${change.column} has no valid type.`,
    );
  }
  return type;
}

/**
 * Whether widening `column` from its stored type `current` to `to` has work to do (false when it
 * is already there); throws when the change was planned against another type or would narrow.
 */
export function wideningNeeded(
  change: SchemaChange,
  column: string,
  current: ColumnType,
  to: ColumnType,
): boolean {
  if (current === to) return false;
  if (change.fromType !== undefined && change.fromType !== current) {
    throw new WarehouseError(
      `Cannot widen ${change.table}.${column} from ${change.fromType}: the warehouse has it as ${current}.`,
    );
  }
  if (!isWidening(current, to)) {
    throw new WarehouseError(
      `Refusing to change ${change.table}.${column} from ${current} to ${to}: columns only widen.`,
    );
  }
  return true;
}

/** The key under which a dialect caches the statements it prepared for one page shape. */
export function pageShapeKey(
  table: string,
  columns: readonly ColumnSpec[],
  history: boolean,
): string {
  return `${table}\u0000${history}\u0000${columns.map((c) => `${c.name}:${c.type}`).join(',')}`;
}

/** The engine's column list for a page must be what the warehouse stores; checked once per shape. */
export function assertColumnsStored(
  table: string,
  columns: readonly ColumnSpec[],
  stored: readonly ColumnSpec[],
): void {
  const storedTypes = new Map(stored.map((column) => [column.name, column.type]));
  for (const column of columns) {
    assertSafeColumnName(column.name, table);
    if (storedTypes.get(column.name) !== column.type) {
      throw new WarehouseError(
        `Cannot write ${table}.${column.name} as ${column.type}: the warehouse has it as ` +
          `${storedTypes.get(column.name) ?? 'no such column'}; apply the schema changes first.`,
      );
    }
  }
}
