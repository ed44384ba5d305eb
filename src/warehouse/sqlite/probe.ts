/** `check`'s look at an SQLite warehouse (see ../probe.ts): the file, its folder, the lock. */
import { accessSync, constants, existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { WarehouseProbe } from '../probe.js';
import type { WarehouseReader } from '../reader.js';

export async function probeSqlite(
  path: string,
  readLock: (
    reader: WarehouseReader,
  ) => Promise<Pick<WarehouseProbe, 'lock' | 'schemaChecksum' | 'files'>>,
): Promise<WarehouseProbe> {
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
  // The driver is loaded only for a file that exists.
  const { openSqliteReader } = await import('./reader.js');
  const reader = openSqliteReader(path);
  try {
    return {
      description: reader.description,
      exists: true,
      notWritable: writableReason(path) ?? writableReason(dirname(path)),
      ...(await readLock(reader)),
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
