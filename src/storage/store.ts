/**
 * The narrow interface every place that keeps things off the warehouse goes through (file
 * contents, signed checkpoints, snapshots, Parquet): a folder on this machine (folder-store.ts) or
 * a bucket (s3-store.ts). Keys are relative to the location's prefix, `/`-separated. An object is
 * either complete under its key or absent: both implementations write elsewhere first and make
 * the key appear at once (a rename, a PUT or a completed multipart upload).
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';

export interface ObjectInfo {
  /** Relative to the location. */
  key: string;
  size: number;
  modified?: Date;
}

export type RetentionMode = 'compliance' | 'governance';

export interface PutOptions {
  /**
   * Never replace an object already under the key (`If-None-Match: *` where the store honours
   * it, after a HEAD): `created` false when one was there.
   */
  ifAbsent?: boolean;
  /** With `ifAbsent`: false when the caller has just looked (HEAD) and found nothing. */
  headFirst?: boolean;
  /** SHA-256 (hex) of the whole body: the store checks the bytes it received against it. */
  sha256?: string;
  contentType?: string;
  /** Object Lock retention (buckets only): nobody can delete or replace it before `until`. */
  retention?: { mode: RetentionMode; until: Date };
}

/**
 * A file on this machine, of a known size, read by position: a part is read again for a retry,
 * and into a buffer its upload reuses (s3-multipart.ts).
 */
export interface FileBody {
  size: number;
  /** Reads into `into` from `position`: how many bytes (0 at the end of the file). */
  read(into: Uint8Array, position: number): Promise<number>;
  /** Every byte from the start, as a stream. */
  stream(): Readable;
}

/** A body: bytes in memory, or a file. */
export type PutBody = Uint8Array | FileBody;

/** An open file as a body; the caller closes it. */
export function fileBody(handle: FileHandle, size: number): FileBody {
  return {
    size,
    read: async (into, position) => (await handle.read(into, 0, into.length, position)).bytesRead,
    stream: () => handle.createReadStream({ start: 0, autoClose: false, highWaterMark: 1 << 20 }),
  };
}

/** Fills `into` from the file at `position`: a file shorter than it said is an error. */
export async function readExactly(file: FileBody, into: Buffer, position: number): Promise<Buffer> {
  let filled = 0;
  while (filled < into.length) {
    const read = await file.read(into.subarray(filled), position + filled);
    if (read === 0) {
      throw new Error(
        `the file being uploaded ended at ${position + filled} bytes, before the ${file.size} it had`,
      );
    }
    filled += read;
  }
  return into;
}

/** Puts the file at `path` under `key`. */
export async function putFile(
  store: ObjectStore,
  key: string,
  path: string,
  options: PutOptions = {},
): Promise<{ created: boolean }> {
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    return await store.put(key, fileBody(handle, size), options);
  } finally {
    await handle.close();
  }
}

export interface ObjectRead {
  size: number;
  /** The object's bytes; a read cut short is resumed where it stopped, never shortened. */
  body: AsyncIterable<Uint8Array>;
}

export interface ObjectStore {
  /** `s3://bucket/prefix` or the folder, as configured. */
  readonly location: string;
  /** The full name of a key, for messages: `s3://bucket/prefix/key` or `folder/key`. */
  where(key: string): string;
  /** Whether the location is a bucket (Object Lock, multipart uploads) or a folder. */
  readonly kind: 's3' | 'folder';
  /** Fails with one clear line (ObjectStoreError) when the location cannot be used. */
  probe(): Promise<void>;
  put(key: string, body: PutBody, options?: PutOptions): Promise<{ created: boolean }>;
  get(key: string): Promise<ObjectRead | undefined>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Every object under `prefix` (relative), in key order. */
  list(prefix?: string): AsyncIterable<ObjectInfo>;
  delete(key: string): Promise<void>;
  /** Removes what interrupted writers left (unfinished uploads, partial files); how many. */
  clearUnfinished(prefix?: string): Promise<number>;
  /** Object Lock on the bucket: its default retention, or why there is none. */
  objectLock(): Promise<ObjectLockState>;
  close(): void;
}

export type ObjectLockState =
  | { status: 'enabled'; defaultRetention?: { mode: RetentionMode; days: number } }
  | { status: 'disabled' }
  | { status: 'unsupported'; detail: string };

/** Reads a whole object (small ones: checkpoints, digests). */
export async function readObjectText(store: ObjectStore, key: string): Promise<string | undefined> {
  const read = await store.get(key);
  if (read === undefined) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of read.body) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}
