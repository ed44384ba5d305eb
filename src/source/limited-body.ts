/**
 * Response bodies read with a size limit enforced while they stream: bytes are counted as they
 * arrive and the body is abandoned (which closes the connection) as soon as the count passes the
 * limit, so a server that sends more than it should, with or without a Content-Length, costs at
 * most the limit plus one chunk of memory or disk.
 */

/** Builds the error for a body past its limit; `declared` when the Content-Length said so first. */
export type TooLarge = (seen: { bytes: number; declared?: number }) => Error;

/**
 * The chunks of `body`, stopping with `tooLarge` once more than `limit` bytes arrived. Leaving
 * the loop early (this error, or the caller's) ends the iteration of `body`, which for an HTTP
 * response destroys it.
 */
export async function* limitedChunks(
  body: AsyncIterable<Uint8Array>,
  limit: number,
  tooLarge: TooLarge,
  declaredLength?: number,
): AsyncGenerator<Uint8Array> {
  if (declaredLength !== undefined && declaredLength > limit) {
    // Nothing is read: the server said up front it would send too much.
    throw tooLarge({ bytes: 0, declared: declaredLength });
  }
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    if (bytes > limit) throw tooLarge({ bytes });
    yield chunk;
  }
}

/**
 * The whole body, at most `limit` bytes of it, in one buffer of its own (so it can be handed to
 * another thread without a copy). `watch` sees each chunk as it arrives (synchronously: no extra
 * await a chunk) until it returns false.
 */
export async function readLimitedBytes(
  body: AsyncIterable<Uint8Array>,
  limit: number,
  tooLarge: TooLarge,
  declaredLength?: number,
  watch?: (chunk: Uint8Array) => boolean,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  let watching = watch;
  for await (const chunk of limitedChunks(body, limit, tooLarge, declaredLength)) {
    if (watching && !watching(chunk)) watching = undefined;
    chunks.push(chunk);
    size += chunk.length;
  }
  // Not Buffer.concat: a small result would share Node's buffer pool, which cannot be moved.
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

/** What a too-large body came to, for its error: the bytes seen, or the length announced. */
export function describeSeen(seen: { bytes: number; declared?: number }): string {
  return seen.declared === undefined
    ? `cut off after ${seen.bytes} bytes`
    : `its Content-Length said ${seen.declared} bytes; nothing was read`;
}

/** Bytes in the form people read them: `64 MiB`, `10 bytes`. */
export function formatByteCount(bytes: number): string {
  const mib = 1024 * 1024;
  if (bytes >= mib && bytes % mib === 0) return `${bytes / mib} MiB`;
  if (bytes >= mib) return `${(bytes / mib).toFixed(1)} MiB (${bytes} bytes)`;
  return `${bytes} byte${bytes === 1 ? '' : 's'}`;
}
