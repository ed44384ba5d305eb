/**
 * `ocs-sync check`'s look at the warehouse: can it be reached, could we write to it, who holds
 * the writer lock, which schema checksum the last run saw. Writes nothing, creates nothing. Each
 * dialect looks at its own store (sqlite/probe.ts, postgres/reader.ts; open.ts picks one) and
 * reads the lock and checksum here.
 */
import { SCHEMA_CHECKSUM_STATE_KEY } from './state-keys.js';
import type { FileTotals } from '../interfaces.js';
import type { LockRecord, WarehouseReader } from './reader.js';

export interface WarehouseProbe {
  description: string;
  /** False when the first sync has yet to create it. */
  exists: boolean;
  /** Why this user could not write to it; undefined when it can. */
  notWritable?: string;
  /** `left`: free, with the record of a holder that ended without releasing it. */
  lock: { state: 'free' } | { state: 'held' | 'left'; holder?: LockRecord };
  /** The schema checksum the last complete run brought the tables to. */
  schemaChecksum?: string;
  /** File contents kept so far (absent when the warehouse does not exist yet). */
  files?: FileTotals;
}

/**
 * The lock as the lock itself tells it (the SQLite side file, PostgreSQL's advisory lock), with
 * its record for who holds it: a record nobody holds the lock of was left by a process that ended.
 */
export async function readLockAndChecksum(
  reader: WarehouseReader,
): Promise<Pick<WarehouseProbe, 'lock' | 'schemaChecksum' | 'files'>> {
  const holder = await reader.lockHolder();
  const held = await reader.writerLockHeld();
  const schemaChecksum = await reader.getState(SCHEMA_CHECKSUM_STATE_KEY);
  const files = await reader.fileTotals();
  // When the lock cannot be asked (a side file this user may not open), the record is all there is.
  const lock: WarehouseProbe['lock'] =
    held === true || (held === undefined && holder)
      ? { state: 'held', holder }
      : holder
        ? { state: 'left', holder }
        : { state: 'free' };
  return { lock, schemaChecksum, files };
}
