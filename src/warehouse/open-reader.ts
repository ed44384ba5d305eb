import { resolve } from 'node:path';
import { parseWarehouseUrl } from './url.js';
import type { WarehouseReader } from './reader.js';

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
