/**
 * The content-addressed blob store: each distinct content once, at
 * `<dir>/sha256/<first two hex digits>/<full hex digest>`. Bytes are streamed to a temporary file
 * in `<dir>/sha256/` (same file system, so the rename is atomic), hashed on the way, fsynced, then
 * renamed to their final name: a final name only ever holds complete bytes, whatever instant the
 * process dies at. Temporary files a killed run left behind are removed by the next writer.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { ObjectRead } from '../storage/store.js';
import { readdir, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { BlobStoreError } from '../errors.js';
import {
  DEFAULT_PRIVATE_MODES,
  makePrivateFolder,
  openPrivateFile,
  syncFolder,
} from '../private-files.js';
import { blobKey, type BlobCheck, type ContentStore, type StoredBlob } from './content-store.js';

export type { BlobCheck, StoredBlob } from './content-store.js';

const PARTIAL_PREFIX = '.partial-';

/** Where the blob with this SHA-256 (lowercase hex) lives under `dir`. Pure. */
export function blobPath(dir: string, sha256: string): string {
  return join(dir, ...blobKey(sha256).split('/'));
}

export class BlobStore implements ContentStore {
  /** `modes`: blobs and the folders made for them are private (`data_file_mode`, 0600/0700). */
  constructor(
    readonly dir: string,
    private readonly modes = DEFAULT_PRIVATE_MODES,
  ) {}

  get location(): string {
    return this.dir;
  }

  whereIs(sha256: string): string {
    return blobPath(this.dir, sha256);
  }

  close(): void {}

  async read(sha256: string): Promise<ObjectRead | undefined> {
    const path = blobPath(this.dir, sha256);
    const size = await stat(path).then(
      (info) => (info.isFile() ? info.size : undefined),
      () => undefined,
    );
    return size === undefined ? undefined : { size, body: createReadStream(path) };
  }

  private get root(): string {
    return join(this.dir, 'sha256');
  }

  /** Creates the folder and removes partial files of earlier, interrupted runs. */
  async prepare(): Promise<number> {
    await this.onDisk(() => makePrivateFolder(this.root, this.modes));
    let removed = 0;
    for (const name of await this.onDisk(() => readdir(this.root))) {
      if (!name.startsWith(PARTIAL_PREFIX)) continue;
      await unlink(join(this.root, name)).catch(() => undefined);
      removed += 1;
    }
    return removed;
  }

  /**
   * Streams `body` into the store. `check` runs on the complete, synced temporary file before it
   * gets its final name (a size check); when it throws, the temporary file is removed.
   */
  async write(
    body: AsyncIterable<Uint8Array>,
    check?: (blob: { sha256: string; size: number }) => void | Promise<void>,
  ): Promise<StoredBlob> {
    const temporary = join(this.root, `${PARTIAL_PREFIX}${randomUUID()}`);
    const handle = await this.onDisk(() => openPrivateFile(temporary, this.modes));
    let closed = false;
    try {
      const hash = createHash('sha256');
      let size = 0;
      // Errors of the body (a reset, a limit passed) pass as they are; the disk's are named.
      for await (const chunk of body) {
        hash.update(chunk);
        size += chunk.length;
        let offset = 0;
        while (offset < chunk.length) {
          const { bytesWritten } = await this.onDisk(() =>
            handle.write(chunk, offset, chunk.length - offset),
          );
          offset += bytesWritten;
        }
      }
      await this.onDisk(() => handle.sync());
      await this.onDisk(() => handle.close());
      closed = true;
      const sha256 = hash.digest('hex');
      await check?.({ sha256, size });
      const final = blobPath(this.dir, sha256);
      return await this.onDisk(async () => {
        // Same digest, same size: the same content is already there. A damaged copy is replaced.
        if ((await sizeOf(final)) === size) {
          await unlink(temporary);
          return { sha256, size, created: false };
        }
        await makePrivateFolder(dirname(final), this.modes);
        await rename(temporary, final);
        await syncFolder(dirname(final));
        return { sha256, size, created: true };
      });
    } catch (error) {
      if (!closed) await handle.close().catch(() => undefined);
      await unlink(temporary).catch(() => undefined);
      throw error;
    }
  }

  /** `operation` on the store's disk, its failure said as the store's (BlobStoreError). */
  private async onDisk<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      throw new BlobStoreError(
        `Cannot write file contents to files.dir (${this.dir}): ${(error as Error).message}`,
        {
          hint:
            DISK_HINTS[code] ?? 'Check the folder files.dir (OCS_FILES_DIR) names and its disk.',
          cause: error,
        },
      );
    }
  }

  /** Deletes a blob (a damaged one, before it is fetched again). */
  async remove(sha256: string): Promise<void> {
    await unlink(blobPath(this.dir, sha256)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
  }

  /** Re-hashes a stored blob (streaming) and compares it with what the ledger says. */
  async check(sha256: string, size: number | null): Promise<BlobCheck> {
    const path = blobPath(this.dir, sha256);
    const actualSize = await sizeOf(path);
    if (actualSize === undefined) return { status: 'missing' };
    if (size !== null && actualSize !== size) {
      return { status: 'corrupt', reason: `${actualSize} bytes on disk, ${size} recorded` };
    }
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
      hash.update(chunk as Buffer);
    }
    const actual = hash.digest('hex');
    return actual === sha256
      ? { status: 'ok' }
      : { status: 'corrupt', reason: `content hashes to ${actual}` };
  }
}

const NOT_WRITABLE =
  'Make files.dir (OCS_FILES_DIR) writable by the user ocs-sync runs as, on a disk mounted read-write.';
const NO_ROOM = 'Free space on the disk that holds files.dir (OCS_FILES_DIR), or raise its quota.';
const TOO_MANY_OPEN =
  "Too many open files: raise the limit (ulimit -n, or the container's nofile) or lower files.concurrency.";
const DISK_HINTS: Record<string, string> = {
  EACCES: NOT_WRITABLE,
  EPERM: NOT_WRITABLE,
  EROFS: NOT_WRITABLE,
  ENOSPC: NO_ROOM,
  EDQUOT: NO_ROOM,
  EMFILE: TOO_MANY_OPEN,
  ENFILE: TOO_MANY_OPEN,
};

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
