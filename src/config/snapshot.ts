/** Warehouse snapshots: `snapshot.*` (where `ocs-sync snapshot create` writes them, how many kept). */
import { checkCron } from './daemon.js';
import { locationText } from './object-storage.js';
import { checked, integer, isString, type SectionValues, type SettingInfo, z } from './setting.js';

export interface SnapshotConfig {
  snapshot: {
    /** A folder, or `s3://bucket/prefix`; undefined: not set (snapshot commands say so). */
    dir: string | undefined;
    /** Snapshots kept; the oldest beyond it are removed after each new one. Undefined: all. */
    keep: number | undefined;
    /** When the daemon takes one (cron); undefined: it takes none. */
    schedule: string | undefined;
  };
}

export interface SnapshotFileValues {
  snapshot?: { dir?: string; keep?: number; schedule?: string };
}

export const snapshotDefaults = { snapshot: {} } satisfies SnapshotFileValues;

export const SNAPSHOT_SETTINGS: readonly SettingInfo[] = [
  {
    path: 'snapshot.dir',
    env: 'OCS_SNAPSHOT_DIR',
    kind: 'text',
    allowed: 'the path of a folder for warehouse snapshots, or s3://BUCKET/PREFIX',
  },
  {
    path: 'snapshot.keep',
    env: 'OCS_SNAPSHOT_KEEP',
    kind: 'integer',
    allowed: 'an integer from 1 to 100000 (the newest kept; unset keeps every one)',
  },
  {
    path: 'snapshot.schedule',
    env: 'OCS_SNAPSHOT_SCHEDULE',
    kind: 'text',
    allowed:
      'a cron expression such as "30 2 * * *" (the daemon takes a snapshot then); unset: none',
  },
];

export const snapshotFields = {
  snapshot: z.strictObject({
    dir: locationText.optional(),
    keep: integer(1, 100000).optional(),
    schedule: checked(isString, checkCron).optional(),
  }),
};

export function snapshotConfig(values: SectionValues<typeof snapshotFields>): SnapshotConfig {
  return {
    snapshot: {
      dir: values.snapshot.dir?.trim(),
      keep: values.snapshot.keep,
      schedule: values.snapshot.schedule?.trim(),
    },
  };
}
