/**
 * A multipart upload of a body of known size, parts read into buffers made once per part in
 * flight and reused for every part after. lib-storage, which this replaces for our bodies, copies
 * each part out of a stream (Buffer.concat), so an upload of 512 MiB leaves 512 MiB of dead
 * buffers for V8 to collect: the bench measured 2.2 s of garbage collection against 0.3 s for the
 * same bytes generated in place, and a peak RSS set by when V8 collects rather than by the parts
 * in flight.
 *
 * Each part carries its SHA-256, which the store checks (and which signs it: s3-store.ts). A part
 * that fails is retried by the SDK with the same bytes; an upload that fails is aborted, so no
 * part is left to be billed, and nothing appears under the key until the completion.
 */
import { createHash } from 'node:crypto';
import { readExactly, type FileBody } from './store.js';

type Sdk = typeof import('@aws-sdk/client-s3');
type Client = import('@aws-sdk/client-s3').S3Client;
type CreateInput = import('@aws-sdk/client-s3').CreateMultipartUploadCommandInput;

/** S3's most parts in one upload: a body above parts × part size is cut in larger parts. */
const MAX_PARTS = 10_000;

export interface MultipartRequest {
  sdk: Sdk;
  client: Client;
  /** What the object is made with: bucket, key, encryption, retention, content type. */
  create: CreateInput & { Bucket: string; Key: string };
  /** Never replace an object completed under the key meanwhile (If-None-Match: * on completion). */
  ifAbsent: boolean;
  body: Uint8Array | FileBody;
  partSizeBytes: number;
  partsInFlight: number;
}

interface DonePart {
  PartNumber: number;
  ETag: string;
  ChecksumSHA256: string;
}

export async function uploadInParts(request: MultipartRequest): Promise<void> {
  const { sdk, client, body } = request;
  const size = body instanceof Uint8Array ? body.length : body.size;
  const partSize = Math.max(request.partSizeBytes, Math.ceil(size / MAX_PARTS));
  const count = Math.max(1, Math.ceil(size / partSize));
  const { Bucket, Key } = request.create;
  const { UploadId } = await client.send(
    new sdk.CreateMultipartUploadCommand({ ...request.create, ChecksumAlgorithm: 'SHA256' }),
  );
  if (UploadId === undefined)
    throw new Error('the store answered CreateMultipartUpload with no UploadId');
  const done: DonePart[] = [];
  let next = 1;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    // A file's parts are read into this worker's buffer; bytes in memory are sent as they are.
    const buffer = body instanceof Uint8Array ? undefined : Buffer.allocUnsafeSlow(partSize);
    while (failure === undefined && next <= count) {
      const partNumber = next++;
      const start = (partNumber - 1) * partSize;
      const length = Math.min(partSize, size - start);
      try {
        const data =
          buffer === undefined
            ? (body as Uint8Array).subarray(start, start + length)
            : await readExactly(body as FileBody, buffer.subarray(0, length), start);
        const checksum = createHash('sha256').update(data).digest('base64');
        const answer = await client.send(
          new sdk.UploadPartCommand({
            Bucket,
            Key,
            UploadId,
            PartNumber: partNumber,
            Body: data,
            ContentLength: data.length,
            ChecksumSHA256: checksum,
          }),
        );
        if (answer.ETag === undefined) throw new Error(`the store gave part ${partNumber} no ETag`);
        done.push({ PartNumber: partNumber, ETag: answer.ETag, ChecksumSHA256: checksum });
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(request.partsInFlight, count) }, worker));
  try {
    if (failure !== undefined) throw failure.error;
    done.sort((a, b) => a.PartNumber - b.PartNumber);
    await client.send(
      new sdk.CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: { Parts: done },
        ...(request.ifAbsent ? { IfNoneMatch: '*' } : {}),
      }),
    );
  } catch (error) {
    // Best effort: a dead run's upload is also aborted by the next start (clearUnfinished).
    await client
      .send(new sdk.AbortMultipartUploadCommand({ Bucket, Key, UploadId }))
      .catch(() => undefined);
    throw error;
  }
}
