/**
 * A bucket of any S3-compatible store, through the AWS SDK v3 (loaded only when a location is a
 * bucket). Credentials come from the SDK's default chain only: the environment (the command's),
 * then the shared profile, a web identity (Kubernetes IRSA), the container or instance role.
 * Requests are retried by the SDK (503 SlowDown, 500, throttling, resets: a multipart part is
 * retried alone); a read cut short is resumed from where it stopped, so a short read is never
 * taken for different bytes.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { ObjectStoreError } from '../errors.js';
import { joinKey, type BucketLocation } from './location.js';
import { codeOf, describeS3Failure, statusOf } from './s3-errors.js';
import { uploadInParts } from './s3-multipart.js';
import {
  readExactly,
  type ObjectInfo,
  type ObjectLockState,
  type ObjectRead,
  type ObjectStore,
  type PutBody,
  type PutOptions,
  type RetentionMode,
} from './store.js';

type Sdk = typeof import('@aws-sdk/client-s3');
type Client = import('@aws-sdk/client-s3').S3Client;

export interface S3Settings {
  /** Undefined: AWS, from the region. */
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  sse?: 'AES256' | 'aws:kms';
  kmsKeyId?: string;
  /** Parts above this size go up as a multipart upload, `partsInFlight` parts at once. */
  partSizeBytes: number;
  partsInFlight: number;
  /** Attempts of one request (the SDK's standard retry mode, with backoff). */
  maxAttempts: number;
  /** The command's environment: the first link of the credential chain. */
  env: Readonly<Record<string, string | undefined>>;
}

export const MIN_PART_BYTES = 5 * 1024 * 1024;

export class S3Store implements ObjectStore {
  readonly kind = 's3';
  readonly location: string;
  private client?: Promise<{ sdk: Sdk; client: Client }>;
  /** Uploads begun before this store was made are another (dead) run's. */
  private readonly since = new Date();

  constructor(
    private readonly place: BucketLocation,
    private readonly settings: S3Settings,
  ) {
    this.location = place.text;
  }

  where(key: string): string {
    return `s3://${this.place.bucket}/${this.fullKey(key)}`;
  }

  private fullKey(key: string): string {
    return joinKey(this.place.prefix, key);
  }

  private get endpoint(): string {
    return this.settings.endpoint ?? `AWS (${this.settings.region})`;
  }

