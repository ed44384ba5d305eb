/** File contents: `files.*` (whether the bytes of every `files` row are kept, where, how fetched). */
import { basename, dirname, extname, join } from 'node:path';
import { sqliteFileOf, type WarehouseTarget } from '../warehouse/url.js';
import { locationText } from './object-storage.js';
import { integer, z, type SectionValues, type SettingInfo } from './setting.js';

export interface FilesConfig {
  files: {
    /** Fetch the bytes of every `files` row into the blob store. */
    enabled: boolean;
    /**
     * The blob store: a folder, or `s3://bucket/prefix`. Default next to a SQLite warehouse (`ocs-sync.db` ->
     * `ocs-sync-files`); undefined with PostgreSQL or `:memory:` when not set.
     */
    dir: string | undefined;
    /** Downloads at once, and as many files stored at once (two-stages.ts). */
    concurrency: number;
    /** Largest file fetched, whatever its row's `content_size` says, in MiB. */
    maxFileMib: number;
    /** Deadline of one file download, headers and body, in seconds. */
    requestTimeoutSeconds: number;
  };
}

export interface FilesFileValues {
  files?: {
    enabled?: boolean;
    dir?: string;
    concurrency?: number;
    max_file_mib?: number;
    request_timeout_seconds?: number;
  };
}

export const filesDefaults = {
  files: { enabled: true, concurrency: 2, max_file_mib: 1024, request_timeout_seconds: 3600 },
} satisfies FilesFileValues;

export const FILES_SETTINGS: readonly SettingInfo[] = [
  { path: 'files.enabled', env: 'OCS_FILES_ENABLED', kind: 'boolean', allowed: 'true or false' },
  {
    path: 'files.dir',
    env: 'OCS_FILES_DIR',
    kind: 'text',
    allowed:
      'the path of a folder for the file contents (created when missing), or s3://BUCKET/PREFIX (object_storage.*)',
  },
  {
    path: 'files.concurrency',
    env: 'OCS_FILES_CONCURRENCY',
    kind: 'integer',
    allowed: 'an integer from 1 to 16',
  },
  {
    path: 'files.max_file_mib',
    env: 'OCS_FILES_MAX_FILE_MIB',
    kind: 'integer',
    allowed: 'an integer from 1 to 1048576 (MiB)',
  },
  {
    path: 'files.request_timeout_seconds',
    env: 'OCS_FILES_REQUEST_TIMEOUT_SECONDS',
    kind: 'integer',
    allowed: 'an integer from 1 to 604800',
  },
];

export const filesFields = {
  files: z.strictObject({
    enabled: z.boolean(),
    dir: locationText.optional(),
    concurrency: integer(1, 16),
    max_file_mib: integer(1, 1048576),
    request_timeout_seconds: integer(1, 604800),
  }),
};

export function filesConfig(
  values: SectionValues<typeof filesFields>,
  warehouse: WarehouseTarget,
): FilesConfig {
  return {
    files: {
      enabled: values.files.enabled,
      dir: values.files.dir?.trim() ?? defaultFilesDir(warehouse),
      concurrency: values.files.concurrency,
      maxFileMib: values.files.max_file_mib,
      requestTimeoutSeconds: values.files.request_timeout_seconds,
    },
  };
}

/** The blob store beside a SQLite file: `data/ocs-sync.db` -> `data/ocs-sync-files`. */
function defaultFilesDir(target: WarehouseTarget): string | undefined {
  const file = sqliteFileOf(target);
  if (file === undefined) return undefined;
  return join(dirname(file), `${basename(file, extname(file))}-files`);
}
