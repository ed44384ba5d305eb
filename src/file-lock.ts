/**
 * A lock the operating system releases when its process dies, however it dies (kill -9, out of
 * memory, a crash): SQLite's own lock on a small side file (an empty SQLite database), taken with
 * `BEGIN EXCLUSIVE` and held while that connection stays open. SQLite locks with POSIX record
 * locks (fcntl), which belong to the process: the kernel drops them with it, so the next process
 * takes over at once whatever its pid or host name (a container restarts as pid 1 on the same
 * host name every time). No pid or heartbeat is ever judged.
 *
 * Within one process SQLite keeps its own table of the locks on each file, so a second connection
 * (on any thread) is refused as another process would be, and closing it never drops the first
 * one's lock (a plain `close()` of any descriptor of the file would: never open these files with
 * `fs`).
 *
 * On a network filesystem the lock is only as good as its locking: NFSv4 and SMB with locking on
 * hold it, some FUSE and NFSv3 setups without lockd do not (docs/how-it-works.md).
 */
import Database from 'better-sqlite3';
import { existsSync, statSync } from 'node:fs';
import {
  createPrivateFileSync,
  DEFAULT_PRIVATE_MODES,
  type PrivateModes,
} from './private-files.js';

export class FileLock {
  private released = false;

  private constructor(
    readonly path: string,
    private readonly db: Database.Database,
    private readonly identity: { dev: number; ino: number },
  ) {}

  /**
   * Takes the lock on `path`, creating the file (with the private file mode) when it is missing.
   * Undefined when another process, or another connection of this one, holds it. Throws when the
   * file cannot be created or opened (a read-only folder, a file that is not SQLite's).
   */
  static tryTake(path: string, modes: PrivateModes = DEFAULT_PRIVATE_MODES): FileLock | undefined {
    createPrivateFileSync(path, modes);
    const db = new Database(path, { fileMustExist: true, timeout: 0 });
    try {
      db.exec('BEGIN EXCLUSIVE');
    } catch (error) {
      db.close();
      if (isBusy(error)) return undefined;
      throw error;
    }
    const { dev, ino } = statSync(path);
    return new FileLock(path, db, { dev, ino });
  }

  /**
   * False once the file at `path` is no longer the one locked (someone deleted or replaced it):
   * a process that starts then would lock the new file, so the holder must stop.
   */
  stillInPlace(): boolean {
    try {
      const { dev, ino } = statSync(this.path);
      return dev === this.identity.dev && ino === this.identity.ino;
    } catch {
      return false;
    }
  }

  /** Lets go (closing the connection ends its transaction and its lock); idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.db.close();
  }
}

/**
 * Whether some process holds the lock on `path` (false when there is no such file); undefined when
 * this user may not open it. It takes a shared lock for an instant (a holder refuses it) and
 * creates nothing.
 */
export function fileLockHeld(path: string): boolean | undefined {
  if (!existsSync(path)) return false;
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true, timeout: 0 });
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_CANTOPEN') return undefined;
    throw error;
  }
  try {
    db.prepare('SELECT count(*) FROM sqlite_master').get();
    return false;
  } catch (error) {
    if (isBusy(error)) return true;
    throw error;
  } finally {
    db.close();
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: string }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}
