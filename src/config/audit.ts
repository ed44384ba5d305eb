/** The audit archive: `audit.*` (the chain, the key that signs each run's checkpoint, where it goes). */
import { nonEmptyText, z, type SectionValues, type SettingInfo } from './setting.js';

export interface AuditConfig {
  audit: {
    /**
     * Keep the audit chain (history for every resource, every version chained). Once a
     * warehouse has a chain it stays on whatever this says.
     */
    enabled: boolean;
    /** The Ed25519 key that signs a checkpoint at the end of every run. */
    signingKeyFile: string | undefined;
    /** Where each checkpoint is appended as one JSON line (shipped elsewhere by the operator). */
    checkpointFile: string | undefined;
  };
}

export interface AuditFileValues {
  audit?: { enabled?: boolean; signing_key_file?: string; checkpoint_file?: string };
}

export const auditDefaults = { audit: { enabled: false } } satisfies AuditFileValues;

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
      'the path of the file checkpoints are appended to (created with data_file_mode, 0600 by default)',
  },
];

export const auditFields = {
  audit: z.strictObject({
    enabled: z.boolean(),
    signing_key_file: nonEmptyText.optional(),
    checkpoint_file: nonEmptyText.optional(),
  }),
};

export function auditConfig(values: SectionValues<typeof auditFields>): AuditConfig {
  return {
    audit: {
      enabled: values.audit.enabled,
      signingKeyFile: values.audit.signing_key_file?.trim(),
      checkpointFile: values.audit.checkpoint_file?.trim(),
    },
  };
}
