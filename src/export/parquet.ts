/**
 * `ocs-sync export parquet`: one Parquet file per table, with real column types, written by
 * DuckDB (@duckdb/node-api, whose native library ships inside the npm package: no extension is
 * downloaded). Rows are read from the warehouse in id-ordered batches and appended to a staging
 * table in a temporary on-disk DuckDB database with a memory limit, so memory stays flat however
 * large the table; DuckDB then copies the staging table to Parquet. Each file is written into a
 * 0700 folder beside its final place and moved there when complete, so a reader never sees half a
 * file, and no one else sees it at all while DuckDB writes it (DuckDB creates files with the
 * default mode). Neither folder outlives the export, nor one a killed export left
 * (scratch-folders.ts). The files hold team data (opened secrets too, under the `plaintext` policy): they
 * are private, 0600 by default (`data_file_mode`).
 */
import { DuckDBInstance, type DuckDBAppender, type DuckDBConnection } from '@duckdb/node-api';
import { chmodSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type {
  ColumnSpec,
  ColumnType,
  StoredRow,
  Warehouse,
  WarehouseReads,
} from '../interfaces.js';
import { InterruptedError, WarehouseError } from '../errors.js';
import { ScratchFolder, removeAbandonedScratchFolders } from './scratch-folders.js';
import { quoteIdentifier as q } from '../warehouse/identifiers.js';
import { OWN_COLUMNS } from '../warehouse/table-definitions.js';
import { toJsonText } from '../warehouse/values.js';
import {
  DEFAULT_PRIVATE_MODES,
  makePrivateFolderSync,
  type PrivateModes,
} from '../private-files.js';

export interface ParquetExportOptions {
  directory: string;
  tables: readonly string[];
  /** Leave out rows marked deleted (and the `_deleted_at` column), as the `__live` views do. */
  live: boolean;
  /** Rows per read from the warehouse. */
  batchRows?: number;
  /** DuckDB's memory limit while staging, e.g. `128MB` (the default). */
  memoryLimit?: string;
  /** Modes of the files and of the folder when it is created (default 0600 / 0700). */
  modes?: PrivateModes;
  /** Stops the export at the next batch (or statement): InterruptedError, nothing left behind. */
  signal?: AbortSignal;
  /** Told of each file once complete (awaited: an upload of it, for a bucket). */
  onTable?(result: ParquetFile): void | Promise<void>;
  /** Told of the folders a killed export left, removed before this one starts. */
  onLeftoversRemoved?(paths: string[]): void;
}

/** Where files are written until complete (beside them), and the staging database (TMPDIR). */
const PARTIAL_PREFIX = '.partial-';
const STAGING_PREFIX = 'ocs-parquet-';

export interface ParquetFile {
  table: string;
  file: string;
  rows: number;
}

/**
 * Parquet (DuckDB) type of each logical type. `decimal` (an integer column widened by a fraction)
 * becomes a double: exact for integers up to 2^53. JSON is its text.
 */
export const PARQUET_TYPE: Record<ColumnType, string> = {
  integer: 'BIGINT',
  number: 'DOUBLE',
  decimal: 'DOUBLE',
  boolean: 'BOOLEAN',
  text: 'VARCHAR',
  datetime: 'TIMESTAMPTZ',
  date: 'DATE',
  json: 'VARCHAR',
};

interface ExportColumn {
  name: string;
  type: ColumnType;
}

/** The exported columns: id, the data columns, then ours (without `_deleted_at` when live). */
function exportColumns(columns: readonly ColumnSpec[], live: boolean): ExportColumn[] {
  return [
    { name: 'id', type: 'integer' },
    ...columns,
    ...OWN_COLUMNS.filter((column) => !live || column.name !== '_deleted_at'),
  ];
}

/** What an export reads of the warehouse. */
export type ParquetSource = Pick<Warehouse, 'describeTable'> & {
  reads: Pick<WarehouseReads, 'readRows'>;
};

/** Date-times and dates are staged as text and cast once by the COPY. */
function stagingType(type: ColumnType): string {
  return type === 'datetime' || type === 'date' ? 'VARCHAR' : PARQUET_TYPE[type];
}

function append(appender: DuckDBAppender, type: ColumnType, value: unknown): void {
  if (value === null || value === undefined) {
    appender.appendNull();
    return;
  }
  switch (type) {
    case 'integer':
      appender.appendBigInt(BigInt(value as number | bigint));
      return;
    case 'number':
    case 'decimal':
      appender.appendDouble(Number(value));
      return;
    case 'boolean':
      appender.appendBoolean(Boolean(value));
      return;
    case 'json':
      // Read as the stored JSON text (jsonAsText); parsed only if a reader gave a value.
      appender.appendVarchar(typeof value === 'string' ? value : toJsonText(value));
      return;
    case 'text':
    case 'datetime':
    case 'date':
      appender.appendVarchar(String(value));
      return;
  }
}

export async function exportParquet(
  warehouse: ParquetSource,
  options: ParquetExportOptions,
): Promise<ParquetFile[]> {
  const directory = resolve(options.directory);
  makePrivateFolderSync(directory, options.modes);
  const removed = [
    ...removeAbandonedScratchFolders(directory, PARTIAL_PREFIX),
    ...removeAbandonedScratchFolders(tmpdir(), STAGING_PREFIX),
  ];
  if (removed.length > 0) options.onLeftoversRemoved?.(removed);
  const { signal } = options;
  stopIfAsked(signal);
  // 0700 folders: the Parquet files being written, and the staging database.
  const writing = await ScratchFolder.create(directory, PARTIAL_PREFIX);
  let staging: ScratchFolder | undefined;
  let instance: DuckDBInstance | undefined;
  let connection: DuckDBConnection | undefined;
  // A statement in progress (a COPY of a large table) stops when asked, too.
  const interrupt = () => connection?.interrupt();
  signal?.addEventListener('abort', interrupt);
  const results: ParquetFile[] = [];
  try {
    staging = await ScratchFolder.create(tmpdir(), STAGING_PREFIX);
    instance = await DuckDBInstance.create(join(staging.path, 'stage.duckdb'), {
      memory_limit: options.memoryLimit ?? '128MB',
      threads: '1',
      temp_directory: join(staging.path, 'spill'),
      // Nothing is ever fetched from the network.
      autoinstall_known_extensions: 'false',
      autoload_known_extensions: 'false',
    });
    connection = await instance.connect();
    for (const table of options.tables) {
      const result = await exportTable(
        warehouse,
        connection,
        table,
        { directory, writing: writing.path },
        options,
      );
      results.push(result);
      await options.onTable?.(result);
    }
  } catch (error) {
    stopIfAsked(signal);
    throw error;
  } finally {
    signal?.removeEventListener('abort', interrupt);
    connection?.closeSync();
    instance?.closeSync();
    staging?.remove();
    writing.remove();
  }
  return results;
}

/** Throws InterruptedError when the export was asked to stop (SIGINT, SIGTERM). */
function stopIfAsked(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new InterruptedError(
      'The export was stopped; the files already complete are kept, nothing half-written is left.',
    );
  }
}

