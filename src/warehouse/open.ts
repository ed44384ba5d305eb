/**
 * The one place that picks a dialect: opening a warehouse to write, to read, or to look at it
 * (`check`), by its URL. Each dialect's folder (and its driver) is loaded only when used;
 * nothing else outside the dialect folders imports them.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { ColumnType, Warehouse } from '../interfaces.js';
import { WarehouseError } from '../errors.js';
import { planPageThreads } from '../page-threads.js';
import { parseWarehouseUrl, writableFromAnotherThread } from './url.js';
import type { WarehouseLogger } from './writer-lock.js';
import type { PrivateModes } from '../private-files.js';
import { readLockAndChecksum, type WarehouseProbe } from './probe.js';
import type { WarehouseReader } from './reader.js';
import { createPrivateSqliteFile } from './sqlite/file.js';

export { sqliteFiles, sqliteFilesReadableByOthers } from './sqlite/file.js';
export { backupSqlite, sqliteHeldBy } from './sqlite/snapshot.js';

export interface OpenWarehouseOptions {
  /** A file path, `sqlite:PATH`, `file:` URL, `:memory:`, or `postgres://...`. */
  url: string;
  /** PostgreSQL schema for the tables (PostgreSQL only). */
  schema?: string;
  /** PostgreSQL connection pool size (PostgreSQL only). */
  poolSize?: number;
  /** PostgreSQL statement_timeout (PostgreSQL only). */
  statementTimeoutSeconds?: number;
  /**
   * Sets the lock heartbeat's pace (a quarter of it, 1-5 s); PostgreSQL also gives its lock
   * connection this long to answer a heartbeat. Default 600.
   */
  lockStaleAfterSeconds?: number;
  /** Refuse an SQLite file that does not exist yet (commands that only read, like `status`). */
  mustExist?: boolean;
  /** Modes a new SQLite file (and its lock file) is created with (default 0600). */
  fileModes?: PrivateModes;
  /**
   * SQLite: commit pages on a writer thread (planPageThreads's answer, src/page-threads.ts).
   * Default: as planned for a team syncing alone with `page_threads: auto`.
   */
  writerThread?: boolean;
  logger?: WarehouseLogger;
}

/** Opens the warehouse a URL names and brings its bookkeeping tables up to date. */
export async function openWarehouse(options: OpenWarehouseOptions): Promise<Warehouse> {
  const location = parseWarehouseUrl(options.url);
  if (location.dialect === 'postgres') {
    const { PostgresWarehouse } = await import('./postgres/warehouse.js');
    const warehouse = new PostgresWarehouse({
      url: location.connectionString,
      schema: options.schema,
      poolSize: options.poolSize,
      statementTimeoutSeconds: options.statementTimeoutSeconds,
      lockStaleAfterSeconds: options.lockStaleAfterSeconds,
      logger: options.logger,
    });
    return migrated(warehouse);
  }
  const path = location.path === ':memory:' ? location.path : resolve(location.path);
  if (options.mustExist && path !== ':memory:' && !existsSync(path)) {
    throw new WarehouseError(`There is no SQLite warehouse at ${path} yet.`, {
      hint: 'Check --warehouse / OCS_WAREHOUSE_URL, or run `ocs-sync sync` first to create it.',
    });
  }
  if (path !== ':memory:') {
    checkSqlitePlace(path);
    createPrivateSqliteFile(path, options.fileModes);
  }
  const { SqliteWarehouse } = await import('./sqlite/warehouse.js');
  const warehouse = new SqliteWarehouse({
    path,
    lockStaleAfterSeconds: options.lockStaleAfterSeconds,
    fileModes: options.fileModes,
    writerThread:
      options.writerThread ??
      planPageThreads({
        setting: 'auto',
        othersAtOnce: false,
        writableElsewhere: writableFromAnotherThread(location),
      }).writerThread,
    logger: options.logger,
  });
  return migrated(warehouse);
}

/**
 * Opens an existing warehouse for reading only. Only the named dialect's driver is loaded, and
 * neither migrations nor the writer's machinery: read-only commands start fast and change nothing.
 */
export async function openWarehouseReader(options: {
  url: string;
  schema?: string;
  statementTimeoutSeconds?: number;
}): Promise<WarehouseReader> {
  const location = parseWarehouseUrl(options.url);
  if (location.dialect === 'postgres') {
    const { openPostgresReader } = await import('./postgres/reader.js');
    return openPostgresReader(location.connectionString, {
      schema: options.schema ?? 'ocs',
      statementTimeoutSeconds: options.statementTimeoutSeconds,
    });
  }
  const { openSqliteReader } = await import('./sqlite/reader.js');
  return openSqliteReader(location.path === ':memory:' ? location.path : resolve(location.path));
}

/** `ocs-sync check`'s look at the warehouse (probe.ts): writes nothing, creates nothing. */
export async function probeWarehouse(options: {
  url: string;
  schema: string;
}): Promise<WarehouseProbe> {
  const location = parseWarehouseUrl(options.url);
  if (location.dialect === 'postgres') {
    const { probePostgres } = await import('./postgres/reader.js');
    return probePostgres(location.connectionString, options.schema, readLockAndChecksum);
  }
  const { probeSqlite } = await import('./sqlite/probe.js');
  return probeSqlite(resolve(location.path), readLockAndChecksum);
}

/** The SQL type each logical column type gets in a dialect's tables (`ocs-sync schema`). */
export async function sqlColumnTypes(
  dialect: Warehouse['dialect'],
): Promise<Readonly<Record<ColumnType, string>>> {
  if (dialect === 'postgres') return (await import('./postgres/values.js')).POSTGRES_TYPE;
  return (await import('./sqlite/values.js')).SQLITE_TYPE;
}

/** Bring the bookkeeping tables up to date; a warehouse that cannot be migrated is closed. */
async function migrated(warehouse: Warehouse): Promise<Warehouse> {
  try {
    await warehouse.migrate();
  } catch (error) {
    await warehouse.close().catch(() => undefined);
    throw error;
  }
  return warehouse;
}

/**
 * A folder that does not exist is a typo until proven otherwise: it is named, never created.
 * A file or folder this user may not write gets the path and the fix.
 */
export function checkSqlitePlace(path: string): void {
  const folder = dirname(path);
  if (!existsSync(folder)) {
    throw new WarehouseError(
      `The folder ${folder} of the SQLite warehouse ${path} does not exist.`,
      {
        hint: `Check the path in --warehouse / OCS_WAREHOUSE_URL, or create the folder (mkdir -p ${folder}).`,
      },
    );
  }
  if (!statSync(folder).isDirectory()) {
    throw new WarehouseError(
      `${folder} (the folder of the SQLite warehouse ${path}) is not a folder.`,
      {
        hint: 'Check the path in --warehouse / OCS_WAREHOUSE_URL.',
      },
    );
  }
  const target = existsSync(path) ? path : folder;
  try {
    accessSync(target, constants.R_OK | constants.W_OK);
  } catch {
    throw new WarehouseError(
      `The SQLite warehouse ${path} cannot be written: ${target === path ? 'the file' : 'its folder'} is read-only for this user.`,
      {
        hint: `Give this user write access to ${target} (and its folder, for SQLite's journal files), or choose another path.`,
      },
    );
  }
}
