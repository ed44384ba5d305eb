/**
 * The SQLite warehouse file on disk. It may hold opened secrets (the `plaintext` policy), so it is
 * created readable by its owner only; SQLite gives its `-wal` and `-shm` files the same mode.
 */
import { closeSync, existsSync, openSync, statSync } from 'node:fs';

/** Create an empty warehouse file with mode 0600 unless one is already there. */
export function createPrivateSqliteFile(path: string): void {
  if (existsSync(path)) return;
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch (error) {
    // Another process created it first: it is theirs to have made private.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/** The warehouse file and its companions that group or others may read. */
export function sqliteFilesReadableByOthers(path: string): string[] {
  return [path, `${path}-wal`, `${path}-shm`].filter((file) => {
    try {
      return (statSync(file).mode & 0o077) !== 0;
    } catch {
      return false;
    }
  });
}
