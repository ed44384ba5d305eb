/**
 * What a failed S3 request means for the operator: one line naming the location and the fix. The
 * SDK's own message is never shown (a store may echo a request's details in it); its error code
 * and HTTP status are.
 */
import { ObjectStoreError } from '../errors.js';

export interface S3Failure {
  name?: string;
  Code?: string;
  message?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number; attempts?: number };
  $response?: { statusCode?: number };
}

export function statusOf(error: unknown): number | undefined {
  const failure = error as S3Failure | undefined;
  return failure?.$metadata?.httpStatusCode ?? failure?.$response?.statusCode;
}

export function codeOf(error: unknown): string {
  const failure = error as S3Failure | undefined;
  return failure?.Code ?? failure?.name ?? failure?.code ?? 'Error';
}

const POLICY = 'docs/off-the-box.md lists the permissions ocs-sync needs';
const CREDENTIALS =
  'Give credentials the AWS SDK finds: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity (Kubernetes IRSA) or an instance role; ocs-sync never reads them from its configuration';

const FULL = new Set(['QuotaExceeded', 'XMinioStorageFull', 'InsufficientStorage', 'StorageFull']);
const EXPIRED = new Set([
  'ExpiredToken',
  'ExpiredTokenException',
  'TokenRefreshRequired',
  'RequestExpired',
]);
const REJECTED_KEY = new Set(['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'InvalidToken']);

/**
 * The error for `operation` (`upload`, `read`, `list`…) on `where` (an s3:// name) at `endpoint`.
 * An ObjectStoreError passes as it is.
 */
export function describeS3Failure(
  error: unknown,
  where: string,
  operation: string,
  endpoint: string,
): ObjectStoreError {
  if (error instanceof ObjectStoreError) return error;
  const code = codeOf(error);
  const status = statusOf(error);
  const said = status === undefined ? code : `${code}, HTTP ${status}`;
  const bucket = /^s3:\/\/([^/]+)/.exec(where)?.[1] ?? where;
  if (
    code === 'CredentialsProviderError' ||
    /could not load credentials/i.test(String((error as S3Failure)?.message))
  ) {
    return new ObjectStoreError(
      'setup',
      `Cannot ${operation} ${where}: no AWS credentials were found.`,
      { hint: `${CREDENTIALS}.`, cause: error },
    );
  }
  if (EXPIRED.has(code)) {
    return new ObjectStoreError(
      'setup',
      `Cannot ${operation} ${where}: the AWS credentials have expired (${said}).`,
      {
        hint: `Renew them (a new session token, aws sso login, a fresh web identity token). ${CREDENTIALS}.`,
        cause: error,
      },
    );
  }
  if (REJECTED_KEY.has(code)) {
    return new ObjectStoreError(
      'setup',
      `Cannot ${operation} ${where}: the store at ${endpoint} rejected the credentials (${said}).`,
      {
        hint: `Check the access key pair (and the machine's clock: signatures carry the time). ${CREDENTIALS}.`,
        cause: error,
      },
    );
  }
  if (code === 'NoSuchBucket') {
    return new ObjectStoreError(
      'setup',
      `Cannot ${operation} ${where}: the bucket ${bucket} does not exist at ${endpoint}.`,
      {
        hint: 'Create the bucket (docs/off-the-box.md shows how, with Object Lock), or fix the bucket name, object_storage.endpoint (OCS_S3_ENDPOINT) or object_storage.region (AWS_REGION).',
        cause: error,
      },
    );
  }
  if (code === 'PermanentRedirect' || code === 'AuthorizationHeaderMalformed' || status === 301) {
    return new ObjectStoreError(
      'setup',
      `Cannot ${operation} ${where}: the bucket ${bucket} is in another region than object_storage.region says (${said}).`,
      { hint: "Set object_storage.region (AWS_REGION) to the bucket's region.", cause: error },
    );
  }
  if (code === 'AccessDenied' || code === 'AllAccessDisabled' || status === 403) {
    if (FULL.has(code)) return fullStore(where, said, error);
    return new ObjectStoreError('setup', `Cannot ${operation} ${where}: access denied (${said}).`, {
      hint: `Grant these credentials access to the bucket ${bucket} and its prefix (${POLICY}).`,
      cause: error,
    });
  }
  if (FULL.has(code) || status === 507) return fullStore(where, said, error);
  if (code === 'TimeoutError' || (status !== undefined && status >= 500) || isNetworkError(code)) {
    const attempts = (error as S3Failure)?.$metadata?.attempts;
    return new ObjectStoreError(
      'unavailable',
      `Cannot ${operation} ${where}: the store at ${endpoint} kept failing${attempts ? ` after ${attempts} attempts` : ''} (${said}).`,
      {
        hint: 'Check that the store is up and reachable; the next run tries again.',
        cause: error,
      },
    );
  }
  // Not an answer of the store (no HTTP status): the SDK's own words, their first line.
  const detail =
    status === undefined && error instanceof Error && error.message
      ? error.message.split('\n')[0]!
      : said;
  return new ObjectStoreError('other', `Cannot ${operation} ${where}: ${detail}`, { cause: error });
}

function fullStore(where: string, said: string, error: unknown): ObjectStoreError {
  return new ObjectStoreError(
    'full',
    `Cannot store ${where}: the store is full or over its quota (${said}).`,
    {
      hint: 'Free space in the bucket or raise its quota; the next run stores what this one could not.',
      cause: error,
    },
  );
}

function isNetworkError(code: string): boolean {
  return [
    'ECONNRESET',
    'ECONNREFUSED',
    'EPIPE',
    'ETIMEDOUT',
    'ENOTFOUND',
    'EAI_AGAIN',
    'NetworkingError',
    'RequestTimeout',
    'SlowDown',
    'InternalError',
    'ServiceUnavailable',
  ].includes(code);
}
