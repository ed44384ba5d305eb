/**
 * What ocs-sync can be configured with: the file's keys (snake_case), their defaults, their
 * environment variables, the zod schema that validates the merged values, and the typed `Config`
 * (camelCase, every default filled in) that the rest of the program reads. Pure: no I/O.
 */

import { createRequire } from 'node:module';
import { basename, dirname, extname, join } from 'node:path';
import type * as NodeCron from 'node-cron';

// zod's CommonJS build: loaded with require, its many files cost a fraction of what the ESM
// loader's asynchronous reads do, which counts for every command's start-up.
const { z } = createRequire(import.meta.url)('zod') as typeof Zod;
import type * as Zod from 'zod';
import type { z as ZodTypes } from 'zod';
import type { DeleteMode } from '../interfaces.js';
import { recordByName, valueByName } from '../names.js';
import { checkWarehouseUrl, redactUrl, type WarehouseTarget } from './warehouse-url.js';
import {
  EXCLUDE_FIELDS_ALLOWED,
  checkExcludeFields,
  isExcludeFieldsShape,
  normaliseExcludeFields,
} from './exclude-fields.js';

export type AuthScheme = 'api-key' | 'bearer';
import { LOG_LEVELS, type LogLevel } from './log-options.js';
export { LOG_LEVELS, type LogLevel };
// The sealing module owns the list of secrets policies; config validates against it.
import { SECRET_POLICIES, type SecretPolicy } from '../sealing/policy-names.js';
export { SECRET_POLICIES, type SecretPolicy };
export type SchemaChangePolicy = 'evolve' | 'stop';

export const AUTH_SCHEMES = ['api-key', 'bearer'] as const satisfies readonly AuthScheme[];
export const SCHEMA_CHANGE_POLICIES = [
  'evolve',
  'stop',
] as const satisfies readonly SchemaChangePolicy[];
export const DELETE_MODES = ['mark', 'remove'] as const satisfies readonly DeleteMode[];

export interface ListenAddress {
  host: string;
  port: number;
}

/** The validated configuration. Every key is present; `undefined` only where the text says so. */
export interface Config {
  /** Server root without a trailing slash; undefined only for commands that do not need it. */
  baseUrl: string | undefined;
  /** Never log it; `describeConfigForLog` shows "set" / "not set". */
  apiKey: string | undefined;
  authScheme: AuthScheme;
  allowInsecureHttp: boolean;
  warehouse: {
    url: string;
    target: WarehouseTarget;
    /** PostgreSQL schema for the tables. */
    schema: string;
    poolSize: number;
    /** 0 = no timeout. */
    statementTimeoutSeconds: number;
  };
  pageSize: number;
  /** Only these resources; undefined = every resource in the manifest. */
  resources: string[] | undefined;
  excludeResources: string[];
  /** Fields never stored (table nor history), per resource. */
  excludeFields: Record<string, string[]>;
  /** Resources synced at once. */
  concurrency: number;
  /** Pages fetched ahead of the writer. */
  pagesInFlight: number;
  http: {
    requestTimeoutSeconds: number;
    maxAttempts: number;
    minRetryDelayMs: number;
    maxRetryDelaySeconds: number;
    /** Hard cap on requests per minute; 0 = none. */
    maxRequestsPerMinute: number;
    userAgent: string;
    /** Largest page (or other export API answer) read, in MiB; a larger one fails its resource. */
    maxPageMib: number;
  };
  logLevel: LogLevel;
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
  onSchemaChange: SchemaChangePolicy;
  lock: { waitSeconds: number; staleAfterSeconds: number };
  deletes: DeleteMode;
  /** true = every resource, false = none, or a list of resources. */
  history: boolean | string[];
  /** Cron expression for incremental syncs. */
  schedule: string;
  /** Cron expression for full refreshes; null = off. */
  fullRefreshSchedule: string | null;
  /** IANA time zone the schedules are read in. */
  timezone: string;
  health: {
    /** null = no health server. */
    listen: ListenAddress | null;
    maxAgeSeconds: number;
  };
  files: {
    /** Fetch the bytes of every `files` row into the blob store. */
    enabled: boolean;
    /**
     * The blob store's folder. Default next to a SQLite warehouse (`ocs-sync.db` ->
     * `ocs-sync-files`); undefined with PostgreSQL or `:memory:` when not set.
     */
    dir: string | undefined;
    /** Downloads at once. */
    concurrency: number;
    /** Largest file fetched when its row gives no `content_size` (and never more), in MiB. */
    maxFileMib: number;
    /** Deadline of one file download, headers and body, in seconds. */
    requestTimeoutSeconds: number;
  };
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
  /**
   * Mode of the files ocs-sync creates that hold team data (SQLite warehouse, blobs, Parquet);
   * the folders it creates get the same with x wherever r is set (0600 -> 0700).
   */
  dataFileMode: number;
}

