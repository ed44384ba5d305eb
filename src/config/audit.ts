/** The audit archive: `audit.*` (the chain, the key that signs each run's checkpoint, where it goes). */
import { locationText } from './object-storage.js';
import { integer, nonEmptyText, z, type SectionValues, type SettingInfo } from './setting.js';

export const RETENTION_MODES = ['compliance', 'governance'] as const;

export interface AuditConfig {
  audit: {
    /**
     * Keep the audit chain (history for every resource, every version chained). Once a
     * warehouse has a chain it stays on whatever this says.
     */
    enabled: boolean;
    /** The Ed25519 key that signs a checkpoint at the end of every run. */
    signingKeyFile: string | undefined;
    /**
     * Where each checkpoint goes: a file it is appended to as one JSON line (shipped elsewhere by
     * the operator), or `s3://bucket/prefix/`, one object a checkpoint, written once.
     */
    checkpointFile: string | undefined;
    /** Object Lock retention of each checkpoint object (a bucket only). */
    checkpointRetention: { mode: (typeof RETENTION_MODES)[number]; days: number } | undefined;
  };
}

export interface AuditFileValues {
  audit?: {
    enabled?: boolean;
    signing_key_file?: string;
    checkpoint_file?: string;
    checkpoint_retention?: { mode?: string; days?: number };
  };
}

export const auditDefaults = {
  audit: { enabled: false, checkpoint_retention: {} },
} satisfies AuditFileValues;

export const AUDIT_SETTINGS: readonly SettingInfo[] = [
  { path: 'audit.enabled', env: 'OCS_AUDIT', kind: 'boolean', allowed: 'true or false' },
  {
    path: 'audit.signing_key_file',
    env: 'OCS_AUDIT_SIGNING_KEY_FILE',
    kind: 'text',
    allowed: 'the path of the Ed25519 key file written by `ocs-sync keygen --signing`',
  },
  {
    path: 'audit.checkpoint_file',
    env: 'OCS_AUDIT_CHECKPOINT_FILE',
    kind: 'text',
    allowed:
      'the path of the file checkpoints are appended to (created with data_file_mode, 0600 by default), or s3://BUCKET/PREFIX/ (one object a checkpoint, written once)',
  },
  {
    path: 'audit.checkpoint_retention.mode',
    env: 'OCS_AUDIT_CHECKPOINT_RETENTION_MODE',
    kind: 'text',
    allowed: `${RETENTION_MODES.join(' or ')} (Object Lock retention of each checkpoint object)`,
  },
  {
    path: 'audit.checkpoint_retention.days',
    env: 'OCS_AUDIT_CHECKPOINT_RETENTION_DAYS',
    kind: 'integer',
    allowed: 'an integer from 1 to 36500 (days each checkpoint object is kept locked)',
  },
];

export const auditFields = {
  audit: z.strictObject({
    enabled: z.boolean(),
    signing_key_file: nonEmptyText.optional(),
    checkpoint_file: locationText.optional(),
    checkpoint_retention: z.strictObject({
      mode: z.enum(RETENTION_MODES).optional(),
      days: integer(1, 36500).optional(),
    }),
  }),
};

export function auditConfig(values: SectionValues<typeof auditFields>): AuditConfig {
  return {
    audit: {
      enabled: values.audit.enabled,
      signingKeyFile: values.audit.signing_key_file?.trim(),
      checkpointFile: values.audit.checkpoint_file?.trim(),
      checkpointRetention: retentionOf(values.audit.checkpoint_retention),
    },
  };
}

/** Both keys, or none (problems.ts names the one missing). */
function retentionOf(value: {
  mode?: (typeof RETENTION_MODES)[number];
  days?: number;
}): AuditConfig['audit']['checkpointRetention'] {
  return value.mode !== undefined && value.days !== undefined
    ? { mode: value.mode, days: value.days }
    : undefined;
}
