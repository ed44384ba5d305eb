/**
 * Sealed fields: the private key that opens them (`private_key_file`, `private_key`, and
 * `private_key_passphrase` from the environment only) and what each resource's sealed values
 * become (`secrets.*`).
 */
import { valueByName, recordByName } from '../names.js';
// The sealing module owns the list of secrets policies; config validates against it.
import { SECRET_POLICIES, type SecretPolicy } from '../sealing/policy-names.js';
import {
  checked,
  integer,
  isString,
  nonEmptyText,
  z,
  type SectionValues,
  type SettingInfo,
} from './setting.js';

export interface SecretsConfig {
  privateKeyFile: string | undefined;
  /** PEM text (literal `\n` in an environment variable is turned into line breaks). */
  privateKey: string | undefined;
  /** Passphrase of an encrypted PEM; only from OCS_PRIVATE_KEY_PASSPHRASE. */
  privateKeyPassphrase: string | undefined;
  secrets: {
    default: SecretPolicy;
    /** Per-resource overrides of `default`. */
    resources: Record<string, SecretPolicy>;
    /** Base64 X25519 public key (32 bytes) that `reseal` seals to. */
    archivePublicKey: string | undefined;
    /** Threads that open sealed values; 0 = the sync's thread; undefined = the cores, at most 8. */
    openThreads: number | undefined;
  };
}

export interface SecretsFileValues {
  private_key_file?: string;
  private_key?: string;
  secrets?: {
    default?: SecretPolicy;
    resources?: Record<string, SecretPolicy>;
    archive_public_key?: string;
    open_threads?: number;
  };
}

export const secretsDefaults = {
  secrets: {
    default: 'plaintext' as SecretPolicy,
    resources: {} as Record<string, SecretPolicy>,
  },
} satisfies SecretsFileValues;

export const SECRETS_SETTINGS: readonly SettingInfo[] = [
  {
    path: 'private_key_file',
    env: 'OCS_PRIVATE_KEY_FILE',
    kind: 'text',
    allowed: 'the path of a PEM private key file',
  },
  {
    path: 'private_key',
    env: 'OCS_PRIVATE_KEY',
    kind: 'text',
    allowed: 'a PEM private key (-----BEGIN … PRIVATE KEY----- … -----END … PRIVATE KEY-----)',
    secret: true,
  },
  {
    path: 'private_key_passphrase',
    env: 'OCS_PRIVATE_KEY_PASSPHRASE',
    envOnly: true,
    kind: 'text',
    allowed: 'text (the passphrase of an encrypted PEM private key)',
    secret: true,
  },
  {
    path: 'secrets.default',
    env: 'OCS_SECRETS_DEFAULT',
    kind: 'text',
    allowed: SECRET_POLICIES.join(', '),
  },
  {
    path: 'secrets.resources',
    kind: 'text',
    allowed: `a mapping of resource name to one of ${SECRET_POLICIES.join(', ')}`,
  },
  {
    path: 'secrets.archive_public_key',
    env: 'OCS_ARCHIVE_PUBLIC_KEY',
    kind: 'text',
    allowed: 'the base64 encoding of a 32-byte X25519 public key',
  },
  {
    path: 'secrets.open_threads',
    env: 'OCS_SECRETS_OPEN_THREADS',
    kind: 'integer',
    allowed: "an integer from 0 (open sealed values on the sync's own thread) to 64",
  },
];

/** Environment variables often cannot hold line breaks, so `\n` written out stands for one. */
export function normalizePem(value: string): string {
  return value.includes('\n') ? value : value.replace(/\\n/g, '\n');
}

function checkPrivateKey(value: string): string | undefined {
  const pem = normalizePem(value);
  if (/-----BEGIN [A-Z0-9 ]*PUBLIC KEY-----/.test(pem) && !/PRIVATE KEY-----/.test(pem)) {
    return 'holds a public key; give the private key (the public key is the one registered on the team); the value is not shown';
  }
  if (
    !/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]+-----END [A-Z0-9 ]*PRIVATE KEY-----/.test(pem)
  ) {
    return 'must be a PEM private key (-----BEGIN … PRIVATE KEY----- … -----END … PRIVATE KEY-----); the value is not shown';
  }
  return undefined;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

function checkArchivePublicKey(value: string): string | undefined {
  const text = value.trim();
  let bytes: Buffer | undefined;
  if (BASE64.test(text)) bytes = Buffer.from(text, 'base64');
  else if (BASE64URL.test(text)) bytes = Buffer.from(text.replace(/=+$/, ''), 'base64url');
  if (bytes === undefined) return 'is not base64; give the base64 of a 32-byte X25519 public key';
  if (bytes.length !== 32) {
    return `decodes to ${bytes.length} bytes; an X25519 public key is 32 bytes (base64: 44 characters ending in =)`;
  }
  return undefined;
}

export const secretsFields = {
  private_key_file: nonEmptyText.optional(),
  private_key: checked(isString, checkPrivateKey).optional(),
  private_key_passphrase: z.string().optional(),
  secrets: z.strictObject({
    default: z.enum(SECRET_POLICIES),
    resources: z.record(z.string(), z.enum(SECRET_POLICIES)),
    archive_public_key: checked(isString, checkArchivePublicKey).optional(),
    open_threads: integer(0, 64).optional(),
  }),
};

export function secretsConfig(values: SectionValues<typeof secretsFields>): SecretsConfig {
  return {
    privateKeyFile: values.private_key_file,
    privateKey: values.private_key === undefined ? undefined : normalizePem(values.private_key),
    privateKeyPassphrase: values.private_key_passphrase,
    secrets: {
      default: values.secrets.default,
      resources: recordByName(Object.entries(values.secrets.resources)),
      archivePublicKey: values.secrets.archive_public_key?.trim(),
      openThreads: values.secrets.open_threads,
    },
  };
}

/** The secrets policy for one resource. */
export function secretPolicyFor(config: SecretsConfig, resource: string): SecretPolicy {
  return valueByName(config.secrets.resources, resource) ?? config.secrets.default;
}
