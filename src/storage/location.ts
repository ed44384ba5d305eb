/**
 * Where something is kept: a folder on this machine, or `s3://bucket/prefix` in object storage.
 * Every setting that names a place (files.dir, audit.checkpoint_file, snapshot.dir, `export parquet
 * DIR`) is read here, so `s3://` means the same everywhere. Pure.
 */

export interface BucketLocation {
  kind: 's3';
  bucket: string;
  /** Keys start with this: '' or a path without leading or trailing slashes (`team-a/files`). */
  prefix: string;
  /** `s3://bucket/prefix`, as it is shown. */
  text: string;
}

export interface FolderLocation {
  kind: 'folder';
  path: string;
  text: string;
}

export type Location = BucketLocation | FolderLocation;

const SCHEME = /^s3:\/\//i;
/** S3's rule for bucket names (the strict one every store accepts). */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The rule, phrased to follow "must be". */
export const S3_LOCATION_RULE =
  's3://BUCKET/PREFIX: a bucket name of 3 to 63 lowercase letters, digits, . and -, then an optional key prefix';

export function isBucketText(text: string): boolean {
  return SCHEME.test(text.trim());
}

/** Why `text` (starting with s3://) is not a bucket location, or undefined when it is one. */
export function bucketLocationProblem(text: string): string | undefined {
  const parsed = parseBucket(text);
  return 'problem' in parsed ? parsed.problem : undefined;
}

function parseBucket(text: string): BucketLocation | { problem: string } {
  const rest = text.trim().replace(SCHEME, '');
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? '' : rest.slice(slash + 1);
  if (!BUCKET_NAME.test(bucket) || bucket.includes('..')) {
    return {
      problem: `must be ${S3_LOCATION_RULE}; ${JSON.stringify(bucket)} is not a bucket name`,
    };
  }
  const segments = path.split('/').filter((segment) => segment !== '');
  if (segments.some((segment) => segment === '.' || segment === '..')) {
    return { problem: `must be ${S3_LOCATION_RULE}; the prefix may not hold . or .. segments` };
  }
  if (
    [...path].some((character) => character < ' ' || character === '\u007f' || character === '\\')
  ) {
    return {
      problem: `must be ${S3_LOCATION_RULE}; the prefix may not hold control characters or \\`,
    };
  }
  const prefix = segments.join('/');
  return { kind: 's3', bucket, prefix, text: `s3://${bucket}${prefix ? `/${prefix}` : ''}` };
}

/** A setting's value as a place. Throws on a bad `s3://` text (validation reports it first). */
export function parseLocation(text: string): Location {
  const trimmed = text.trim();
  if (!isBucketText(trimmed)) return { kind: 'folder', path: trimmed, text: trimmed };
  const parsed = parseBucket(trimmed);
  if ('problem' in parsed) throw new Error(`${trimmed} ${parsed.problem}`);
  return parsed;
}

/** `prefix/part/part`, without empty segments. */
export function joinKey(...parts: string[]): string {
  return parts
    .flatMap((part) => part.split('/'))
    .filter((segment) => segment !== '')
    .join('/');
}

/** Whether two locations are the same place, or one holds the other (a fleet's teams may not). */
export function locationsOverlap(a: Location, b: Location): boolean {
  if (a.kind !== 's3' || b.kind !== 's3') return false;
  if (a.bucket !== b.bucket) return false;
  const within = (inner: string, outer: string) =>
    outer === '' || inner === outer || inner.startsWith(`${outer}/`);
  return within(a.prefix, b.prefix) || within(b.prefix, a.prefix);
}
