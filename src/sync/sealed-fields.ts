/**
 * Which fields hold sealed values. The server publishes this in one place only: the description of
 * each sealed field in its export OpenAPI ("marked" fields). The manifest just says a resource has
 * some (`secret: true`). So a field is sealed when the schema marks it, or when one of its values
 * has a sealed value's shape ("detected" fields: a schema not served, or a server newer than its
 * schema). Pure: the engine does the I/O and keeps the state between runs.
 */
import type { ColumnSpec, Row, SchemaChange, SealedFields } from '../interfaces.js';
import type { SecretPolicy } from '../sealing/policy.js';
import { sealedColumnType } from '../sealing/policy.js';
import { isSealedToken, mayBeSealedToken } from '../sealing/detect.js';
import { widenColumnType } from '../column-types.js';
import { isSafeFieldName } from '../names.js';

export const NO_SEALED_FIELDS: SealedFields = { marked: new Set(), all: new Set() };

/** Fields not in `known` that carry a sealed value in one of the rows, in first-seen order. */
export function detectSealedFields(rows: readonly Row[], known: ReadonlySet<string>): string[] {
  const found: string[] = [];
  for (const row of rows) {
    for (const field in row) {
      // Runs on every value of every page: the cheap test first.
      const value = row[field];
      if (typeof value !== 'string' || !mayBeSealedToken(value)) continue;
      // A field whose name is refused is never stored, so never treated as sealed either.
      if (known.has(field) || found.includes(field) || !isSafeFieldName(field)) continue;
      if (isSealedToken(value)) found.push(field);
    }
  }
  return found;
}

/**
 * The columns sealed fields need under a policy (`plaintext`: JSON, else text): added when
 * missing, widened when narrower. A field whose values are all null so far gets its column too, so
 * an opened value never lands in a column typed from a plain value.
 */
export function planSealedColumns(
  table: string,
  existing: readonly ColumnSpec[],
  sealed: Iterable<string>,
  policy: SecretPolicy,
): { columns: ColumnSpec[]; changes: SchemaChange[] } {
  const columns = existing.map((column) => ({ ...column }));
  const changes: SchemaChange[] = [];
  const wanted = sealedColumnType(policy);
  for (const name of sealed) {
    const have = columns.find((column) => column.name === name);
    if (!have) {
      columns.push({ name, type: wanted });
      changes.push({ kind: 'add_column', table, column: name, toType: wanted, reason: 'rows' });
      continue;
    }
    const target = widenColumnType(have.type, wanted);
    if (target !== have.type) {
      changes.push({
        kind: 'widen_column',
        table,
        column: name,
        fromType: have.type,
        toType: target,
        reason: 'value',
      });
      have.type = target;
    }
  }
  return { columns, changes };
}

/** Sealed fields per resource as kept in the warehouse state (a JSON object of lists). */
export function parseSealedFieldsState(text: string | undefined): Map<string, Set<string>> {
  const result = new Map<string, Set<string>>();
  if (text === undefined) return result;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return result;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return result;
  for (const [resource, fields] of Object.entries(parsed as Record<string, unknown>)) {
    if (!Array.isArray(fields)) continue;
    result.set(resource, new Set(fields.filter((field) => typeof field === 'string')));
  }
  return result;
}

export function formatSealedFieldsState(fields: ReadonlyMap<string, ReadonlySet<string>>): string {
  return JSON.stringify(
    Object.fromEntries(
      [...fields]
        .filter(([, names]) => names.size > 0)
        .map(([resource, names]) => [resource, [...names]]),
    ),
  );
}

/**
 * A sealed value the server sealed again (each export seals afresh) or the `reseal` policy sealed
 * again is new text for the same content. For a row whose every other field is what is stored,
 * the stored text is kept, so a full refresh does not make a new history version (and audit
 * entry) of every such row. A row with any other field changed (an edit moves `updated_at` on the
 * server) takes the new text. `hash` gives a row's content hash over the columns that are not
 * sealed; `stored` are the stored rows of the page's ids.
 */
export function keepStoredSealedValues(
  rows: readonly Row[],
  stored: readonly Row[],
  sealed: readonly string[],
  hash: (row: Row) => string,
): Row[] {
  if (stored.length === 0) return [...rows];
  const byId = new Map(stored.map((row) => [String(row.id), row]));
  return rows.map((row) => {
    const before = byId.get(String(row.id));
    if (!before) return row;
    const sameSealedNulls = sealed.every(
      (field) => (row[field] === null || row[field] === undefined) === (before[field] === null),
    );
    if (!sameSealedNulls || hash(row) !== hash(before)) return row;
    const kept: Row = { ...row };
    for (const field of sealed) {
      if (Object.prototype.hasOwnProperty.call(row, field)) kept[field] = before[field];
    }
    return kept;
  });
}
