/**
 * A folder on this machine as an object store: a key is a file under the folder. A file is
 * written beside its final name (`.partial-…`), fsynced, then renamed (or, never to replace one,
 * hard-linked) into place, so a name only ever holds complete bytes. Files and folders are made
 * private (data_file_mode).
 */
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, readdir, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { ObjectStoreError } from '../errors.js';
import {
  DEFAULT_PRIVATE_MODES,
  makePrivateFolder,
  openPrivateFile,
  syncFolder,
  type PrivateModes,
} from '../private-files.js';
import type {
  ObjectInfo,
  ObjectLockState,
  ObjectRead,
  ObjectStore,
  PutBody,
  PutOptions,
} from './store.js';

const PARTIAL_PREFIX = '.partial-';

export class FolderStore implements ObjectStore {
  readonly kind = 'folder';

  constructor(
    readonly location: string,
    private readonly modes: PrivateModes = DEFAULT_PRIVATE_MODES,
  ) {}

  where(key: string): string {
    return join(this.location, ...key.split('/'));
  }

  async probe(): Promise<void> {
    await this.onDisk('create', this.location, () => makePrivateFolder(this.location, this.modes));
  }

  async put(key: string, body: PutBody, options: PutOptions = {}): Promise<{ created: boolean }> {
    const final = this.where(key);
    if (options.ifAbsent && (await this.head(key)) !== undefined) return { created: false };
    return this.onDisk('write', final, async () => {
      await makePrivateFolder(dirname(final), this.modes);
      const temporary = join(dirname(final), `${PARTIAL_PREFIX}${randomUUID()}`);
      const handle = await openPrivateFile(temporary, this.modes);
      try {
        if (body instanceof Uint8Array) {
          await handle.writeFile(body);
        } else {
          await pipeline(
            body.stream(),
            new Writable({
              write: (chunk: Buffer, _encoding, done) => {
                handle.write(chunk).then(() => done(), done);
              },
            }),
          );
        }
        await handle.sync();
        await handle.close();
        if (options.ifAbsent) {
          // link fails when the name is taken: never one replaced.
          const created = await link(temporary, final).then(
            () => true,
            (error: NodeJS.ErrnoException) => {
              if (error.code === 'EEXIST') return false;
              throw error;
            },
          );
          await unlink(temporary);
          if (created) await syncFolder(dirname(final));
          return { created };
        }
        await rename(temporary, final);
        await syncFolder(dirname(final));
        return { created: true };
      } catch (error) {
        await handle.close().catch(() => undefined);
        await unlink(temporary).catch(() => undefined);
        throw error;
      }
    });
  }

  async get(key: string): Promise<ObjectRead | undefined> {
    const path = this.where(key);
    const info = await this.head(key);
    if (info === undefined) return undefined;
    return { size: info.size, body: createReadStream(path, { highWaterMark: 1 << 20 }) };
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const path = this.where(key);
    try {
      const info = await stat(path);
      return info.isFile() ? { key, size: info.size, modified: info.mtime } : undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw this.failure('read', path, error);
    }
  }

  async *list(prefix = ''): AsyncIterable<ObjectInfo> {
    const found: ObjectInfo[] = [];
    const walk = async (folder: string): Promise<void> => {
      let names: string[];
      try {
        names = await readdir(folder);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw this.failure('list', folder, error);
      }
      for (const name of names) {
        if (name.startsWith(PARTIAL_PREFIX)) continue;
        const path = join(folder, name);
        const info = await stat(path).catch(() => undefined);
        if (info?.isDirectory()) await walk(path);
        else if (info?.isFile()) {
          const key = relative(this.location, path).split(sep).join('/');
          if (key.startsWith(prefix)) found.push({ key, size: info.size, modified: info.mtime });
        }
      }
    };
    // The folder holding the prefix: `a/b/c` is looked for under `a/b`.
    const slash = prefix.lastIndexOf('/');
    await walk(slash < 0 ? this.location : this.where(prefix.slice(0, slash)));
    yield* found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(key: string): Promise<void> {
    await unlink(this.where(key)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw this.failure('delete', this.where(key), error);
    });
  }

  /** Removes the `.partial-` files a killed writer left under `prefix`. */
  async clearUnfinished(prefix = ''): Promise<number> {
    let removed = 0;
    const walk = async (folder: string): Promise<void> => {
      const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        const path = join(folder, entry.name);
        if (entry.isDirectory()) await walk(path);
        else if (entry.name.startsWith(PARTIAL_PREFIX)) {
          await unlink(path).catch(() => undefined);
          removed += 1;
        }
      }
    };
    await walk(prefix ? this.where(prefix) : this.location);
    return removed;
  }

  async objectLock(): Promise<ObjectLockState> {
    return { status: 'unsupported', detail: `${this.location} is a folder, not a bucket` };
  }

  close(): void {}

  private async onDisk<T>(operation: string, path: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw this.failure(operation, path, error);
    }
  }

  private failure(operation: string, path: string, error: unknown): ObjectStoreError {
    if (error instanceof ObjectStoreError) return error;
    const code = (error as NodeJS.ErrnoException).code ?? '';
    const full = code === 'ENOSPC' || code === 'EDQUOT';
    return new ObjectStoreError(
      full ? 'full' : ['EACCES', 'EPERM', 'EROFS'].includes(code) ? 'setup' : 'other',
      `Cannot ${operation} ${path}: ${(error as Error).message}`,
      {
        hint: full
          ? `Free space on the disk that holds ${this.location}, or raise its quota.`
          : `Check that ${this.location} is a folder this user may write to, on a disk mounted read-write.`,
        cause: error,
      },
    );
  }
}
