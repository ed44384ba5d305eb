/**
 * A child of `npm run bench -- files --store s3` (files-store.ts): one measured stage in a fresh
 * process, so its peak RSS is its own. `ocs`: `ocs-sync sync` of the files into the bucket
 * (fetched from the fake server, hashed, uploaded); `sdk`: the AWS SDK's lib-storage uploading the
 * same bytes to the same server, as many at once, with the same part size and parts in flight.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Readable } from 'node:stream';
import { main } from '../src/cli/main.js';
import { contentChunks, type FakeFileContent } from '../src/fake-server/file-contents.js';
import { serveParent } from './child-process.js';

export type StoreStageRequest =
  | { kind: 'ocs'; env: Record<string, string> }
  | {
      kind: 'sdk';
      endpoint: string;
      bucket: string;
      contents: FakeFileContent[];
      concurrency: number;
      partSizeBytes: number;
      partsInFlight: number;
    };

export interface StoreStageResult {
  seconds: number;
  /** Peak RSS of this process, in bytes. */
  peakRss: number;
  /** CPU this process used, as process.cpuUsage() gives it (microseconds). */
  cpu: { user: number; system: number };
  output: string;
}

serveParent<StoreStageRequest>(async (request) => {
  const started = performance.now();
  let output = '';
  if (request.kind === 'ocs') {
    const code = await main(['sync'], {
      env: request.env,
      output: { out: (line) => (output += `${line}\n`), err: (line) => (output += `${line}\n`) },
    });
    if (code !== 0) throw new Error(`ocs-sync sync exited ${code}:\n${output}`);
  } else {
    const client = new S3Client({
      endpoint: request.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    let next = 0;
    const worker = async () => {
      while (next < request.contents.length) {
        const index = next++;
        const content = request.contents[index]!;
        await new Upload({
          client,
          params: {
            Bucket: request.bucket,
            Key: `sdk/${index}`,
            Body: Readable.from(contentChunks(content)),
            ChecksumAlgorithm: 'SHA256',
          },
          partSize: request.partSizeBytes,
          queueSize: request.partsInFlight,
        }).done();
      }
    };
    await Promise.all(Array.from({ length: request.concurrency }, worker));
    client.destroy();
  }
  return {
    seconds: (performance.now() - started) / 1000,
    peakRss: process.resourceUsage().maxRSS * 1024,
    cpu: process.cpuUsage(),
    output,
  } satisfies StoreStageResult;
});
