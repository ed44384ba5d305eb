/**
 * Object storage: `object_storage.*`, used by every `s3://bucket/prefix` location (files.dir,
 * audit.checkpoint_file, snapshot.dir, `export parquet`). Which store (AWS from the region, or any
 * S3-compatible endpoint), how buckets are addressed, server-side encryption, multipart sizes.
 * Credentials are never a setting: the AWS SDK's default chain finds them.
 */
import { bucketLocationProblem, isBucketText } from '../storage/location.js';
import {
  checked,
  integer,
  isString,
  nonEmptyText,
  z,
  type SectionValues,
  type SettingInfo,
} from './setting.js';

export const SSE_MODES = ['AES256', 'aws:kms'] as const;

export interface ObjectStorageConfig {
  objectStorage: {
    /** Undefined: AWS, from the region. */
    endpoint: string | undefined;
    region: string;
    forcePathStyle: boolean;
    sse: (typeof SSE_MODES)[number] | undefined;
    kmsKeyId: string | undefined;
    partSizeMib: number;
    partsInFlight: number;
    maxAttempts: number;
  };
}

export interface ObjectStorageFileValues {
  object_storage?: {
    endpoint?: string;
    region?: string;
    force_path_style?: boolean;
    sse?: string;
    kms_key_id?: string;
    part_size_mib?: number;
    parts_in_flight?: number;
    max_attempts?: number;
  };
}

export const objectStorageDefaults = {
  object_storage: {
    region: 'us-east-1',
    force_path_style: false,
    part_size_mib: 8,
    parts_in_flight: 4,
    max_attempts: 5,
  },
} satisfies ObjectStorageFileValues;

export const OBJECT_STORAGE_SETTINGS: readonly SettingInfo[] = [
  {
    path: 'object_storage.endpoint',
    env: 'OCS_S3_ENDPOINT',
    kind: 'text',
    allowed:
      'the http:// or https:// URL of an S3-compatible store (MinIO, Ceph, R2…); leave it unset for AWS',
  },
  {
    path: 'object_storage.region',
    env: 'AWS_REGION',
    kind: 'text',
    allowed: 'a region name such as eu-west-1 (auto for R2)',
  },
  {
    path: 'object_storage.force_path_style',
    env: 'OCS_S3_FORCE_PATH_STYLE',
    kind: 'boolean',
    allowed: 'true (ENDPOINT/BUCKET/KEY, as MinIO and Ceph want) or false (BUCKET.ENDPOINT/KEY)',
  },
  {
    path: 'object_storage.sse',
    env: 'OCS_S3_SSE',
    kind: 'text',
    allowed: `${SSE_MODES.join(' or ')} (server-side encryption); leave it unset for the bucket's default`,
  },
  {
    path: 'object_storage.kms_key_id',
    env: 'OCS_S3_KMS_KEY_ID',
    kind: 'text',
    allowed: 'the id or ARN of the KMS key (with sse: aws:kms)',
  },
  {
    path: 'object_storage.part_size_mib',
    kind: 'integer',
    allowed: 'an integer from 5 to 5120 (MiB)',
  },
  { path: 'object_storage.parts_in_flight', kind: 'integer', allowed: 'an integer from 1 to 16' },
  {
    path: 'object_storage.max_attempts',
    env: 'OCS_S3_MAX_ATTEMPTS',
    kind: 'integer',
    allowed: 'an integer from 1 to 20',
  },
];

function endpointProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    return 'must be an http:// or https:// URL, such as https://minio.example.com:9000';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return 'must be an http:// or https:// URL, such as https://minio.example.com:9000';
  }
  if (url.username || url.password) {
    return 'must not carry credentials: the AWS SDK reads them from the environment, a profile or a role';
  }
  return undefined;
}

export const objectStorageFields = {
  object_storage: z.strictObject({
    endpoint: checked(isString, endpointProblem).optional(),
    region: nonEmptyText,
    force_path_style: z.boolean(),
    sse: z.enum(SSE_MODES).optional(),
    kms_key_id: nonEmptyText.optional(),
    part_size_mib: integer(5, 5120),
    parts_in_flight: integer(1, 16),
    max_attempts: integer(1, 20),
  }),
};

export function objectStorageConfig(
  values: SectionValues<typeof objectStorageFields>,
): ObjectStorageConfig {
  const section = values.object_storage;
  return {
    objectStorage: {
      endpoint: section.endpoint?.trim().replace(/\/+$/, ''),
      region: section.region.trim(),
      forcePathStyle: section.force_path_style,
      sse: section.sse,
      kmsKeyId: section.kms_key_id?.trim(),
      partSizeMib: section.part_size_mib,
      partsInFlight: section.parts_in_flight,
      maxAttempts: section.max_attempts,
    },
  };
}

/** A setting naming a place: a folder, or `s3://bucket/prefix` (storage/location.ts). */
export const locationText = checked(isString, (value) => {
  if (value.trim() === '') return 'must not be empty';
  return isBucketText(value) ? bucketLocationProblem(value) : undefined;
});