  private sdk(): Promise<{ sdk: Sdk; client: Client }> {
    this.client ??= (async () => {
      const sdk = await import('@aws-sdk/client-s3');
      const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
      const env = this.settings.env;
      const chain = defaultProvider();
      const client = new sdk.S3Client({
        region: this.settings.region,
        ...(this.settings.endpoint ? { endpoint: this.settings.endpoint } : {}),
        forcePathStyle: this.settings.forcePathStyle,
        followRegionRedirects: true,
        maxAttempts: this.settings.maxAttempts,
        retryMode: 'standard',
        // Checksums are sent where ocs-sync computes them (SHA-256); the SDK's own default (CRC32
        // in a trailer of an aws-chunked body) is not understood by every S3-compatible store.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        credentials: async () => {
          // The environment link of the chain reads the command's environment.
          const accessKeyId = env.AWS_ACCESS_KEY_ID?.trim();
          const secretAccessKey = env.AWS_SECRET_ACCESS_KEY?.trim();
          if (accessKeyId && secretAccessKey) {
            const sessionToken = env.AWS_SESSION_TOKEN?.trim();
            return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
          }
          return chain();
        },
      });
      client.middlewareStack.addRelativeTo(signedWithKnownDigest, {
        relation: 'before',
        toMiddleware: 'httpSigningMiddleware',
        name: 'ocsSyncSignedWithKnownDigest',
      });
      return { sdk, client };
    })();
    return this.client;
  }

  /** One request, its failure said as the store's. */
  private async send<T>(
    operation: string,
    key: string | undefined,
    run: (parts: { sdk: Sdk; client: Client }) => Promise<T>,
  ): Promise<T> {
    const parts = await this.sdk();
    try {
      return await run(parts);
    } catch (error) {
      throw describeS3Failure(
        error,
        key === undefined ? this.location : this.where(key),
        operation,
        this.endpoint,
      );
    }
  }

  async probe(): Promise<void> {
    await this.send('list', undefined, ({ sdk, client }) =>
      client.send(
        // A name nothing has: an answer with no key is the cheapest that proves access.
        new sdk.ListObjectsV2Command({
          Bucket: this.place.bucket,
          Prefix: joinKey(this.place.prefix, '.ocs-sync-probe'),
          MaxKeys: 1,
        }),
      ),
    );
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const parts = await this.sdk();
    try {
      const answer = await parts.client.send(
        new parts.sdk.HeadObjectCommand({ Bucket: this.place.bucket, Key: this.fullKey(key) }),
      );
      return { key, size: Number(answer.ContentLength ?? 0), modified: answer.LastModified };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw describeS3Failure(error, this.where(key), 'read', this.endpoint);
    }
  }

  async put(key: string, body: PutBody, options: PutOptions = {}): Promise<{ created: boolean }> {
    if (options.ifAbsent && options.headFirst !== false && (await this.head(key)) !== undefined) {
      return { created: false };
    }
    const { sdk, client } = await this.sdk();
    const object = {
      Bucket: this.place.bucket,
      Key: this.fullKey(key),
      ...(options.contentType ? { ContentType: options.contentType } : {}),
      ...(this.settings.sse ? { ServerSideEncryption: this.settings.sse } : {}),
      ...(this.settings.sse === 'aws:kms' && this.settings.kmsKeyId
        ? { SSEKMSKeyId: this.settings.kmsKeyId }
        : {}),
      ...(options.retention
        ? {
            ObjectLockMode: lockMode(options.retention.mode),
            ObjectLockRetainUntilDate: options.retention.until,
          }
        : {}),
    };
    try {
      const size = body instanceof Uint8Array ? body.length : body.size;
      if (size <= this.settings.partSizeBytes) {
        const bytes =
          body instanceof Uint8Array ? body : await readExactly(body, Buffer.allocUnsafe(size), 0);
        // The store checks the bytes against their SHA-256 (also their signed payload hash).
        const sha256 = options.sha256 ?? createHash('sha256').update(bytes).digest('hex');
        await client.send(
          new sdk.PutObjectCommand({
            ...object,
            ...(options.ifAbsent ? { IfNoneMatch: '*' } : {}),
            Body: bytes,
            ContentLength: bytes.length,
            ChecksumSHA256: Buffer.from(sha256, 'hex').toString('base64'),
          }),
        );
      } else {
        await uploadInParts({
          sdk,
          client,
          create: object,
          ifAbsent: options.ifAbsent === true,
          body,
          partSizeBytes: Math.max(MIN_PART_BYTES, this.settings.partSizeBytes),
          partsInFlight: this.settings.partsInFlight,
        });
      }
      return { created: true };
    } catch (error) {
      // Someone stored it meanwhile (the store honoured If-None-Match: *).
      if (options.ifAbsent && (statusOf(error) === 412 || codeOf(error) === 'PreconditionFailed')) {
        return { created: false };
      }
      throw describeS3Failure(error, this.where(key), 'upload', this.endpoint);
    }
  }

  async get(key: string): Promise<ObjectRead | undefined> {
    const { sdk, client } = await this.sdk();
    const fullKey = this.fullKey(key);
    const request = (range?: { from: number; etag?: string }) =>
      client.send(
        new sdk.GetObjectCommand({
          Bucket: this.place.bucket,
          Key: fullKey,
          ...(range
            ? { Range: `bytes=${range.from}-`, ...(range.etag ? { IfMatch: range.etag } : {}) }
            : {}),
        }),
      );
    let first: import('@aws-sdk/client-s3').GetObjectCommandOutput;
    try {
      first = await request();
    } catch (error) {
      if (statusOf(error) === 404 && codeOf(error) !== 'NoSuchBucket') return undefined;
      throw describeS3Failure(error, this.where(key), 'read', this.endpoint);
    }
    const size = Number(first.ContentLength ?? 0);
    const etag = first.ETag;
    const where = this.where(key);
    const attempts = this.settings.maxAttempts;
    const endpoint = this.endpoint;
    async function* body(): AsyncGenerator<Uint8Array> {
      let answer = first;
      let offset = 0;
      for (let attempt = 1; ; attempt += 1) {
        try {
          for await (const chunk of answer.Body as Readable) {
            offset += (chunk as Uint8Array).length;
            yield chunk as Uint8Array;
          }
          if (offset >= size) return;
          throw new ShortRead(offset, size);
        } catch (error) {
          (answer.Body as Readable | undefined)?.destroy?.();
          if (attempt >= attempts) {
            throw new ObjectStoreError(
              'unavailable',
              `Cannot read ${where}: the store at ${endpoint} cut the read short ${attempts} times (${offset} of ${size} bytes); nothing is wrong with what is stored as far as this read can tell.`,
              {
                hint: 'Check that the store is up and reachable, then run the command again.',
                cause: error,
              },
            );
          }
          // Resumed where it stopped, from the same version of the object.
          try {
            answer = await request({ from: offset, etag });
          } catch (retryError) {
            throw describeS3Failure(retryError, where, 'read', endpoint);
          }
        }
      }
    }
    return { size, body: body() };
  }

  async *list(prefix = ''): AsyncIterable<ObjectInfo> {
    const { sdk, client } = await this.sdk();
    const base = this.place.prefix ? `${this.place.prefix}/` : '';
    let token: string | undefined;
    do {
      const page = await this.send('list', prefix, () =>
        client.send(
          new sdk.ListObjectsV2Command({
            Bucket: this.place.bucket,
            Prefix: base + prefix,
            ContinuationToken: token,
          }),
        ),
      );
      for (const item of page.Contents ?? []) {
        if (item.Key === undefined) continue;
        yield {
          key: item.Key.slice(base.length),
          size: Number(item.Size ?? 0),
          modified: item.LastModified,
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  async delete(key: string): Promise<void> {
    await this.send('delete', key, ({ sdk, client }) =>
      client.send(
        new sdk.DeleteObjectCommand({ Bucket: this.place.bucket, Key: this.fullKey(key) }),
      ),
    );
  }

  /**
   * Aborts the multipart uploads under `prefix` that were begun before this store was made: a
   * run killed mid-upload leaves its parts there (never an object under the final key), billed
   * until aborted. A store that cannot list uploads (not every S3-compatible one can) is left to
   * its lifecycle rule (docs/off-the-box.md).
   */
  async clearUnfinished(prefix = ''): Promise<number> {
    const { sdk, client } = await this.sdk();
    const full = joinKey(this.place.prefix, prefix);
    let aborted = 0;
    let keyMarker: string | undefined;
    let uploadMarker: string | undefined;
    for (;;) {
      let page;
      try {
        page = await client.send(
          new sdk.ListMultipartUploadsCommand({
            Bucket: this.place.bucket,
            Prefix: full ? `${full}/` : undefined,
            KeyMarker: keyMarker,
            UploadIdMarker: uploadMarker,
          }),
        );
      } catch (error) {
        if (statusOf(error) === 501 || codeOf(error) === 'NotImplemented') return aborted;
        throw describeS3Failure(
          error,
          this.where(prefix),
          'list the unfinished uploads of',
          this.endpoint,
        );
      }
      for (const upload of page.Uploads ?? []) {
        if (upload.Key === undefined || upload.UploadId === undefined) continue;
        if (upload.Initiated !== undefined && upload.Initiated >= this.since) continue;
        await this.send(
          'abort the unfinished upload of',
          upload.Key.slice(this.place.prefix ? this.place.prefix.length + 1 : 0),
          () =>
            client.send(
              new sdk.AbortMultipartUploadCommand({
                Bucket: this.place.bucket,
                Key: upload.Key,
                UploadId: upload.UploadId,
              }),
            ),
        );
        aborted += 1;
      }
      if (!page.IsTruncated) return aborted;
      keyMarker = page.NextKeyMarker;
      uploadMarker = page.NextUploadIdMarker;
    }
  }

  async objectLock(): Promise<ObjectLockState> {
    const { sdk, client } = await this.sdk();
    try {
      const answer = await client.send(
        new sdk.GetObjectLockConfigurationCommand({ Bucket: this.place.bucket }),
      );
      const config = answer.ObjectLockConfiguration;
      if (config?.ObjectLockEnabled !== 'Enabled') return { status: 'disabled' };
      const rule = config.Rule?.DefaultRetention;
      const days = rule ? (rule.Days ?? (rule.Years ?? 0) * 365) : 0;
      return rule?.Mode && days > 0
        ? {
            status: 'enabled',
            defaultRetention: { mode: rule.Mode.toLowerCase() as RetentionMode, days },
          }
        : { status: 'enabled' };
    } catch (error) {
      const code = codeOf(error);
      if (code === 'ObjectLockConfigurationNotFoundError') return { status: 'disabled' };
      if (statusOf(error) === 501 || code === 'NotImplemented') {
        return {
          status: 'unsupported',
          detail: `the store at ${this.endpoint} does not implement Object Lock (${code})`,
        };
      }
      throw describeS3Failure(
        error,
        this.location,
        'read the Object Lock configuration of',
        this.endpoint,
      );
    }
  }

  close(): void {
    void this.client?.then(({ client }) => client.destroy()).catch(() => undefined);
  }
}

class ShortRead extends Error {
  constructor(received: number, size: number) {
    super(`the read ended after ${received} of ${size} bytes`);
  }
}

function lockMode(mode: RetentionMode): 'COMPLIANCE' | 'GOVERNANCE' {
  return mode === 'compliance' ? 'COMPLIANCE' : 'GOVERNANCE';
}

/**
 * A body sent with its SHA-256 (x-amz-checksum-sha256, of an object or of a part) is signed with
 * that digest as its payload hash, which is the same value in hex: SigV4 would otherwise hash
 * every byte a second time (a tenth of an upload's CPU).
 */
function signedWithKnownDigest<Args extends { request?: unknown }, T>(
  next: (args: Args) => Promise<T>,
) {
  return (args: Args): Promise<T> => {
    const headers = (args.request as { headers?: Record<string, string> } | undefined)?.headers;
    const checksum = headers?.['x-amz-checksum-sha256'];
    if (headers && checksum && headers['x-amz-content-sha256'] === undefined) {
      headers['x-amz-content-sha256'] = Buffer.from(checksum, 'base64').toString('hex');
    }
    return next(args);
  };
}
