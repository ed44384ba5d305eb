/**
 * The bytes behind the fake server's `files` rows (`GET /api/files/{id}/content`). A content is
 * given as bytes, or as a size and a seed from which the bytes are generated chunk by chunk, so a
 * test can serve a gigabyte without holding it. Pure, deterministic.
 */
import { createHash } from 'node:crypto';
import type { Row } from '../interfaces.js';

export type FakeFileContent =
  | { bytes: Uint8Array }
  /** `size` bytes generated from `seed`, never held whole. */
  | { size: number; seed: string };

/** Decides the content of a `files` row; null: the server has no blob for it (404). */
export type FakeFileContentFor = (row: Row) => FakeFileContent | null;

const CHUNK = 64 * 1024;

export function contentSize(content: FakeFileContent): number {
  return 'bytes' in content ? content.bytes.length : content.size;
}

/** The content in chunks of at most 64 KiB (not to be changed: they may be shared). */
export function* contentChunks(content: FakeFileContent): Generator<Uint8Array> {
  if ('bytes' in content) {
    for (let offset = 0; offset < content.bytes.length; offset += CHUNK) {
      yield content.bytes.subarray(offset, offset + CHUNK);
    }
    return;
  }
  // One 64 KiB block from the seed (SHAKE256's output is as long as asked: one hash a content,
  // cheap enough that a bench measures the sync, not this); each chunk stamps its index into it
  // so no two are alike.
  const block = createHash('shake256', { outputLength: CHUNK }).update(content.seed).digest();
  // The stamp is a chunk of its own and the rest a view of the block, never changed once made:
  // serving a gigabyte allocates kilobytes, not the gigabyte (whose collection a bench would
  // count as the server's).
  for (let index = 0, offset = 0; offset < content.size; index += 1, offset += CHUNK) {
    const length = Math.min(CHUNK, content.size - offset);
    if (length < 4) {
      yield block.subarray(0, length);
      continue;
    }
    const stamp = Buffer.allocUnsafe(4);
    stamp.writeUInt32BE(index >>> 0, 0);
    yield stamp;
    yield block.subarray(4, length);
  }
}

/** SHA-256 (hex) and size of a content, computed by streaming it. */
export function contentDigest(content: FakeFileContent): { sha256: string; size: number } {
  const hash = createHash('sha256');
  let size = 0;
  for (const chunk of contentChunks(content)) {
    hash.update(chunk);
    size += chunk.length;
  }
  return { sha256: hash.digest('hex'), size };
}

/** Shared by several rows, so the store keeps one copy. */
export const SHARED_CONTENT = Buffer.from('The team logo, attached to many chats.\n');
export const LARGE_CONTENT_BYTES = 3 * 1024 * 1024;

/** One line of a small sample file: fixed length, so a file's size follows from its id alone. */
const SMALL_LINE_BYTES = 70;

/**
 * The sample contents, by id: a tenth have no blob (404), a tenth are empty, a tenth share one
 * content, ids 7, 32, 57, ... are 3 MiB, the rest small text. Bytes depend on the row's `file`
 * and `updated_at`, so an edited row serves new bytes; their size depends on the id only, so the
 * row's `content_size` (sampleContentSize) stays true after an edit, as the server keeps it.
 */
export const sampleFileContent: FakeFileContentFor = (row) => {
  const id = BigInt(row.id);
  const version = `${String(row.id)}:${String(row.file)}:${String(row.updated_at)}`;
  if (id % 10n === 3n) return null;
  if (id % 10n === 0n) return { bytes: new Uint8Array() };
  if (id % 10n === 5n) return { bytes: SHARED_CONTENT };
  if (id % 25n === 7n) return { size: LARGE_CONTENT_BYTES, seed: version };
  const line = `file ${createHash('sha256').update(version).digest('hex')}\n`;
  return { bytes: Buffer.from(line.repeat(smallLines(id))) };
};

function smallLines(id: bigint): number {
  return Number(id % 7n) + 1;
}

/**
 * The `content_size` of a sample `files` row, as the server keeps it: the size of its stored file
 * (sampleFileContent), 0 for an empty one, and null for a tenth of the rows whose blob exists all
 * the same (REFERENCE.md: trust the bytes, not the field). A row whose blob the storage lost
 * (404) still says the size it had.
 */
export function sampleContentSize(rowId: number | bigint): number | null {
  const id = BigInt(rowId);
  if (id % 10n === 9n) return null;
  if (id % 10n === 0n) return 0;
  if (id % 10n === 5n) return SHARED_CONTENT.length;
  if (id % 25n === 7n) return LARGE_CONTENT_BYTES;
  return SMALL_LINE_BYTES * smallLines(id);
}

const CONTENT_TYPES: Record<string, string> = {
  txt: 'text/plain',
  csv: 'text/csv',
  json: 'application/json',
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  wav: 'audio/x-wav',
  mp3: 'audio/mpeg',
  html: 'text/html',
};

/** The type the server guesses from a name's extension (Python's mimetypes, in small). */
export function guessContentType(name: unknown): string {
  const extension = typeof name === 'string' ? /\.([a-z0-9]+)$/i.exec(name)?.[1] : undefined;
  return CONTENT_TYPES[extension?.toLowerCase() ?? ''] ?? 'application/octet-stream';
}
