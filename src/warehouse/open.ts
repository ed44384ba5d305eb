import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Warehouse } from '../interfaces.js';
import { WarehouseError } from '../errors.js';
import { parseWarehouseUrl } from '../config/warehouse-url.js';
import { SqliteWarehouse, type WarehouseLogger } from './sqlite.js';
import { PostgresWarehouse } from './postgres.js';
import { createPrivateSqliteFile } from './sqlite-file.js';

export interface OpenWarehouseOptions {
  /** A file path, `sqlite:PATH`, `file:` URL, `:memory:`, or `postgres://...`. */
  url: string;
  /** PostgreSQL schema for the tables (PostgreSQL only). */
  schema?: string;
  /** PostgreSQL connection pool size (PostgreSQL only). */
  poolSize?: number;
  /** PostgreSQL statement_timeout (PostgreSQL only). */
  statementTimeoutSeconds?: number;
  /** A writer lock whose heartbeat is older than this is taken over. Default 600. */
  lockStaleAfterSeconds?: number;
  /** Refuse an SQLite file that does not exist yet (commands that only read, like `status`). */
  mustExist?: boolean;
  logger?: WarehouseLogger;
}

/** Opens the warehouse a URL names and brings its bookkeeping tables up to date. */
export async function openWarehouse(options: OpenWarehouseOptions): Promise<Warehouse> {
  const location = parseWarehouseUrl(options.url);
  if (location.dialect === 'postgres') {
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
    try {
      mkdirSync(dirname(path), { recursive: true });
    } catch (error) {
      throw new WarehouseError(
        `Cannot create the folder for the SQLite warehouse ${path}: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    createPrivateSqliteFile(path);
  }
  const warehouse = new SqliteWarehouse({
    path,
    lockStaleAfterSeconds: options.lockStaleAfterSeconds,
    logger: options.logger,
  });
  return migrated(warehouse);
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