async function exportTable(
  warehouse: ParquetSource,
  connection: DuckDBConnection,
  table: string,
  folders: { directory: string; writing: string },
  options: ParquetExportOptions,
): Promise<ParquetFile> {
  const dataColumns = await warehouse.describeTable(table);
  if (!dataColumns) {
    throw new WarehouseError(`Table ${table} is not in the warehouse; nothing exported for it.`, {
      hint: 'Run `ocs-sync schema` to list the tables.',
    });
  }
  const columns = exportColumns(dataColumns, options.live);
  await connection.run('DROP TABLE IF EXISTS staging');
  await connection.run(
    `CREATE TABLE staging (${columns.map((column) => `${q(column.name)} ${stagingType(column.type)}`).join(', ')})`,
  );
  const appender = await connection.createAppender('staging');
  const batchRows = options.batchRows ?? 5000;
  let rows = 0;
  let afterId: string | null = null;
  try {
    for (;;) {
      stopIfAsked(options.signal);
      const batch: StoredRow[] = await warehouse.reads.readRows({
        table,
        columns: dataColumns,
        afterId,
        limit: batchRows,
        live: options.live,
        jsonAsText: true,
      });
      for (const row of batch) {
        for (const column of columns) append(appender, column.type, row[column.name]);
        appender.endRow();
      }
      appender.flushSync();
      rows += batch.length;
      if (batch.length < batchRows) break;
      afterId = String(batch[batch.length - 1]!.id);
    }
  } finally {
    appender.closeSync();
  }
  const file = join(folders.directory, `${table}.parquet`);
  const partial = join(folders.writing, `${table}.parquet`);
  const selected = columns.map((column) =>
    column.type === 'datetime' || column.type === 'date'
      ? `CAST(${q(column.name)} AS ${PARQUET_TYPE[column.type]}) AS ${q(column.name)}`
      : q(column.name),
  );
  await connection.run(
    // Appended in id order, and DuckDB keeps insertion order: no sort (and its memory) needed.
    `COPY (SELECT ${selected.join(', ')} FROM staging) TO '${partial.replaceAll("'", "''")}' (FORMAT PARQUET, COMPRESSION ZSTD, ROW_GROUP_SIZE 20000)`,
  );
  await connection.run('DROP TABLE staging');
  chmodSync(partial, (options.modes ?? DEFAULT_PRIVATE_MODES).file);
  renameSync(partial, file);
  return { table, file, rows };
}
