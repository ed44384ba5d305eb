/**
 * Where file contents are kept, content-addressed (`sha256/ab/abcd…`): a folder (blob-store.ts)
 * or a bucket (bucket-blob-store.ts). The files step writes through it, `files verify` re-hashes
 * through it, and `serve` reads from it.
 */
import type { ObjectRead } from '../storage/store.js';

export interface StoredBlob {
  sha256: string;
  size: number;
  /** False when the same content was already stored (the new copy was dropped). */
  created: boolean;
}

export type BlobCheck =
  { status: 'ok' } | { status: 'missing' } | { status: 'corrupt'; reason: string };

export interface ContentStore {
  /** files.dir as configured: a folder, or `s3://bucket/prefix`. */
  readonly location: string;
  /** Makes the place ready and removes what interrupted runs left; how many such leftovers. */
  prepare(): Promise<number>;
  /**
   * Streams `body` in, hashing it on the way; `check` runs (and is awaited) once the bytes are
   * all there, before they get their final name: a size check, a wait for a turn to store. Only
   * complete bytes ever sit under a digest.
   */
  write(
    body: AsyncIterable<Uint8Array>,
    check?: (blob: { sha256: string; size: number }) => void | Promise<void>,
  ): Promise<StoredBlob>;
  /** Deletes a blob (a damaged one, before it is fetched again). */
  remove(sha256: string): Promise<void>;
  /** Re-hashes a stored blob (streaming) against its digest and recorded size. */
  check(sha256: string, size: number | null): Promise<BlobCheck>;
  /** A stored blob's bytes, or undefined when it is not there. */
  read(sha256: string): Promise<ObjectRead | undefined>;
  /** Where a blob is, for messages: its path or its s3:// name. */
  whereIs(sha256: string): string;
  /** Lets go of connections (a bucket's). */
  close(): void;
}

const DIGEST = /^[0-9a-f]{64}$/;

/** `sha256/ab/abcd…`: a blob's key under the store. */
export function blobKey(sha256: string): string {
  if (!DIGEST.test(sha256)) {
    throw new Error(`Not a SHA-256 hex digest: ${JSON.stringify(sha256.slice(0, 80))}`);
  }
  return `sha256/${sha256.slice(0, 2)}/${sha256}`;
}
