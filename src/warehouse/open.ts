/**
 * The one place that picks a dialect: opening a warehouse to write, to read, or to look at it
 * (`check`), by its URL; a page sink on another thread (the sync's page thread), by the setup the
 * warehouse gave; a dialect's rules and column types, by its name. Each dialect's folder offers
 * one object (sqlite/dialect.ts, postgres/dialect.ts) whose code and driver load only when used,
 * so a page thread loads only its dialect's page-writing code; nothing else outside the dialect
 * folders imports them.
 */
import type { ColumnType, PageSink, PageSinkSetup, Warehouse } from '../interfaces.js';
import { planPageThreads } from '../page-threads.js';
import type { Dialect, Dialects, OpenWarehouseOptions, ReaderOptions } from './dialect.js';
import type { DialectRules } from './dialect-rules.js';
import { readLockAndChecksum, type WarehouseProbe } from './probe.js';
import type { WarehouseReader } from './reader.js';
import { POSTGRES_DIALECT } from './postgres/dialect.js';
import { SQLITE_DIALECT } from './sqlite/dialect.js';
import { parseWarehouseUrl, writableFromAnotherThread, type WarehouseTarget } from './url.js';

export type { OpenWarehouseOptions } from './dialect.js';
export { sqliteFiles, sqliteFilesReadableByOthers } from './sqlite/file.js';

const DIALECTS: Dialects = { sqlite: SQLITE_DIALECT, postgres: POSTGRES_DIALECT };

/** The dialect a target names, typed for that target. */
function dialectOf<Target extends WarehouseTarget>(target: Target): Dialect<Target> {
  return DIALECTS[target.dialect] as unknown as Dialect<Target>;
}

/** Opens the warehouse a URL names and brings its bookkeeping tables up to date. */
export async function openWarehouse(options: OpenWarehouseOptions): Promise<Warehouse> {
  const target = parseWarehouseUrl(options.url);
  const writerThread =
    options.writerThread ??
    planPageThreads({
      setting: 'auto',
      othersAtOnce: false,
      writableElsewhere: writableFromAnotherThread(target),
    }).writerThread;
  return migrated(await dialectOf(target).openWarehouse(target, { ...options, writerThread }));
}

/**
 * Opens an existing warehouse for reading only. Only the named dialect's driver is loaded, and
 * neither migrations nor the writer's machinery: read-only commands start fast and change nothing.
 */
export async function openWarehouseReader(
  options: ReaderOptions & { url: string },
): Promise<WarehouseReader> {
  const target = parseWarehouseUrl(options.url);
  return dialectOf(target).openReader(target, options);
}

/** `ocs-sync check`'s look at the warehouse (probe.ts): writes nothing, creates nothing. */
export async function probeWarehouse(options: {
  url: string;
  schema: string;
}): Promise<WarehouseProbe> {
  const target = parseWarehouseUrl(options.url);
  return dialectOf(target).probe(target, options.schema, readLockAndChecksum);
}

/** Opens a page sink on this thread from the setup a warehouse gave (Warehouse.pageSinkSetup). */
export function openPageSink(setup: PageSinkSetup): Promise<PageSink> {
  return DIALECTS[setup.dialect].openPageSink(setup);
}

/** What differs between the dialects in the code they share (dialect-rules.ts). */
export function dialectRules(dialect: Warehouse['dialect']): DialectRules {
  return DIALECTS[dialect].rules;
}

/** The SQL type each logical column type gets in a dialect's tables (`ocs-sync schema`). */
export function sqlColumnTypes(
  dialect: Warehouse['dialect'],
): Promise<Readonly<Record<ColumnType, string>>> {
  return DIALECTS[dialect].columnTypes();
}

/** Copies a SQLite warehouse whole while a sync may be writing it (`ocs-sync snapshot`). */
export async function backupSqlite(path: string, destination: string): Promise<void> {
  return (await import('./sqlite/snapshot.js')).backupSqlite(path, destination);
}

/** Why a SQLite warehouse file cannot be replaced now, or undefined (`snapshot restore`). */
export async function sqliteHeldBy(path: string): Promise<string | undefined> {
  return (await import('./sqlite/snapshot.js')).sqliteHeldBy(path);
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