/** The keys a config file may hold (every one optional), as written in YAML. */
export interface ConfigFileValues {
  base_url?: string;
  api_key?: string;
  auth_scheme?: AuthScheme;
  allow_insecure_http?: boolean;
  warehouse?: {
    url?: string;
    schema?: string;
    pool_size?: number;
    statement_timeout_seconds?: number;
  };
  page_size?: number;
  resources?: string[];
  exclude_resources?: string[];
  exclude_fields?: Record<string, string[]>;
  concurrency?: number;
  pages_in_flight?: number;
  http?: {
    request_timeout_seconds?: number;
    max_attempts?: number;
    min_retry_delay_ms?: number;
    max_retry_delay_seconds?: number;
    max_requests_per_minute?: number;
    user_agent?: string;
    max_page_mib?: number;
  };
  log_level?: LogLevel;
  private_key_file?: string;
  private_key?: string;
  secrets?: {
    default?: SecretPolicy;
    resources?: Record<string, SecretPolicy>;
    archive_public_key?: string;
    open_threads?: number;
  };
  on_schema_change?: SchemaChangePolicy;
  lock?: { wait_seconds?: number; stale_after_seconds?: number };
  deletes?: DeleteMode;
  history?: boolean | string[];
  schedule?: string;
  full_refresh_schedule?: string | false;
  timezone?: string;
  health?: { listen?: string | false; max_age_seconds?: number };
  audit?: { enabled?: boolean; signing_key_file?: string; checkpoint_file?: string };
  files?: {
    enabled?: boolean;
    dir?: string;
    concurrency?: number;
    max_file_mib?: number;
    request_timeout_seconds?: number;
  };
  data_file_mode?: string | number;
}

