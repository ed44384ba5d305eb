/**
 * A SQLite warehouse copied whole while a sync may be writing it (SQLite's online backup: a
 * consistent copy of one moment, without the writer lock), and whether a process holds a
 * warehouse file a restore would replace.
 */
import Database from 'better-sqlite3';
import { fileLockHeld } from '../../file-lock.js';
import { sqliteLockFile } from './file.js';

/** Copies the warehouse at `path` into the new file `destination` (online backup). */
export async function backupSqlite(path: string, destination: string): Promise<void> {
  const db = new Database(path, { readonly: true, fileMustExist: true, timeout: 10_000 });
  try {
    await db.backup(destination);
  } finally {
    db.close();
  }
}

/**
 * Why the warehouse file at `path` cannot be replaced now (a sync holds its writer lock, or some
 * process has it open), or undefined when none does. False alarms are impossible; a process that
 * opens it right after this is not seen.
 */
export function sqliteHeldBy(path: string): string | undefined {
  if (fileLockHeld(sqliteLockFile(path)) === true) return 'a sync holds its writer lock';
  let db: Database.Database;
  try {
    db = new Database(path, { fileMustExist: true, timeout: 0 });
  } catch {
    return undefined;
  }
  try {
    // An exclusive lock is refused while any other connection has the file open (in WAL mode
    // each holds a shared lock on it for as long as it is open).
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE; COMMIT');
    return undefined;
  } catch (error) {
    const code = (error as { code?: string }).code ?? '';
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
      return 'another process has it open (a daemon, serve, a sync)';
    }
    throw error;
  } finally {
    db.close();
  }
}
