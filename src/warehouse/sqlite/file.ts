/**
 * The SQLite warehouse file on disk. It holds team data and may hold opened secrets (the
 * `plaintext` policy), so it is created readable by its owner only (`data_file_mode`) before
 * SQLite opens it; SQLite gives its `-wal` and `-shm` files the same mode. The writer lock's side
 * file (`-lock`, lock.ts) holds nothing, but is created with the same mode.
 */
import { statSync } from 'node:fs';
import { createPrivateFileSync, DEFAULT_PRIVATE_MODES } from '../../private-files.js';

/** Create an empty warehouse file with the private file mode unless one is already there. */
export function createPrivateSqliteFile(path: string, modes = DEFAULT_PRIVATE_MODES): void {
  createPrivateFileSync(path, modes);
}

/** The side file whose lock is the writer lock (lock.ts). */
export function sqliteLockFile(path: string): string {
  return `${path}-lock`;
}

/** The warehouse file and its companions, as `check` looks at their modes. */
export function sqliteFiles(path: string): string[] {
  return [path, `${path}-wal`, `${path}-shm`, sqliteLockFile(path)];
}

/** The warehouse file and its companions that group or others may read. */
export function sqliteFilesReadableByOthers(path: string): string[] {
  return sqliteFiles(path).filter((file) => {
    try {
      return (statSync(file).mode & 0o077) !== 0;
    } catch {
      return false;
    }
  });
}