type SnakeToCamel<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<SnakeToCamel<Tail>>}`
  : S;
type CamelCased<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { [K in keyof T as K extends string ? SnakeToCamel<K> : K]: CamelCased<T[K]> }
    : T;

/**
 * Command-line overrides: the file's shape in camelCase, every key optional (`undefined` = not
 * given). Values given as text (as a CLI parser hands them over) are converted like environment
 * values: "500" for a number, "true" for a boolean, "a,b" for a list.
 */
export type ConfigFlags = CamelCased<ConfigFileValues>;

export const DEFAULT_SCHEDULE = '*/15 * * * *';
export const DEFAULT_FULL_REFRESH_SCHEDULE = '0 3 * * 0';
export const DEFAULT_HEALTH_LISTEN = '127.0.0.1:9464';

/** Defaults, as a config file would write them. `version` goes into the User-Agent. */
export function configDefaults(version: string) {
  return {
    auth_scheme: 'api-key' as AuthScheme,
    allow_insecure_http: false,
    warehouse: {
      url: './ocs-sync.db',
      schema: 'ocs',
      pool_size: 4,
      statement_timeout_seconds: 300,
    },
    page_size: 1000,
    exclude_resources: [] as string[],
    exclude_fields: {} as Record<string, string[]>,
    concurrency: 1,
    pages_in_flight: 2,
    http: {
      request_timeout_seconds: 60,
      max_attempts: 6,
      min_retry_delay_ms: 500,
      max_retry_delay_seconds: 60,
      max_requests_per_minute: 0,
      user_agent: `ocs-sync/${version}`,
      max_page_mib: 64,
    },
    log_level: 'info' as LogLevel,
    secrets: {
      default: 'plaintext' as SecretPolicy,
      resources: {} as Record<string, SecretPolicy>,
    },
    on_schema_change: 'evolve' as SchemaChangePolicy,
    lock: { wait_seconds: 60, stale_after_seconds: 600 },
    deletes: 'mark' as DeleteMode,
    history: false as boolean | string[],
    schedule: DEFAULT_SCHEDULE,
    full_refresh_schedule: DEFAULT_FULL_REFRESH_SCHEDULE as string | false,
    timezone: 'UTC',
    health: { listen: DEFAULT_HEALTH_LISTEN as string | false, max_age_seconds: 3600 },
    files: { enabled: true, concurrency: 2, max_file_mib: 1024, request_timeout_seconds: 3600 },
    audit: { enabled: false },
    data_file_mode: '0600' as string | number,
  } satisfies ConfigFileValues;
}

/** How text (an environment variable, a CLI value) becomes a value of a setting. */
export type TextKind = 'text' | 'integer' | 'boolean' | 'list' | 'history' | 'field_map';

export interface SettingInfo {
  /** Dotted snake_case path as in the file, e.g. `http.max_attempts`. */
  path: string;
  /** The environment variable that sets it, if any. */
  env?: string;
  /** Set only from the environment, never from a file or a flag. */
  envOnly?: boolean;
  kind: TextKind;
  /** What is allowed, phrased to follow "must be". */
  allowed: string;
  /** Never echoed in a message. */
  secret?: boolean;
}

const RESOURCE_NAMES = 'a list of resource names (lowercase letters, digits and _)';

/** Every setting (leaf) with its environment variable and what it accepts. */
export const SETTINGS: readonly SettingInfo[] = [
  {
    path: 'base_url',
    env: 'OCS_BASE_URL',
    kind: 'text',
    allowed:
      'the http:// or https:// URL of the Open Chat Studio server, e.g. https://chat.example.org',
  },
  {
    path: 'api_key',
    env: 'OCS_API_KEY',
    kind: 'text',
    allowed: "text (the API key of one of the team's admins)",
    secret: true,
  },
  {
    path: 'auth_scheme',
    env: 'OCS_AUTH_SCHEME',
    kind: 'text',
    allowed: 'api-key (header X-Api-Key) or bearer (header Authorization: Bearer)',
  },
  {
    path: 'allow_insecure_http',
    env: 'OCS_ALLOW_INSECURE_HTTP',
    kind: 'boolean',
    allowed: 'true or false',
  },
  {
    path: 'warehouse.url',
    env: 'OCS_WAREHOUSE_URL',
    kind: 'text',
    allowed: 'a file path or sqlite:PATH (SQLite), or postgres://… / postgresql://… (PostgreSQL)',
  },
  {
    path: 'warehouse.schema',
    env: 'OCS_WAREHOUSE_SCHEMA',
    kind: 'text',
    allowed: 'a PostgreSQL schema name matching ^[a-z_][a-z0-9_]{0,62}$, not starting with pg_',
  },
  { path: 'warehouse.pool_size', kind: 'integer', allowed: 'an integer from 1 to 100' },
  {
    path: 'warehouse.statement_timeout_seconds',
    kind: 'integer',
    allowed: 'an integer from 0 (no timeout) to 2147483',
  },
  {
    path: 'page_size',
    env: 'OCS_PAGE_SIZE',
    kind: 'integer',
    allowed: 'an integer from 1 to 1000',
  },
  { path: 'resources', env: 'OCS_RESOURCES', kind: 'list', allowed: RESOURCE_NAMES },
  {
    path: 'exclude_resources',
    env: 'OCS_EXCLUDE_RESOURCES',
    kind: 'list',
    allowed: RESOURCE_NAMES,
  },
  {
    path: 'exclude_fields',
    env: 'OCS_EXCLUDE_FIELDS',
    kind: 'field_map',
    allowed: EXCLUDE_FIELDS_ALLOWED,
  },
  {
    path: 'concurrency',
    env: 'OCS_CONCURRENCY',
    kind: 'integer',
    allowed: 'an integer from 1 to 8',
  },
  { path: 'pages_in_flight', kind: 'integer', allowed: 'an integer from 1 to 8' },
  {
    path: 'http.request_timeout_seconds',
    kind: 'integer',
    allowed: 'an integer from 1 to 3600',
  },
  { path: 'http.max_attempts', kind: 'integer', allowed: 'an integer from 1 to 20' },
  { path: 'http.min_retry_delay_ms', kind: 'integer', allowed: 'an integer from 0 to 600000' },
  { path: 'http.max_retry_delay_seconds', kind: 'integer', allowed: 'an integer from 1 to 3600' },
  {
    path: 'http.max_requests_per_minute',
    env: 'OCS_MAX_REQUESTS_PER_MINUTE',
    kind: 'integer',
    allowed: 'an integer from 0 (no cap) to 100000',
  },
  {
    path: 'http.user_agent',
    kind: 'text',
    allowed: 'printable ASCII text of 1 to 200 characters',
  },
  {
    path: 'http.max_page_mib',
    env: 'OCS_MAX_PAGE_MIB',
    kind: 'integer',
    allowed: 'an integer from 1 to 512 (MiB)',
  },
  {
    path: 'log_level',
    env: 'OCS_LOG_LEVEL',
    kind: 'text',
    allowed: LOG_LEVELS.join(', '),
  },
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
  {
    path: 'on_schema_change',
    env: 'OCS_ON_SCHEMA_CHANGE',
    kind: 'text',
    allowed: SCHEMA_CHANGE_POLICIES.join(' or '),
  },
  { path: 'lock.wait_seconds', kind: 'integer', allowed: 'an integer from 0 to 86400' },
  { path: 'lock.stale_after_seconds', kind: 'integer', allowed: 'an integer from 1 to 2592000' },
  { path: 'deletes', env: 'OCS_DELETES', kind: 'text', allowed: DELETE_MODES.join(' or ') },
  {
    path: 'history',
    env: 'OCS_HISTORY',
    kind: 'history',
    allowed: 'true, false, or a list of resource names (in OCS_HISTORY: comma-separated)',
  },
  {
    path: 'schedule',
    env: 'OCS_SCHEDULE',
    kind: 'text',
    allowed: `a cron expression such as "${DEFAULT_SCHEDULE}"`,
  },
  {
    path: 'full_refresh_schedule',
    env: 'OCS_FULL_REFRESH_SCHEDULE',
    kind: 'text',
    allowed: `a cron expression such as "${DEFAULT_FULL_REFRESH_SCHEDULE}", or off`,
  },
  {
    path: 'timezone',
    env: 'OCS_TIMEZONE',
    kind: 'text',
    allowed: 'an IANA time zone such as UTC or Europe/Berlin',
  },
  {
    path: 'health.listen',
    env: 'OCS_HEALTH_LISTEN',
    kind: 'text',
    allowed: 'HOST:PORT (e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464), or off',
  },
  { path: 'health.max_age_seconds', kind: 'integer', allowed: 'an integer from 1 to 31536000' },
  { path: 'files.enabled', env: 'OCS_FILES_ENABLED', kind: 'boolean', allowed: 'true or false' },
  {
    path: 'files.dir',
    env: 'OCS_FILES_DIR',
    kind: 'text',
    allowed: 'the path of a folder for the file contents (created when missing)',
  },
  {
    path: 'files.concurrency',
    env: 'OCS_FILES_CONCURRENCY',
    kind: 'integer',
    allowed: 'an integer from 1 to 16',
  },
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
  {
    path: 'data_file_mode',
    env: 'OCS_DATA_FILE_MODE',
    kind: 'text',
    allowed:
      "an octal file mode in quotes, such as '0600' or '0640': read and write for the owner, no execute bits",
  },
];

export const SETTINGS_BY_PATH: ReadonlyMap<string, SettingInfo> = new Map(
  SETTINGS.map((setting) => [setting.path, setting]),
);

// ---------------------------------------------------------------------------------------------
// Checks shared by the schema and by cross-key validation. Each returns a problem phrased to
// follow the setting's name, or undefined when the value is fine.

const RESOURCE_NAME = /^[a-z][a-z0-9_]{0,62}$/;
const PG_SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function isResourceName(name: string): boolean {
  return RESOURCE_NAME.test(name);
}

/** Hostnames that never leave the machine: 127.0.0.0/8, ::1, localhost. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost') return true;
  if (host === '[::1]' || host === '::1') return true;
  // WHATWG URL parsing already normalised shorthand IPv4 (127.1, 0x7f.1) to dotted decimal.
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export function checkBaseUrl(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'is not a URL; write it like https://chat.example.org';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `must use http:// or https://, not ${url.protocol}//`;
  }
  if (url.username !== '' || url.password !== '') {
    return 'must not contain a user name or password; the API key goes in api_key / OCS_API_KEY';
  }
  if (url.search !== '' || url.hash !== '') {
    return 'must not contain a ?query or #fragment; give the server root, e.g. https://chat.example.org';
  }
  if (/\/api\/export\/?$/.test(url.pathname)) {
    return 'must be the server root without /api/export (ocs-sync adds that), e.g. https://chat.example.org';
  }
  return undefined;
}

