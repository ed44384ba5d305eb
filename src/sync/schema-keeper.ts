/**
 * The run's tables follow the server's schema: the OpenAPI document is read when the schema may
 * have moved, tables are created, evolved and (for an excluded field) emptied of a column, each
 * change recorded, reported and logged. The decisions are plan.ts's; this does the I/O.
 */
import { SchemaChangeStoppedError, UnsafeNameError } from '../errors.js';
import type {
  ColumnSpec,
  ExportSource,
  ManifestEntry,
  SchemaChange,
  Warehouse,
} from '../interfaces.js';
import type { Logger } from '../log.js';
import { isSafeResourceName, valueByName } from '../names.js';
import { repeatedEvents, type RepeatedKind } from '../repeated-events.js';
import { sealedColumnType, type SecretPolicy } from '../sealing/policy.js';
import { MARKED_SEALED_FIELDS_STATE_KEY } from '../warehouse/state-keys.js';
import { columnsFromOpenApi, type SchemaColumns } from './openapi-columns.js';
import { describeSchemaChange, planTable } from './plan.js';
import { parseSealedFieldsState } from './sealed-fields.js';
import type { SealedFieldBook } from './sealed-book.js';
import type { SyncEvents } from './run-types.js';

export const TEAM_TABLE = 'team';

/** Schema changes of one kind in a run: each at debug, one line for all (repeated-events.ts). */
const SCHEMA_CHANGE_KINDS: Record<Exclude<SchemaChange['kind'], 'drop_column'>, RepeatedKind> = {
  create_table: {
    level: 'info',
    message: 'Schema: new table',
    summary: (n) => `Schema: ${n} new tables`,
  },
  add_column: {
    level: 'info',
    message: 'Schema: new column',
    summary: (n) => `Schema: ${n} new columns`,
  },
  widen_column: {
    level: 'info',
    message: 'Schema: column widens',
    summary: (n) => `Schema: ${n} columns widen`,
  },
};

export interface SchemaKeeperOptions {
  source: ExportSource;
  warehouse: Warehouse;
  logger: Logger;
  events?: SyncEvents;
  /** The run's: a stop cuts the schema's request short. */
  signal?: AbortSignal;
  /** Fields never stored, per resource; a stored column of one is dropped. */
  excludeFields?: Readonly<Record<string, readonly string[]>>;
  onSchemaChange: 'evolve' | 'stop';
  acceptSchemaChange?: boolean;
  sealed: SealedFieldBook;
  policyOf(entry: ManifestEntry): SecretPolicy;
  /** A run-level problem to report (a refused field name in the schema). */
  problem(message: string): void;
}

export class SchemaKeeper {
  /** Every change applied in this run, in order. */
  readonly changes: SchemaChange[] = [];
  /** The OpenAPI document, when this run fetched it (kept for `serve`). */
  openApiDocument: unknown;
  private schema: SchemaColumns | undefined;
  private checksums: { from: string | null; to: string | null } = { from: null, to: null };
  /** Tables as prepare() found them, each taken once by ensureTable (a change forgets them). */
  private readonly described = new Map<string, ColumnSpec[] | undefined>();

  constructor(private readonly options: SchemaKeeperOptions) {}

  /** Fetch the OpenAPI when the schema may have moved; stop here if the policy says so. */
  async prepare(entries: ManifestEntry[], previous: string | null, current: string): Promise<void> {
    const { warehouse, logger, source } = this.options;
    this.checksums = { from: previous, to: current || null };
    const changed = previous !== null && previous !== current;
    const missingTable = await someAsync(
      [TEAM_TABLE, ...entries.map((e) => e.resource)],
      async (table) => {
        if (!isSafeResourceName(table)) return false;
        const columns = await warehouse.describeTable(table);
        this.described.set(table, columns);
        return columns === undefined;
      },
    );
    const marked = parseMarkedState(
      await warehouse.bookkeeping.getState(MARKED_SEALED_FIELDS_STATE_KEY),
    );
    // An unpublished schema is asked for again next run: it may have been a passing fault.
    const markedKnown = marked?.checksum === current && marked.published;
    if (previous === null || changed || missingTable || !markedKnown) {
      const document = await source.openApi(this.options.signal);
      this.openApiDocument = document;
      this.schema = columnsFromOpenApi(document);
      for (const refused of this.schema.refused) {
        this.options.problem(new UnsafeNameError('field', refused, 'the OpenAPI schema').message);
      }
      await warehouse.bookkeeping.setState(
        MARKED_SEALED_FIELDS_STATE_KEY,
        JSON.stringify({
          checksum: current,
          published: document !== undefined,
          fields: Object.fromEntries(this.schema.sealed),
        }),
      );
      await this.options.sealed.load(this.schema.sealed);
    } else {
      await this.options.sealed.load(marked.fields);
    }
    if (!changed) return;
    logger.warn(
      { previousChecksum: previous, checksum: current },
      "The server's export schema changed since the last run",
    );
    if (this.options.onSchemaChange === 'stop' && !this.options.acceptSchemaChange) {
      const planned: string[] = [];
      for (const entry of entries) {
        if (!isSafeResourceName(entry.resource)) continue;
        const desired = this.desiredColumns(entry, this.options.policyOf(entry));
        if (!desired) continue;
        const existing = await warehouse.describeTable(entry.resource);
        planned.push(
          ...planTable(entry.resource, existing, desired, 'schema').changes.map(
            describeSchemaChange,
          ),
        );
      }
      throw new SchemaChangeStoppedError(
        `The server's export schema changed (checksum ${previous.slice(0, 12)}… -> ${current.slice(0, 12)}…) ` +
          `and on_schema_change is "stop". Planned changes:\n` +
          (planned.length > 0
            ? planned.map((line) => `  - ${line}`).join('\n')
            : '  (none to the tables)'),
        { hint: 'Review them, then run `ocs-sync sync --accept-schema-change`.' },
      );
    }
  }

