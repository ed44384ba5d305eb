import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Warehouse } from '../interfaces.js';
import { WarehouseError } from '../errors.js';
import { SqliteWarehouse, type WarehouseLogger } from './sqlite.js';
import { PostgresWarehouse } from './postgres.js';

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
  logger?: WarehouseLogger;
}

export type WarehouseLocation =
  { dialect: 'sqlite'; path: string } | { dialect: 'postgres'; url: string };

/** Pure: which dialect a warehouse URL names, and where. */
export function parseWarehouseUrl(url: string): WarehouseLocation {
  const text = url.trim();
  if (text === '') {
    throw new WarehouseError('The warehouse URL is empty.', {
      hint: 'Set warehouse.url to a file path such as ./ocs.db, or to postgres://user@host/db.',
    });
  }
  if (/^postgres(ql)?:\/\//i.test(text)) return { dialect: 'postgres', url: text };
  if (text === ':memory:' || text === 'sqlite::memory:')
    return { dialect: 'sqlite', path: ':memory:' };
  if (/^file:/i.test(text)) {
    try {
      return { dialect: 'sqlite', path: fileURLToPath(text) };
    } catch (error) {
      throw new WarehouseError(`The warehouse URL ${text} is not a valid file: URL.`, {
        cause: error,
      });
    }
  }
  if (/^sqlite:/i.test(text)) {
    // sqlite:PATH, sqlite://relative/path and sqlite:///absolute/path all name a file.
    const path = text.slice('sqlite:'.length).replace(/^\/\/(?=.)/, '');
    if (path === '') throw new WarehouseError(`The warehouse URL ${text} names no file.`);
    return { dialect: 'sqlite', path };
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text);
  if (scheme) {
    throw new WarehouseError(`Unsupported warehouse URL scheme ${scheme[1]}:// .`, {
      hint: 'Use a file path (SQLite) or postgres://user@host/db (PostgreSQL).',
    });
  }
  return { dialect: 'sqlite', path: text };
}

/** Opens the warehouse a URL names and brings its bookkeeping tables up to date. */
export async function openWarehouse(options: OpenWarehouseOptions): Promise<Warehouse> {
  const location = parseWarehouseUrl(options.url);
  if (location.dialect === 'postgres') {
    const warehouse = new PostgresWarehouse({
      url: location.url,
      schema: options.schema,
      poolSize: options.poolSize,
      statementTimeoutSeconds: options.statementTimeoutSeconds,
      lockStaleAfterSeconds: options.lockStaleAfterSeconds,
      logger: options.logger,
    });
    try {
      await warehouse.migrate();
    } catch (error) {
      await warehouse.close().catch(() => undefined);
      throw error;
    }
    return warehouse;
  }
  const path = location.path === ':memory:' ? location.path : resolve(location.path);
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
  }
  const warehouse = new SqliteWarehouse({
    path,
    lockStaleAfterSeconds: options.lockStaleAfterSeconds,
    logger: options.logger,
  });
  try {
    await warehouse.migrate();
  } catch (error) {
    await warehouse.close().catch(() => undefined);
    throw error;
  }
  return warehouse;
}
