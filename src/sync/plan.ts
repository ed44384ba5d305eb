/**
 * Pure planning for the sync engine: which names are safe, which cursor to resume from, which
 * columns a table needs. No I/O here, so every rule is testable on its own.
 */
import type {
  ColumnSpec,
  ColumnType,
  CursorKind,
  ManifestEntry,
  Page,
  Row,
  SchemaChange,
} from '../interfaces.js';
import { isSafeFieldName } from '../names.js';
import { inferColumnType, valueFits, widenColumnType } from '../column-types.js';

/**
 * The cursor that resumes after `row` (REFERENCE.md, Paging): the server gives none on the last
 * page, so we build the same one it would have given.
 */
export function deriveCursor(kind: CursorKind, row: Row): string {
  const id = String(row.id);
  if (kind === 'pk') return id;
  const updatedAt = row.updated_at;
  if (typeof updatedAt !== 'string' || updatedAt === '') {
    throw new Error(`row id ${id} has no updated_at to resume from`);
  }
  // Written by hand so a 64-bit id keeps its exact digits.
  const json = `{"updated_at": ${JSON.stringify(updatedAt)}, "id": ${id}}`;
  return Buffer.from(json, 'utf8').toString('base64');
}

/** The cursor to store with this page: the server's when it gave one, else derived from the last row. */
export function cursorAfterPage(
  page: Page,
  kind: CursorKind,
  previous: string | null,
): string | null {
  if (page.cursor !== null) return page.cursor;
  const last = page.rows[page.rows.length - 1];
  return last === undefined ? previous : deriveCursor(kind, last);
}

/** Whether another page should be asked for after this one (a page, or what a parse said of it). */
export function hasNextPage(
  page: Pick<Page, 'bare' | 'hasMore'> & ({ rows: readonly unknown[] } | { rowCount: number }),
  limit: number,
): boolean {
  const rows = 'rows' in page ? page.rows.length : page.rowCount;
  if (page.bare) return rows >= limit;
  return page.hasMore && rows > 0;
}

export interface EntrySelection {
  selected: ManifestEntry[];
  /** Requested names the manifest does not have. */
  unknown: string[];
}

export function selectEntries(
  entries: ManifestEntry[],
  include: readonly string[] | undefined,
  exclude: readonly string[],
): EntrySelection {
  const names = new Set(entries.map((entry) => entry.resource));
  const wanted = include && include.length > 0 ? new Set(include) : undefined;
  const excluded = new Set(exclude);
  return {
    selected: entries.filter(
      (entry) => (!wanted || wanted.has(entry.resource)) && !excluded.has(entry.resource),
    ),
    unknown: [...(wanted ?? []), ...excluded].filter((name) => !names.has(name)),
  };
}

export interface TablePlan {
  /** The table's columns after the changes. */
  columns: ColumnSpec[];
  changes: SchemaChange[];
}

/**
 * Bring a table up to the desired columns: create it, add what is missing, widen what the
 * schema now declares wider. Never narrows, never drops: a column the schema no longer lists stays.
 */
export function planTable(
  table: string,
  existing: ColumnSpec[] | undefined,
  desired: ColumnSpec[],
  reason: SchemaChange['reason'],
): TablePlan {
  if (existing === undefined) {
    return {
      columns: desired,
      changes: [{ kind: 'create_table', table, columns: desired, reason }],
    };
  }
  const columns = existing.map((column) => ({ ...column }));
  const changes: SchemaChange[] = [];
  for (const want of desired) {
    const have = columns.find((column) => column.name === want.name);
    if (!have) {
      columns.push({ ...want });
      changes.push({ kind: 'add_column', table, column: want.name, toType: want.type, reason });
    } else {
      // The declared type, or the exact decimal holding it and the column's integers or doubles.
      // Never json on the schema's word alone: values widen a column further if they must.
      const target = widenColumnType(have.type, want.type);
      if (target !== have.type && (target === want.type || target === 'decimal')) {
        changes.push(widening(table, have, target, reason));
        have.type = target;
      }
    }
  }
  return { columns, changes };
}

export interface RowColumnPlan extends TablePlan {
  /** Fields refused because their names are unsafe; they are removed from the rows. */
  refusedFields: string[];
}

/**
 * Columns the rows of one page need beyond the table's: fields the schema did not announce, and
 * values that do not fit their column (the column widens; nothing is lost). A field whose values
 * are all null waits for its first value before it gets a column (null is what a missing column
 * reads as anyway).
 */
export function planColumnsForRows(
  table: string,
  existing: ColumnSpec[],
  rows: Row[],
): RowColumnPlan {
  // Each field's type so far (the table's, then as the rows widen it): one lookup a value.
  const typeOf = new Map(existing.map((column) => [column.name, column.type]));
  const needed = new Map<string, ColumnType>();
  const refused = new Set<string>();
  for (const row of rows) {
    for (const field in row) {
      if (field === 'id') continue;
      const value = row[field];
      const current = typeOf.get(field);
      let wanted: ColumnType | undefined;
      if (current === undefined) {
        if (refused.has(field)) continue;
        if (!isSafeFieldName(field)) {
          refused.add(field);
          continue;
        }
        wanted = inferColumnType(value);
      } else if (!valueFits(value, current)) {
        const inferred = inferColumnType(value);
        if (inferred !== undefined) wanted = widenColumnType(current, inferred);
      }
      if (wanted !== undefined) {
        needed.set(field, wanted);
        typeOf.set(field, wanted);
      }
    }
  }
  const columns = existing.map((column) => ({ ...column }));
  const changes: SchemaChange[] = [];
  for (const [name, type] of needed) {
    const have = columns.find((column) => column.name === name);
    if (!have) {
      columns.push({ name, type });
      changes.push({ kind: 'add_column', table, column: name, toType: type, reason: 'rows' });
    } else if (have.type !== type) {
      changes.push(widening(table, have, type, 'value'));
      have.type = type;
    }
  }
  return { columns, changes, refusedFields: [...refused] };
}

function widening(
  table: string,
  have: ColumnSpec,
  toType: ColumnType,
  reason: SchemaChange['reason'],
): SchemaChange {
  return { kind: 'widen_column', table, column: have.name, fromType: have.type, toType, reason };
}

/** Rows without the refused fields (a copy only when there is something to remove). */
export function withoutFields(rows: Row[], fields: string[]): Row[] {
  if (fields.length === 0) return rows;
  return rows.map((row) => {
    const copy = { ...row };
    for (const field of fields) delete copy[field];
    return copy;
  });
}

/** One line per change, for logs and the `stop` policy's message. */
export function describeSchemaChange(change: SchemaChange): string {
  switch (change.kind) {
    case 'create_table':
      return `new table ${change.table} (${change.columns?.length ?? 0} columns)`;
    case 'add_column':
      return `new column ${change.table}.${change.column} ${change.toType}`;
    case 'widen_column':
      return `column ${change.table}.${change.column} widens ${change.fromType} -> ${change.toType}`;
    case 'drop_column':
      return `column ${change.table}.${change.column} emptied and dropped (exclude_fields)`;
  }
}
