/**
 * One file's bytes from the server into the blob store. The HTTP source does the pacing and the
 * retries; here the body is streamed into the store, cut off once it passes `files.max_file_mib`,
 * and its size checked against Content-Length (a short body is retried like any other transient
 * failure). The row's `content_size` bounds nothing: the server keeps it from the file's last save
 * and a stored row can be older than the file (REFERENCE.md, File contents: trust the bytes).
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
import type { ContentStore, StoredBlob } from './content-store.js';

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

export interface FileFetchOptions {
  signal?: AbortSignal;
  /** `files.max_file_mib` in bytes: no file is stored larger, whatever its row says. */
  maxBytes?: number;
  /** Awaited once every byte is in hand and checked, before they are stored. */
  received?: () => Promise<void>;
}

export const DEFAULT_MAX_FILE_BYTES = 1024 * 1024 * 1024;
const CEILING_SETTING = 'files.max_file_mib (OCS_FILES_MAX_FILE_MIB)';

export async function fetchFile(
  source: FileContentSource,
  store: ContentStore,
  fileId: string,
  options: FileFetchOptions = {},
): Promise<FetchedFile> {
  // Counted while the body streams, not after.
  const limit = options.maxBytes ?? DEFAULT_MAX_FILE_BYTES;
  const tooLarge: TooLarge = (seen) => fileTooLarge(fileId, limit, seen);
  const result = await source.fileContent(
    fileId,
    async (body, info) => {
      const blob = await store.write(
        limitedChunks(body, limit, tooLarge, info.contentLength),
        async ({ size }) => {
          if (info.contentLength !== undefined && size !== info.contentLength) {
            throw new TransientFailure(
              'bad_body',
              `file ${fileId}: received ${size} bytes, Content-Length said ${info.contentLength}`,
            );
          }
          await options.received?.();
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
  seen: { bytes: number; declared?: number },
): ResponseTooLargeError {
  return new ResponseTooLargeError(
    `file ${fileId}: the server sent more than the ${formatByteCount(limit)} ${CEILING_SETTING} allows: ${describeSeen(seen)}; nothing was stored, and the next run asks again.`,
    { hint: `If the team's files really are that large, raise ${CEILING_SETTING}.` },
  );
}
