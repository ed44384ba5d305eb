/**
 * `ocs-sync check`'s look at the warehouse: can it be reached, could we write to it, who holds
 * the writer lock, which schema checksum the last run saw. Writes nothing, creates nothing. Each
 * dialect looks at its own store (sqlite/probe.ts, postgres/reader.ts; open.ts picks one) and
 * reads the lock and checksum here.
 */
import { hostname } from 'node:os';
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
