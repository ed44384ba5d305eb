/**
 * One file's bytes from the server into the blob store. The HTTP source does the pacing and the
 * retries; here the body is streamed into the store, cut off once it passes its limit (the row's
 * `content_size`, or `files.max_file_mib`), and its size checked against Content-Length (a short
 * body is retried like any other transient failure).
 */
import { ResponseTooLargeError } from '../errors.js';
import type { FileContentInfo } from '../source/http-source.js';
import {
  describeSeen,
  formatByteCount,
  limitedChunks,
  type TooLarge,
} from '../source/limited-body.js';
import { TransientFailure } from '../source/retry.js';
import type { BlobStore, StoredBlob } from './blob-store.js';

/** The server's file content endpoint, as the files step sees it. `HttpExportSource` is the real one. */
export interface FileContentSource {
  fileContent<T>(
    fileId: string,
    consume: (body: AsyncIterable<Uint8Array>, info: FileContentInfo) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<{ status: 'ok'; value: T } | { status: 'missing' }>;
}

export type FetchedFile =
  { status: 'ok'; blob: StoredBlob; contentType: string | null } | { status: 'missing' };

/** What bounds a file's bytes: its row's `content_size` when it gives one, and the ceiling. */
export interface FileFetchOptions {
  signal?: AbortSignal;
  /** The row's `content_size` when positive; null when the row gives none (null or 0). */
  contentSize?: number | null;
  /** `files.max_file_mib` in bytes: no file is stored larger, whatever its row says. */
  maxBytes?: number;
}

export const DEFAULT_MAX_FILE_BYTES = 1024 * 1024 * 1024;
const CEILING_SETTING = 'files.max_file_mib (OCS_FILES_MAX_FILE_MIB)';

export async function fetchFile(
  source: FileContentSource,
  store: BlobStore,
  fileId: string,
  options: FileFetchOptions = {},
): Promise<FetchedFile> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_FILE_BYTES;
  const declared = options.contentSize ?? null;
  // The row says how big the file is (the server sets content_size from the stored file); a
  // row without a size gets the ceiling. Counted while the body streams, not after.
  const bySize = declared !== null && declared <= maxBytes;
  const limit = bySize ? declared : maxBytes;
  const tooLarge: TooLarge = (seen) => fileTooLarge(fileId, limit, bySize, seen);
  const result = await source.fileContent(
    fileId,
    async (body, info) => {
      const blob = await store.write(
        limitedChunks(body, limit, tooLarge, info.contentLength),
        ({ size }) => {
          if (info.contentLength !== undefined && size !== info.contentLength) {
            throw new TransientFailure(
              'bad_body',
              `file ${fileId}: received ${size} bytes, Content-Length said ${info.contentLength}`,
            );
          }
        },
      );
      return { blob, contentType: info.contentType };
    },
    options.signal,
  );
  return result.status === 'missing' ? result : { status: 'ok', ...result.value };
}

function fileTooLarge(
  fileId: string,
  limit: number,
  bySize: boolean,
  seen: { bytes: number; declared?: number },
): ResponseTooLargeError {
  const received = describeSeen(seen);
  const stored = 'nothing was stored, and the next run asks again';
  if (bySize) {
    return new ResponseTooLargeError(
      `file ${fileId}: the server sent more than the ${formatByteCount(limit)} its files row declares (content_size): ${received}; ${stored}.`,
      {
        hint: `The row and the bytes disagree, so no setting raises this limit. If the file changed on the server, \`ocs-sync sync --full-refresh files\` brings its new size. ${CEILING_SETTING} caps files whose row gives no size.`,
      },
    );
  }
  return new ResponseTooLargeError(
    `file ${fileId}: the server sent more than the ${formatByteCount(limit)} ${CEILING_SETTING} allows: ${received}; ${stored}.`,
    { hint: `If the team's files really are that large, raise ${CEILING_SETTING}.` },
  );
}