  /** The schema's columns of a table (undefined: the schema does not describe it). */
  schemaColumns(table: string): ColumnSpec[] | undefined {
    return this.schema?.tables.get(table);
  }

  /** The schema's columns for a resource, with sealed fields typed by the policy. */
  desiredColumns(entry: ManifestEntry, policy: SecretPolicy): ColumnSpec[] | undefined {
    const fromSchema = this.schema?.tables.get(entry.resource);
    if (!fromSchema) return undefined;
    const sealed = this.options.sealed.of(entry.resource).all;
    return this.withoutExcluded(entry.resource, fromSchema).map((column) =>
      sealed.has(column.name) ? { name: column.name, type: sealedColumnType(policy) } : column,
    );
  }

  excludedFields(table: string): readonly string[] {
    return valueByName(this.options.excludeFields, table) ?? [];
  }

  /** Create or evolve a table to the desired columns; returns its columns (undefined: no table yet). */
  async ensureTable(
    table: string,
    desired: ColumnSpec[] | undefined,
  ): Promise<ColumnSpec[] | undefined> {
    let existing = this.described.has(table)
      ? this.described.get(table)
      : await this.options.warehouse.describeTable(table);
    this.described.delete(table);
    // A field newly excluded: its stored column is emptied and dropped (history too).
    const excluded = existing?.filter((column) => this.excludedFields(table).includes(column.name));
    if (existing && excluded && excluded.length > 0) {
      existing = await this.apply(
        excluded.map((column) => ({
          kind: 'drop_column',
          table,
          column: column.name,
          fromType: column.type,
          reason: 'excluded',
        })),
        this.withoutExcluded(table, existing),
      );
    }
    if (desired) desired = this.withoutExcluded(table, desired);
    if (!desired) {
      if (existing) return existing;
      return this.apply(planTable(table, undefined, [], 'rows').changes, []);
    }
    const plan = planTable(table, existing, desired, 'schema');
    return this.apply(plan.changes, plan.columns);
  }

  /** Applies changes to the warehouse (recorded, reported, logged); returns `columns`. */
  async apply(changes: SchemaChange[], columns: ColumnSpec[]): Promise<ColumnSpec[]> {
    if (changes.length === 0) return columns;
    const { warehouse, events, logger } = this.options;
    this.described.clear();
    await warehouse.applySchemaChanges(changes, this.checksums);
    for (const change of changes) {
      this.changes.push(change);
      events?.onSchemaChange?.(change);
      const event = {
        id: change.column === undefined ? change.table : `${change.table}.${change.column}`,
        message: `Schema: ${describeSchemaChange(change)}`,
        fields: { table: change.table, change: change.kind },
      };
      // A value that did not fit is a warning of its own, and a dropped column (exclude_fields)
      // is rare and deliberate; new tables and columns are summed per kind.
      if (change.reason === 'value') logger.warn(event.fields, event.message);
      else if (change.kind === 'drop_column') logger.info(event.fields, event.message);
      else repeatedEvents(logger).add(SCHEMA_CHANGE_KINDS[change.kind], event);
    }
    return columns;
  }

  private withoutExcluded(table: string, columns: ColumnSpec[]): ColumnSpec[] {
    const excluded = this.excludedFields(table);
    return excluded.length === 0
      ? columns
      : columns.filter((column) => !excluded.includes(column.name));
  }
}

async function someAsync<T>(
  items: T[],
  predicate: (item: T) => Promise<boolean>,
): Promise<boolean> {
  for (const item of items) if (await predicate(item)) return true;
  return false;
}

interface MarkedState {
  checksum: string;
  published: boolean;
  fields: Map<string, string[]>;
}

function parseMarkedState(text: string | undefined): MarkedState | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = JSON.parse(text) as {
      checksum?: unknown;
      published?: unknown;
      fields?: unknown;
    };
    if (typeof parsed.checksum !== 'string') return undefined;
    return {
      checksum: parsed.checksum,
      published: parsed.published === true,
      fields: new Map(
        [...parseSealedFieldsState(JSON.stringify(parsed.fields ?? {}))].map(([resource, set]) => [
          resource,
          [...set],
        ]),
      ),
    };
  } catch {
    return undefined;
  }
}

/** The tables among `names` that exist, with their data columns. */
export async function storedTables(
  warehouse: Pick<Warehouse, 'describeTable'>,
  names: readonly string[],
): Promise<Map<string, ColumnSpec[]>> {
  const tables = new Map<string, ColumnSpec[]>();
  for (const name of names) {
    if (!isSafeResourceName(name)) continue;
    const columns = await warehouse.describeTable(name);
    if (columns) tables.set(name, columns);
  }
  return tables;
}