function checkPgSchema(value: string): string | undefined {
  if (!PG_SCHEMA_NAME.test(value)) {
    return 'must match ^[a-z_][a-z0-9_]{0,62}$ (lowercase letters, digits and _)';
  }
  if (value.startsWith('pg_')) return 'must not start with pg_ (PostgreSQL reserves it)';
  return undefined;
}

export function checkCron(value: string): string | undefined {
  // The defaults are known good; the scheduler is loaded only to check a schedule someone wrote.
  if (value === DEFAULT_SCHEDULE || value === DEFAULT_FULL_REFRESH_SCHEDULE) return undefined;
  const cron = createRequire(import.meta.url)('node-cron') as typeof NodeCron;
  if (cron.validate(value)) return undefined;
  const details = cron
    .validateDetailed(value)
    .errors.map((error) => error.message)
    .join('; ');
  return (
    `is not a valid cron expression${details ? ` (${details})` : ''}; expected 5 fields ` +
    `(minute hour day-of-month month day-of-week), or 6 with seconds first, e.g. "${DEFAULT_SCHEDULE}"`
  );
}

export function checkTimezone(value: string): string | undefined {
  // The default needs no check, and the check loads time-zone data (tens of ms at start-up).
  if (value === 'UTC') return undefined;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    return undefined;
  } catch {
    return 'is not a time zone this Node.js knows; use an IANA name such as UTC, Europe/Berlin or America/New_York';
  }
}

