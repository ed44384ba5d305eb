/**
 * One file's bytes from the server into the blob store. The HTTP source does the pacing and the
 * retries; here the body is streamed into the store and its size checked against Content-Length
 * (a short body is retried like any other transient failure).
 */
import type { FileContentInfo } from '../source/http-source.js';
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

export async function fetchFile(
  source: FileContentSource,
  store: BlobStore,
  fileId: string,
  signal?: AbortSignal,
): Promise<FetchedFile> {
  const result = await source.fileContent(
    fileId,
    async (body, info) => {
      const blob = await store.write(body, ({ size }) => {
        if (info.contentLength !== undefined && size !== info.contentLength) {
          throw new TransientFailure(
            'bad_body',
            `file ${fileId}: received ${size} bytes, Content-Length said ${info.contentLength}`,
          );
        }
      });
      return { blob, contentType: info.contentType };
    },
    signal,
  );
  return result.status === 'missing' ? result : { status: 'ok', ...result.value };
}
