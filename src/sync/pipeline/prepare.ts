/**
 * The stages a parsed page goes through before it is written, in order: excluded fields out,
 * sealed fields found (new ones learned by the run), the secrets policy applied (values opened
 * on the pool of threads), the table's columns planned (new columns, widening) and applied by
 * the run, and, under `sealed`/`reseal` with history, unchanged rows keep their stored sealed
 * text. Each stage that changes the warehouse first lets the walk's pages in flight commit.
 */
import { UnsafeNameError } from '../../errors.js';
import type { ColumnSpec, Row, SchemaChange, StoredRow } from '../../interfaces.js';
import { isSafeFieldName } from '../../names.js';
import type { OpenedValues, OpeningPolicy } from '../../sealing/open-values.js';
import { applySealingPolicy, type SealingKeys, type SecretPolicy } from '../../sealing/policy.js';
import { rowContentHasher } from '../../warehouse/canonical.js';
import { planColumnsForRows, withoutFields } from '../plan.js';
import { detectSealedFields, keepStoredSealedValues, planSealedColumns } from '../sealed-fields.js';

/** A resource's sealed fields as a page sees them: marked by the schema, and all known. */
export interface SealedSets {
  marked: ReadonlySet<string>;
  all: ReadonlySet<string>;
}

/**
 * What preparing a page asks of the run, which owns the warehouse's schema and the keys. Asked
 * from the page thread, each question crosses to the sync's thread as it is (messages.ts): a new
 * one is a method here, its use below, and its answer in walk.ts's pageHost. Methods only, of
 * data that crosses threads (structured clone) both ways.
 */
export interface PageHost {
  /** Fields found holding sealed values the run did not know; returns the resource's new sets. */
  learnSealedFields(fields: string[]): Promise<SealedSets>;
  /** Applies schema changes to the warehouse; returns the table's columns after them. */
  applySchemaChanges(changes: SchemaChange[], columns: ColumnSpec[]): Promise<ColumnSpec[]>;
  /** Opens sealed values (the run's pool of threads). */
  openSealedValues(policy: OpeningPolicy, tokens: readonly string[]): Promise<OpenedValues>;
  /** The stored rows of these ids (for stable sealed values). */
  readRowsById(columns: readonly ColumnSpec[], ids: string[]): Promise<StoredRow[]>;
}

/** What stays the same for every page of a walk. */
export interface PageRules {
  resource: string;
  excludedFields: readonly string[];
  policy: SecretPolicy;
  keys: SealingKeys;
  /** History versions are kept for the resource (audit included). */
  history: boolean;
}

/** What a walk's pages change as they go: the table's columns and the known sealed fields. */
export interface WalkColumns {
  columns: ColumnSpec[];
  sealed: SealedSets;
}

export interface PreparedPage {
  /** The rows as they are written (refused fields removed). */
  rows: Row[];
  /** The table's columns for them. */
  columns: ColumnSpec[];
  /** Fields refused for their names (a warning each, once per walk). */
  refusedFields: string[];
}

/**
 * Runs the stages on one page's rows. `settle` waits for the walk's pages in flight to commit;
 * it is called before anything that changes the warehouse. Updates `state` as the run decides.
 */
export async function preparePage(
  rows: Row[],
  rules: PageRules,
  state: WalkColumns,
  host: PageHost,
  settle: () => Promise<void>,
  signal?: AbortSignal,
): Promise<PreparedPage> {
  const { resource, excludedFields, policy } = rules;
  // An excluded field is never stored, so never opened either.
  rows = withoutFields(rows, [...excludedFields]);
  const found = detectSealedFields(rows, state.sealed.all);
  if (found.length > 0) {
    await settle();
    state.sealed = await host.learnSealedFields(found);
  }
  if (state.sealed.all.size > 0) {
    // Opened on the pool's threads: other walks go on meanwhile.
    rows = await applySealingPolicy(resource, rows, state.sealed, policy, rules.keys, {
      opener: { open: (opening, tokens) => host.openSealedValues(opening, tokens) },
      signal,
    });
    const sealedPlan = planSealedColumns(
      resource,
      state.columns,
      [...state.sealed.all].filter(
        (field) => isSafeFieldName(field) && !excludedFields.includes(field),
      ),
      policy,
    );
    if (sealedPlan.changes.length > 0) {
      await settle();
      state.columns = await host.applySchemaChanges(sealedPlan.changes, sealedPlan.columns);
    }
  }
  const rowPlan = planColumnsForRows(resource, state.columns, rows);
  if (rowPlan.changes.length > 0) {
    await settle();
    state.columns = await host.applySchemaChanges(rowPlan.changes, rowPlan.columns);
  }
  if (state.sealed.all.size > 0) {
    rows = await stableSealedValues(rules, state, rows, host, settle);
  }
  return {
    rows: withoutFields(rows, rowPlan.refusedFields),
    columns: state.columns,
    refusedFields: rowPlan.refusedFields,
  };
}

/** The warning a refused field name gives (once per walk). */
export function refusedFieldWarning(resource: string, field: string): string {
  return new UnsafeNameError('field', field, resource).message;
}

/**
 * Under the `sealed` and `reseal` policies, sealed text changes on every export for the same
 * content: rows whose other fields are as stored keep their stored sealed text (history only,
 * where it would make a version of every such row on every full refresh).
 */
async function stableSealedValues(
  rules: PageRules,
  state: WalkColumns,
  rows: Row[],
  host: PageHost,
  settle: () => Promise<void>,
): Promise<Row[]> {
  const { policy, history } = rules;
  if (policy !== 'sealed' && policy !== 'reseal') return rows;
  if (!history || rows.length === 0) return rows;
  const { columns } = state;
  const kept = [...state.sealed.all].filter((field) =>
    columns.some((column) => column.name === field),
  );
  if (kept.length === 0) return rows;
  // A row of the page in flight may be one of these.
  await settle();
  const stored = await host.readRowsById(
    columns,
    rows.map((row) => String(row.id)),
  );
  const others = rowContentHasher(columns.filter((column) => !kept.includes(column.name)));
  return keepStoredSealedValues(rows, stored as Row[], kept, others);
}
