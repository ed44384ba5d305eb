/**
 * What to do about an SQLite error, for its message: loaded without the driver, so a thread that
 * only hands pages to the writer thread (the sync's page thread) never loads it.
 */

/** The fix for a file that is locked or read-only (the message already names the file). */
export function sqliteHint(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
    return 'Another program holds a lock on the file (an open transaction in sqlite3 or a BI tool?); let it finish or close it, then run again.';
  }
  if (code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_PERM') {
    return 'Give this user write access to the file and its folder (SQLite writes -wal and -shm files beside it).';
  }
  return undefined;
}
