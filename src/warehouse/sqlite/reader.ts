/** The SQLite side of WarehouseReader: a read-only connection, nothing else loaded. */
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { WarehouseError } from '../../errors.js';
import { WarehouseReader, type SqlRows, type TableFacts } from '../reader.js';
import { toServerTimestamp } from '../../timestamps.js';
import { fileLockHeld } from '../../file-lock.js';
import { sqliteLockFile } from './file.js';

/** The server's form of a stored date-time; text that is not one is shown as it is. */
function serverForm(value: string): string {
  try {
    return toServerTimestamp(value);
  } catch {
    return value;
  }
}

export function sqliteRows(db: Database.Database): SqlRows {
  return {
    all: async (sql, parameters = []) =>
      db.prepare(sql).all(...(parameters as unknown[])) as Array<Record<string, unknown>>,
  };
}

export function sqliteTableFacts(db: Database.Database): TableFacts {
  return {
    existingTables: async () =>
      new Set(
        (
          db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{
            name: string;
          }>
        ).map((row) => row.name),
      ),
    newestUpdatedAtSql: (table, columnType) =>
      // A datetime column sorts as text (one fixed-width form): its max is the newest. A column
      // widened to text holds the server's varying forms, which strftime normalises for the order.
      columnType === 'datetime'
        ? 'max("updated_at")'
        : `(SELECT "updated_at" FROM "${table}" WHERE "updated_at" IS NOT NULL ` +
          `ORDER BY strftime('%Y-%m-%dT%H:%M:%f', "updated_at") DESC, "updated_at" DESC LIMIT 1)`,
    // Shown in the server's form, whichever form the column holds.
    updatedAtText: (value) => (typeof value === 'string' ? serverForm(value) : null),
  };
}

/** Opens an existing SQLite warehouse read-only; a missing file or a file that is not one is an error. */
export function openSqliteReader(path: string): WarehouseReader {
  if (path !== ':memory:' && !existsSync(path)) {
    throw new WarehouseError(`There is no SQLite warehouse at ${path} yet.`, {
      hint: 'Check --warehouse / OCS_WAREHOUSE_URL, or run `ocs-sync sync` first to create it.',
    });
  }
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    db.pragma('busy_timeout = 10000');
    const bookkeeping = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_ocs_runs'")
      .get();
    if (bookkeeping === undefined) {
      db.close();
      throw new WarehouseError(
        `${path} is an SQLite file but not an ocs-sync warehouse (no _ocs_runs table).`,
        {
          hint: 'Point --warehouse / OCS_WAREHOUSE_URL at the file `ocs-sync sync` writes.',
        },
      );
    }
  } catch (error) {
    if (error instanceof WarehouseError) throw error;
    throw new WarehouseError(
      `Cannot read the SQLite warehouse ${path}: ${error instanceof Error ? error.message : String(error)}`,
      { hint: 'Check the path and that this user may read the file and its folder.', cause: error },
    );
  }
  return new WarehouseReader(
    `sqlite:${path}`,
    sqliteRows(db),
    sqliteTableFacts(db),
    async () => {
      if (db.open) db.close();
    },
    async () => (path === ':memory:' ? undefined : fileLockHeld(sqliteLockFile(path))),
  );
}
