/**
 * What each dialect folder offers the opener (open.ts): one object per dialect (sqlite/dialect.ts,
 * postgres/dialect.ts) that opens its warehouse, reader, probe and page sink, loading its driver
 * and code only when asked, and carries its rules for the shared code (dialect-rules.ts).
 */
import type { ColumnType, PageSink, PageSinkSetup, Warehouse } from '../interfaces.js';
import type { PrivateModes } from '../private-files.js';
import type { DialectRules } from './dialect-rules.js';
import type { WarehouseProbe } from './probe.js';
import type { WarehouseReader } from './reader.js';
import type { WarehouseTarget } from './url.js';
import type { WarehouseLogger } from './writer-lock.js';

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

export interface ReaderOptions {
  schema?: string;
  statementTimeoutSeconds?: number;
}

/** How `check` reads the lock and checksum through a reader (probe.ts). */
export type ReadLock = (
  reader: WarehouseReader,
) => Promise<Pick<WarehouseProbe, 'lock' | 'schemaChecksum' | 'files'>>;

export interface Dialect<Target extends WarehouseTarget> {
  readonly rules: DialectRules;
  /** A warehouse to write, not yet migrated; `writerThread` as planned. */
  openWarehouse(
    target: Target,
    options: OpenWarehouseOptions & { writerThread: boolean },
  ): Promise<Warehouse>;
  /** The warehouse for reading only: no migrations, none of the writer's machinery. */
  openReader(target: Target, options: ReaderOptions): Promise<WarehouseReader>;
  /** `check`'s look: writes nothing, creates nothing. */
  probe(target: Target, schema: string, readLock: ReadLock): Promise<WarehouseProbe>;
  /** A page sink on another thread, from the setup the warehouse gave (pageSinkSetup). */
  openPageSink(setup: PageSinkSetup): Promise<PageSink>;
  /** The SQL type each logical column type gets in its tables. */
  columnTypes(): Promise<Readonly<Record<ColumnType, string>>>;
}

/** Each dialect's object, by name. */
export type Dialects = {
  [Name in WarehouseTarget['dialect']]: Dialect<Extract<WarehouseTarget, { dialect: Name }>>;
};
