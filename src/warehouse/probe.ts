/**
 * `ocs-sync check`'s look at the warehouse: can it be reached, could we write to it, who holds
 * the writer lock, which schema checksum the last run saw. Writes nothing, creates nothing.
 */
import { accessSync, constants, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { hostname } from 'node:os';
import { parseWarehouseUrl } from './url.js';
import { SCHEMA_CHECKSUM_STATE_KEY } from './state-keys.js';
import type { FileTotals } from '../interfaces.js';
import { processExists } from './writer-lock.js';
import type { LockRecord, WarehouseReader } from './reader.js';

export interface WarehouseProbe {
  description: string;
  /** False when the first sync has yet to create it. */
  exists: boolean;
  /** Why this user could not write to it; undefined when it can. */
  notWritable?: string;
  lock: { state: 'free' } | { state: 'held' | 'stale'; holder?: LockRecord };
  /** The schema checksum the last complete run brought the tables to. */
  schemaChecksum?: string;
  /** File contents kept so far (absent when the warehouse does not exist yet). */
  files?: FileTotals;
}

export async function probeWarehouse(options: {
  url: string;
  schema: string;
  lockStaleAfterSeconds: number;
}): Promise<WarehouseProbe> {
  const location = parseWarehouseUrl(options.url);
  if (location.dialect === 'postgres') {
    const { probePostgres } = await import('./postgres/reader.js');
    return probePostgres(location.connectionString, options.schema, (reader) =>
      readLockAndChecksum(reader, options.lockStaleAfterSeconds),
    );
  }
  const path = resolve(location.path);
  if (!existsSync(path)) {
    const folder = dirname(path);
    return {
      description: `sqlite:${path}`,
      exists: false,
      notWritable: !existsSync(folder)
        ? `its folder ${folder} does not exist (create it, or fix the path)`
        : writableReason(folder),
      lock: { state: 'free' },
    };
  }
  const { openSqliteReader } = await import('./sqlite/reader.js');
  const reader = openSqliteReader(path);
  try {
    return {
      description: reader.description,
      exists: true,
      notWritable: writableReason(path) ?? writableReason(dirname(path)),
      ...(await readLockAndChecksum(reader, options.lockStaleAfterSeconds)),
    };
  } finally {
    await reader.close();
  }
}

function writableReason(path: string): string | undefined {
  try {
    accessSync(path, constants.W_OK);
    return undefined;
  } catch {
    return `${path} is read-only for this user (give it write access)`;
  }
}

/** The lock as the record tells it; PostgreSQL's probe overrides `held` with the real lock. */
export async function readLockAndChecksum(
  reader: WarehouseReader,
  staleAfterSeconds: number,
  held?: boolean,
): Promise<Pick<WarehouseProbe, 'lock' | 'schemaChecksum' | 'files'>> {
  const holder = await reader.lockHolder();
  const schemaChecksum = await reader.getState(SCHEMA_CHECKSUM_STATE_KEY);
  const files = await reader.fileTotals();
  if (!holder) {
    return { lock: held ? { state: 'held' } : { state: 'free' }, schemaChecksum, files };
  }
  const beat = Date.parse(holder.heartbeatAt);
  const stale =
    held === false ||
    (held === undefined &&
      (!Number.isFinite(beat) ||
        Date.now() - beat > staleAfterSeconds * 1000 ||
        (holder.host === hostname() && !processExists(holder.pid))));
  return { lock: { state: stale ? 'stale' : 'held', holder }, schemaChecksum, files };
}
