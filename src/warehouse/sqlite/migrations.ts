/**
 * Migration steps SQL alone cannot do on SQLite, keyed by migration version; each runs right
 * after its migration's SQL, inside the same transaction.
 */
import { historyTableName, quoteIdentifier as q } from '../identifiers.js';
import type { SqliteConnection } from './connection.js';
import { createSqliteLiveView, dropSqliteLiveView } from './schema.js';
import { SERVED_UNDER_COLUMN, VERSION_KIND_COLUMN } from '../table-definitions.js';
import { toSortableUtc } from '../../timestamps.js';

/** Our own time columns, per bookkeeping table. */
const BOOKKEEPING_TIMES: ReadonlyArray<[string, string[]]> = [
  ['_ocs_migrations', ['applied_at']],
  ['_ocs_runs', ['started_at', 'finished_at']],
  ['_ocs_resources', ['last_success_at', 'last_error_at', 'last_full_refresh_at']],
  ['_ocs_resource_runs', ['recorded_at']],
  ['_ocs_columns', ['added_at']],
  ['_ocs_schema_changes', ['changed_at']],
  ['_ocs_state', ['updated_at']],
  ['_ocs_lock', ['since', 'heartbeat_at']],
];

/** The resource tables: ours have `_deleted_at`; history tables have `_version_id`. */
export function sqliteResourceTables(connection: SqliteConnection): string[] {
  const names = connection.db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    .pluck()
    .all() as string[];
  return names.filter((name) => {
    if (name.startsWith('_ocs') || name.startsWith('sqlite_')) return false;
    const columns = connection.physicalColumns(name);
    return columns.includes('_deleted_at') && !columns.includes('_version_id');
  });
}

/** Every date-time to the fixed-width form; a `__live` view for every resource table. */
function analystsWarehouse(connection: SqliteConnection): void {
  const { db } = connection;
  db.function('ocs_sortable_utc', { deterministic: true }, (value: unknown) => {
    if (typeof value !== 'string') return value;
    try {
      return toSortableUtc(value);
    } catch {
      return value; // Not a date-time (it never is in these columns): left as it is.
    }
  });
  const convert = (table: string, columns: string[]) => {
    const present = new Set(connection.physicalColumns(table));
    const sets = columns
      .filter((column) => present.has(column))
      .map((column) => `${q(column)} = ocs_sortable_utc(${q(column)})`);
    if (sets.length > 0) db.exec(`UPDATE ${q(table)} SET ${sets.join(', ')}`);
  };
  for (const [table, columns] of BOOKKEEPING_TIMES) convert(table, columns);
  for (const table of sqliteResourceTables(connection)) {
    const columns = connection.storedColumns(table);
    const times = columns.filter((column) => column.type === 'datetime').map((c) => c.name);
    convert(table, [...times, '_synced_at', '_deleted_at']);
    const history = historyTableName(table);
    if (connection.tableExists(history)) convert(history, [...times, '_valid_from', '_valid_to']);
    dropSqliteLiveView(connection, table);
    createSqliteLiveView(connection, table);
  }
}

/** Migration 008: the chatbot choice's own columns on every resource and history table. */
function chatbotChoice(connection: SqliteConnection): void {
  const { db } = connection;
  const addMissing = (table: string, columns: Array<[string, string]>) => {
    const present = new Set(connection.physicalColumns(table));
    for (const [name, type] of columns) {
      if (!present.has(name)) db.exec(`ALTER TABLE ${q(table)} ADD COLUMN ${q(name)} ${type}`);
    }
  };
  for (const table of sqliteResourceTables(connection)) {
    dropSqliteLiveView(connection, table);
    addMissing(table, [
      ['_ocs_out_of_scope_since', 'TEXT'],
      ['_ocs_served_under', 'TEXT'],
    ]);
    const history = historyTableName(table);
    if (connection.tableExists(history)) {
      addMissing(history, [[VERSION_KIND_COLUMN, "TEXT NOT NULL DEFAULT 'served'"]]);
    }
    createSqliteLiveView(connection, table);
  }
}

/** Migration 009: every history table records the choice each version was served under. */
function servedUnderHistory(connection: SqliteConnection): void {
  for (const table of sqliteResourceTables(connection)) {
    const history = historyTableName(table);
    if (
      connection.tableExists(history) &&
      !connection.physicalColumns(history).includes(SERVED_UNDER_COLUMN)
    ) {
      connection.db.exec(`ALTER TABLE ${q(history)} ADD COLUMN ${q(SERVED_UNDER_COLUMN)} TEXT`);
    }
  }
}

export const SQLITE_MIGRATION_CODE: ReadonlyMap<number, (connection: SqliteConnection) => void> =
  new Map([
    [4, analystsWarehouse],
    [8, chatbotChoice],
    [9, servedUnderHistory],
  ]);