export function parseListenAddress(value: string): ListenAddress | { problem: string } {
  const match =
    /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(value) ?? /^([^\s:[\]]+):(\d{1,5})$/.exec(value);
  if (!match) {
    return {
      problem: 'must be HOST:PORT (e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464), or off',
    };
  }
  const port = Number(match[2]);
  if (port > 65535) return { problem: 'has a port above 65535' };
  return { host: match[1]!, port };
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

export function checkArchivePublicKey(value: string): string | undefined {
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

const isStringOrNumber = (value: unknown): value is string | number =>
  typeof value === 'string' || typeof value === 'number';

/**
 * `data_file_mode` as a number. YAML 1.2 reads an unquoted `0600` as the decimal 600, so a number
 * is read by its digits as octal too: `0600`, `600` and `'0600'` all mean rw-------.
 */
export function parseFileMode(value: string | number): number | undefined {
  const text = String(value).trim();
  if (!/^0?[0-7]{3}$/.test(text)) return undefined;
  return parseInt(text, 8);
}

function checkFileMode(value: string | number): string | undefined {
  const mode = parseFileMode(value);
  if (mode === undefined) {
    return `must be an octal file mode in quotes, such as '0600' or '0640'; got ${JSON.stringify(value)}`;
  }
  if ((mode & 0o600) !== 0o600) return 'must let the owner read and write (0600 at least)';
  if ((mode & 0o111) !== 0) return 'must not set execute bits (folders get them where r is set)';
  return undefined;
}

function checkUserAgent(value: string): string | undefined {
  if (value.length < 1 || value.length > 200 || !/^[\x20-\x7e]+$/.test(value)) {
    return 'must be printable ASCII text of 1 to 200 characters (no line breaks)';
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// The schema of the merged values (defaults < file < environment < flags), snake_case.

/** A leaf with its own specific problem text; the issue is `custom` so the text is kept. */
function checked<T>(
  isType: (value: unknown) => value is T,
  check: (value: T) => string | undefined,
) {
  return z.custom<T>().superRefine((value, context) => {
    if (!isType(value)) {
      // No message: the setting's `allowed` text describes it.
      context.addIssue({ code: 'custom', message: '', params: { wrongType: true } });
      return;
    }
    const problem = check(value);
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
  });
}

const isString = (value: unknown): value is string => typeof value === 'string';
const isStringOrFalse = (value: unknown): value is string | false =>
  typeof value === 'string' || value === false;

const integer = (min: number, max: number) => z.number().int().min(min).max(max);

const resourceName = checked(isString, (name) =>
  isResourceName(name)
    ? undefined
    : `has ${JSON.stringify(name.slice(0, 80))}, which is not a resource name (lowercase letters, digits and _, starting with a letter)`,
);
const resourceList = z.array(resourceName);

const cron = checked(isString, checkCron);

const nonEmptyText = checked(isString, (value) =>
  value.trim() === '' ? 'must not be empty' : undefined,
);

export const configSchema = z.strictObject({
  base_url: checked(isString, checkBaseUrl).optional(),
  api_key: checked(isString, (value) =>
    value.trim() === '' ? 'must not be empty' : undefined,
  ).optional(),
  auth_scheme: z.enum(AUTH_SCHEMES),
  allow_insecure_http: z.boolean(),
  warehouse: z.strictObject({
    url: checked(isString, (value) => {
      const result = checkWarehouseUrl(value);
      return 'problem' in result ? result.problem : undefined;
    }),
    schema: checked(isString, checkPgSchema),
    pool_size: integer(1, 100),
    statement_timeout_seconds: integer(0, 2147483),
  }),
  page_size: integer(1, 1000),
  resources: resourceList.optional(),
  exclude_resources: resourceList,
  exclude_fields: checked(isExcludeFieldsShape, checkExcludeFields),
  concurrency: integer(1, 8),
  pages_in_flight: integer(1, 8),
  http: z.strictObject({
    request_timeout_seconds: integer(1, 3600),
    max_attempts: integer(1, 20),
    min_retry_delay_ms: integer(0, 600000),
    max_retry_delay_seconds: integer(1, 3600),
    max_requests_per_minute: integer(0, 100000),
    user_agent: checked(isString, checkUserAgent),
    max_page_mib: integer(1, 512),
  }),
  log_level: z.enum(LOG_LEVELS),
  private_key_file: checked(isString, (value) =>
    value.trim() === '' ? 'must not be empty' : undefined,
  ).optional(),
  private_key: checked(isString, checkPrivateKey).optional(),
  private_key_passphrase: z.string().optional(),
  secrets: z.strictObject({
    default: z.enum(SECRET_POLICIES),
    resources: z.record(z.string(), z.enum(SECRET_POLICIES)),
    archive_public_key: checked(isString, checkArchivePublicKey).optional(),
    open_threads: integer(0, 64).optional(),
  }),
  on_schema_change: z.enum(SCHEMA_CHANGE_POLICIES),
  lock: z.strictObject({
    wait_seconds: integer(0, 86400),
    stale_after_seconds: integer(1, 2592000),
  }),
  deletes: z.enum(DELETE_MODES),
  history: z.union([z.boolean(), resourceList]),
  schedule: cron,
  full_refresh_schedule: checked(isStringOrFalse, (value) =>
    value === false || value === 'off' ? undefined : checkCron(value),
  ),
  timezone: checked(isString, checkTimezone),
  health: z.strictObject({
    listen: checked(isStringOrFalse, (value) => {
      if (value === false || value === 'off') return undefined;
      const parsed = parseListenAddress(value);
      return 'problem' in parsed ? parsed.problem : undefined;
    }),
    max_age_seconds: integer(1, 31536000),
  }),
  files: z.strictObject({
    enabled: z.boolean(),
    dir: checked(isString, (value) =>
      value.trim() === '' ? 'must not be empty' : undefined,
    ).optional(),
    concurrency: integer(1, 16),
    max_file_mib: integer(1, 1048576),
    request_timeout_seconds: integer(1, 604800),
  }),
  audit: z.strictObject({
    enabled: z.boolean(),
    signing_key_file: nonEmptyText.optional(),
    checkpoint_file: nonEmptyText.optional(),
  }),
  data_file_mode: checked(isStringOrNumber, checkFileMode),
});

export type MergedConfigValues = ZodTypes.output<typeof configSchema>;

/** The allowed keys of every section, by dotted path ('' = top level). */
export const SECTION_KEYS: ReadonlyMap<string, readonly string[]> = (() => {
  const sections = new Map<string, string[]>();
  const walk = (schema: ZodTypes.ZodObject, prefix: string) => {
    const keys = Object.keys(schema.shape).filter(
      (key) => !SETTINGS_BY_PATH.get(prefix ? `${prefix}.${key}` : key)?.envOnly,
    );
    sections.set(prefix, keys);
    for (const [key, child] of Object.entries(schema.shape)) {
      if (child instanceof z.ZodObject) walk(child, prefix ? `${prefix}.${key}` : key);
    }
  };
  walk(configSchema, '');
  return sections;
})();

/** Turns validated, merged values into the typed Config. */
export function toConfig(values: MergedConfigValues): Config {
  const target = checkWarehouseUrl(values.warehouse.url);
  if ('problem' in target) throw new Error('toConfig called with an unvalidated warehouse.url');
  const listen = values.health.listen;
  let listenAddress: ListenAddress | null = null;
  if (listen !== false && listen !== 'off') {
    const parsed = parseListenAddress(listen);
    if ('problem' in parsed) throw new Error('toConfig called with an unvalidated health.listen');
    listenAddress = parsed;
  }
  const fullRefresh = values.full_refresh_schedule;
  return {
    baseUrl: values.base_url === undefined ? undefined : values.base_url.trim().replace(/\/+$/, ''),
    apiKey: values.api_key?.trim(),
    authScheme: values.auth_scheme,
    allowInsecureHttp: values.allow_insecure_http,
    warehouse: {
      url: values.warehouse.url.trim(),
      target: target.target,
      schema: values.warehouse.schema,
      poolSize: values.warehouse.pool_size,
      statementTimeoutSeconds: values.warehouse.statement_timeout_seconds,
    },
    pageSize: values.page_size,
    resources: values.resources === undefined ? undefined : [...new Set(values.resources)],
    excludeResources: [...new Set(values.exclude_resources)],
    excludeFields: normaliseExcludeFields(values.exclude_fields),
    concurrency: values.concurrency,
    pagesInFlight: values.pages_in_flight,
    http: {
      requestTimeoutSeconds: values.http.request_timeout_seconds,
      maxAttempts: values.http.max_attempts,
      minRetryDelayMs: values.http.min_retry_delay_ms,
      maxRetryDelaySeconds: values.http.max_retry_delay_seconds,
      maxRequestsPerMinute: values.http.max_requests_per_minute,
      userAgent: values.http.user_agent,
      maxPageMib: values.http.max_page_mib,
    },
    logLevel: values.log_level,
    privateKeyFile: values.private_key_file,
    privateKey: values.private_key === undefined ? undefined : normalizePem(values.private_key),
    privateKeyPassphrase: values.private_key_passphrase,
    secrets: {
      default: values.secrets.default,
      resources: recordByName(Object.entries(values.secrets.resources)),
      archivePublicKey: values.secrets.archive_public_key?.trim(),
      openThreads: values.secrets.open_threads,
    },
    onSchemaChange: values.on_schema_change,
    lock: {
      waitSeconds: values.lock.wait_seconds,
      staleAfterSeconds: values.lock.stale_after_seconds,
    },
    deletes: values.deletes,
    history: Array.isArray(values.history) ? [...new Set(values.history)] : values.history,
    schedule: values.schedule,
    fullRefreshSchedule: fullRefresh === false || fullRefresh === 'off' ? null : fullRefresh,
    timezone: values.timezone,
    health: { listen: listenAddress, maxAgeSeconds: values.health.max_age_seconds },
    files: {
      enabled: values.files.enabled,
      dir: values.files.dir?.trim() ?? defaultFilesDir(target.target),
      concurrency: values.files.concurrency,
      maxFileMib: values.files.max_file_mib,
      requestTimeoutSeconds: values.files.request_timeout_seconds,
    },
    audit: {
      enabled: values.audit.enabled,
      signingKeyFile: values.audit.signing_key_file?.trim(),
      checkpointFile: values.audit.checkpoint_file?.trim(),
    },
    dataFileMode: parseFileMode(values.data_file_mode) ?? 0o600,
  };
}

/** The blob store beside a SQLite file: `data/ocs-sync.db` -> `data/ocs-sync-files`. */
export function defaultFilesDir(target: WarehouseTarget): string | undefined {
  if (target.dialect !== 'sqlite' || target.path === ':memory:') return undefined;
  return join(dirname(target.path), `${basename(target.path, extname(target.path))}-files`);
}

// ---------------------------------------------------------------------------------------------
// Small questions the rest of the program asks of a Config.

/** The secrets policy for one resource. */
export function secretPolicyFor(config: Config, resource: string): SecretPolicy {
  return valueByName(config.secrets.resources, resource) ?? config.secrets.default;
}

/** Whether a resource keeps every version in `<resource>__history`. */
export function historyFor(config: Config, resource: string): boolean {
  return Array.isArray(config.history) ? config.history.includes(resource) : config.history;
}

/**
 * The manifest's resources this configuration selects, in manifest order, plus the names the
 * configuration mentions that the manifest does not have (worth a warning: a typo, or a resource
 * this server version lacks).
 */
export function selectResources(
  config: Config,
  manifestResources: readonly string[],
): { selected: string[]; unknown: string[] } {
  const known = new Set(manifestResources);
  const wanted = config.resources === undefined ? undefined : new Set(config.resources);
  const excluded = new Set(config.excludeResources);
  const selected = manifestResources.filter(
    (resource) => (wanted === undefined || wanted.has(resource)) && !excluded.has(resource),
  );
  const mentioned = new Set([
    ...(config.resources ?? []),
    ...config.excludeResources,
    ...Object.keys(config.excludeFields),
    ...Object.keys(config.secrets.resources),
    ...(Array.isArray(config.history) ? config.history : []),
  ]);
  return { selected, unknown: [...mentioned].filter((name) => !known.has(name)).sort() };
}

/** For messages: a value shown briefly, URLs without passwords. */
export function showValue(path: string, value: unknown): string {
  if (SETTINGS_BY_PATH.get(path)?.secret) return '(not shown)';
  if (typeof value === 'string' && (path === 'warehouse.url' || path === 'base_url')) {
    value = redactUrl(value);
  }
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
