/**
 * File contents in a bucket, at `<prefix>/sha256/ab/abcd…` as in a folder. A content's key is its
 * digest, known only once every byte has passed, so the bytes are hashed as they stream in: held
 * in memory up to one part (`object_storage.part_size_mib`, at most 64 MiB) in a buffer kept for
 * the next content, past that spooled to an unnamed temporary file (unlinked as soon as it is
 * opened, so a killed run leaves nothing). Then, unless the key already holds the content, they
 * go up under their digest with `If-None-Match: *`: one PUT with the SHA-256 as its checksum, or,
 * above a part, a multipart upload (each part with its own SHA-256, `parts_in_flight` at once). A
 * spooled content is looked for first (HEAD). An object appears under its key only once complete;
 * a multipart upload a killed run left is aborted by the next run's `prepare`.
 */
import { createHash, randomUUID } from 'node:crypto';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileBody, type ObjectRead, type ObjectStore } from '../storage/store.js';
import { blobKey, type BlobCheck, type ContentStore, type StoredBlob } from './content-store.js';

/** Spooled bytes are written a mebibyte at a time. */
const SPOOL_WRITE = 1 << 20;
/** The most of a content held in memory, whatever the part size (up to 5 GiB) says. */
const MAX_GATHER = 64 << 20;

export interface BucketBlobStoreOptions {
  /** Bytes held in memory before the rest is spooled to disk (the part size, at most 64 MiB). */
  partSizeBytes: number;
  /** Where spool files are made (and at once unlinked): the system's temporary folder. */
  spoolDir?: string;
}

export class BucketBlobStore implements ContentStore {
  /** Buffers contents were gathered in, for the next ones: one for each file at once. */
  private readonly spare: Buffer[] = [];
  private readonly gatherBytes: number;

  constructor(
    private readonly store: ObjectStore,
    private readonly options: BucketBlobStoreOptions,
  ) {
    this.gatherBytes = Math.min(options.partSizeBytes, MAX_GATHER);
  }

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
    check?: (blob: { sha256: string; size: number }) => void | Promise<void>,
  ): Promise<StoredBlob> {
    const hash = createHash('sha256');
    let size = 0;
    // Gathered in a buffer of the last writes (no garbage to collect); past it, spooled.
    const gathered = this.spare.pop() ?? Buffer.allocUnsafeSlow(this.gatherBytes);
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let spool: FileHandle | undefined;
    try {
      // Errors of the body (a reset, a limit passed) pass as they are.
      for await (const chunk of body) {
        hash.update(chunk);
        if (spool === undefined && size + chunk.length <= gathered.length) {
          gathered.set(chunk, size);
          size += chunk.length;
          continue;
        }
        if (spool === undefined) {
          spool = await openSpool(this.options.spoolDir ?? tmpdir());
          pending.push(gathered.subarray(0, size));
          pendingBytes = size;
        }
        size += chunk.length;
        pending.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        pendingBytes += chunk.length;
        // A mebibyte a write, not a write a chunk.
        if (pendingBytes >= SPOOL_WRITE) {
          await writeAll(spool, pending);
          pending = [];
          pendingBytes = 0;
        }
      }
      if (spool !== undefined) await writeAll(spool, pending);
      const sha256 = hash.digest('hex');
      await check?.({ sha256, size });
      const key = blobKey(sha256);
      // A spooled content is looked for first (a HEAD costs less than sending it again); one in
      // memory is sent with If-None-Match: * alone, which the store answers 412 when it holds
      // the key (a store that ignores the header rewrites the same bytes).
      const existing = spool === undefined ? undefined : await this.store.head(key);
      // Same digest, same size: the same content is already there. A damaged copy is replaced.
      let created = false;
      if (existing === undefined || existing.size !== size) {
        ({ created } = await this.store.put(
          key,
          spool === undefined ? gathered.subarray(0, size) : fileBody(spool, size),
          { sha256, ifAbsent: existing === undefined, headFirst: false },
        ));
      }
      // Only once its bytes were sent in full: a failed request could still be reading them.
      this.spare.push(gathered);
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

async function writeAll(handle: FileHandle, chunks: Buffer[]): Promise<void> {
  const rest = [...chunks];
  while (rest.length > 0) {
    let { bytesWritten } = await handle.writev(rest);
    // What a short write left: whole chunks dropped, the first one cut.
    while (rest.length > 0 && bytesWritten >= rest[0]!.length) bytesWritten -= rest.shift()!.length;
    if (bytesWritten > 0) rest[0] = rest[0]!.subarray(bytesWritten);
  }
}
