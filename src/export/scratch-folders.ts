/**
 * The folders an export works in before its files are complete: `.partial-*` beside the exported
 * files, and `ocs-parquet-*` in TMPDIR, whose staging database holds a table's rows (opened
 * secrets too, under the `plaintext` policy). Nothing of them may outlive the export:
 *
 * - each is locked by its export while it runs (`owner.lock`, ../file-lock.ts: a lock the kernel
 *   drops when the process dies) and removed when it ends, whatever way: done, failed, stopped by
 *   a signal (parquet.ts), or ended by `process.exit` (a second signal, the crash guard);
 * - the next export removes those a killed one left (kill -9, out of memory, a machine that
 *   stopped): a folder whose lock no process holds.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FileLock, fileLockHeld } from '../file-lock.js';

const LOCK_FILE = 'owner.lock';
/** A folder without a lock file is being made (or was made before locks were): spared this long. */
const UNLOCKED_GRACE_MS = 60_000;

export class ScratchFolder {
  private removed = false;
  private readonly onExit = () => this.remove();

  private constructor(
    readonly path: string,
    private readonly lock: FileLock,
  ) {
    process.on('exit', this.onExit);
  }

  /** A new folder `<parent>/<prefix>XXXXXX` (0700), locked by this process until removed. */
  static async create(parent: string, prefix: string): Promise<ScratchFolder> {
    const path = mkdtempSync(join(parent, prefix));
    try {
      // Another export looking at the new lock file for an instant refuses it: ask again.
      for (let attempt = 0; ; attempt += 1) {
        const lock = FileLock.tryTake(join(path, LOCK_FILE));
        if (lock) return new ScratchFolder(path, lock);
        if (attempt === 50) throw new Error(`Could not lock the new folder ${path}`);
        await sleep(10);
      }
    } catch (error) {
      rmSync(path, { recursive: true, force: true });
      throw error;
    }
  }

  /** Removes the folder and all in it; idempotent. Synchronous, so it can run at exit. */
  remove(): void {
    if (this.removed) return;
    this.removed = true;
    process.off('exit', this.onExit);
    this.lock.release();
    rmSync(this.path, { recursive: true, force: true });
  }
}

/**
 * Removes the folders `<parent>/<prefix>*` that no live export holds: what a killed one left.
 * Returns their paths.
 */
export function removeAbandonedScratchFolders(parent: string, prefix: string): string[] {
  let names: string[];
  try {
    names = readdirSync(parent).filter((name) => name.startsWith(prefix));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const path = join(parent, name);
    try {
      if (!statSync(path).isDirectory() || !abandoned(path)) continue;
      rmSync(path, { recursive: true, force: true });
      removed.push(path);
    } catch {
      // Gone meanwhile, or not ours to look into: left alone.
    }
  }
  return removed;
}

function abandoned(path: string): boolean {
  const lock = join(path, LOCK_FILE);
  if (existsSync(lock)) return fileLockHeld(lock) === false;
  return Date.now() - statSync(path).mtimeMs > UNLOCKED_GRACE_MS;
}
