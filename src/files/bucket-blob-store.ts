/**
 * File contents in a bucket, at `<prefix>/sha256/ab/abcd…` as in a folder. A content's key is its
 * digest, known only once every byte has passed, so the bytes are hashed as they stream in: held
 * in memory up to one part (`object_storage.part_size_mib`), past that spooled to an unnamed
 * temporary file (unlinked as soon as it is opened, so a killed run leaves nothing). Then, unless
 * the key already holds the content, they go up under their digest: one PUT with the SHA-256 as
 * its checksum, or (after a HEAD) a multipart upload (each part with its own SHA-256,
 * `parts_in_flight` at once), both with `If-None-Match: *`. An object appears under its key only once complete; a multipart
 * upload a killed run left is aborted by the next run's `prepare`.
 */
import { createHash, randomUUID } from 'node:crypto';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ObjectRead, ObjectStore } from '../storage/store.js';
import { blobKey, type BlobCheck, type ContentStore, type StoredBlob } from './content-store.js';

export interface BucketBlobStoreOptions {
  /** Bytes held in memory before the rest is spooled to disk (the part size). */
  partSizeBytes: number;
  /** Where spool files are made (and at once unlinked): the system's temporary folder. */
  spoolDir?: string;
}

export class BucketBlobStore implements ContentStore {
  constructor(
    private readonly store: ObjectStore,
    private readonly options: BucketBlobStoreOptions,
  ) {}

  get location(): string {
    return this.store.location;
  }

  whereIs(sha256: string): string {
    return this.store.where(blobKey(sha256));
  }

  /** Checks the bucket can be used, and aborts the unfinished uploads of killed runs. */
  async prepare(): Promise<number> {
    await this.store.probe();
    return this.store.clearUnfinished('sha256');
  }

  async write(
    body: AsyncIterable<Uint8Array>,
    check?: (blob: { sha256: string; size: number }) => void,
  ): Promise<StoredBlob> {
    const hash = createHash('sha256');
    let size = 0;
    let held: Buffer[] = [];
    let heldBytes = 0;
    let spool: FileHandle | undefined;
    try {
      // Errors of the body (a reset, a limit passed) pass as they are.
      for await (const chunk of body) {
        hash.update(chunk);
        size += chunk.length;
        if (spool === undefined) {
          held.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          heldBytes += chunk.length;
          if (heldBytes > this.options.partSizeBytes) {
            spool = await openSpool(this.options.spoolDir ?? tmpdir());
            await writeAll(spool, Buffer.concat(held));
            held = [];
          }
        } else {
          await writeAll(spool, chunk);
        }
      }
      const sha256 = hash.digest('hex');
      check?.({ sha256, size });
      const key = blobKey(sha256);
      // A content of more than a part is looked for first (a HEAD costs less than sending it
      // again); a smaller one is sent with If-None-Match: * alone, which the store answers 412
      // when it holds the key (a store that ignores the header rewrites the same bytes).
      const existing = spool === undefined ? undefined : await this.store.head(key);
      // Same digest, same size: the same content is already there. A damaged copy is replaced.
      if (existing !== undefined && existing.size === size) return { sha256, size, created: false };
      const file = spool;
      const { created } = await this.store.put(
        key,
        file === undefined
          ? Buffer.concat(held)
          : () => file.createReadStream({ start: 0, autoClose: false, highWaterMark: 1 << 20 }),
        { sha256, size, ifAbsent: existing === undefined, headFirst: false },
      );
      return { sha256, size, created };
    } finally {
      await spool?.close().catch(() => undefined);
    }
  }

  async remove(sha256: string): Promise<void> {
    await this.store.delete(blobKey(sha256));
  }

  async check(sha256: string, size: number | null): Promise<BlobCheck> {
    const read = await this.store.get(blobKey(sha256));
    if (read === undefined) return { status: 'missing' };
    if (size !== null && read.size !== size) {
      // Not read: the size says enough.
      for await (const _ of read.body) break;
      return { status: 'corrupt', reason: `${read.size} bytes in the bucket, ${size} recorded` };
    }
    const hash = createHash('sha256');
    for await (const chunk of read.body) hash.update(chunk);
    const actual = hash.digest('hex');
    return actual === sha256
      ? { status: 'ok' }
      : { status: 'corrupt', reason: `content hashes to ${actual}` };
  }

  read(sha256: string): Promise<ObjectRead | undefined> {
    return this.store.get(blobKey(sha256));
  }

  close(): void {
    this.store.close();
  }
}

/** A private temporary file with no name: the space is freed whenever the process ends. */
async function openSpool(folder: string): Promise<FileHandle> {
  const path = join(folder, `ocs-sync-spool-${randomUUID()}`);
  const handle = await open(path, 'wx+', 0o600);
  await unlink(path);
  return handle;
}

async function writeAll(handle: FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}
