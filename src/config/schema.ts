/**
 * What ocs-sync can be configured with, put together from one file per section (server.ts,
 * warehouse.ts, sync.ts, http.ts, secrets.ts, daemon.ts, metrics.ts, files.ts, audit.ts,
 * object-storage.ts, snapshot.ts, teams.ts), each holding its keys'
 * schema, defaults and environment variables: the keys a file may hold (snake_case), the zod
 * schema that validates the merged values, and the typed `Config` (camelCase, every default
 * filled in) that the rest of the program reads. Pure: no I/O.
 */
import type { z as ZodTypes } from 'zod';
import {
  AUDIT_SETTINGS,
  auditConfig,
  auditDefaults,
  auditFields,
  type AuditConfig,
  type AuditFileValues,
} from './audit.js';
import {
  DAEMON_SETTINGS,
  daemonConfig,
  daemonDefaults,
  daemonFields,
  type DaemonConfig,
  type DaemonFileValues,
} from './daemon.js';
import {
  FILES_SETTINGS,
  filesConfig,
  filesDefaults,
  filesFields,
  type FilesConfig,
  type FilesFileValues,
} from './files.js';
import {
  HTTP_SETTINGS,
  httpConfig,
  httpDefaults,
  httpFields,
  type HttpConfig,
  type HttpFileValues,
} from './http.js';
import {
  OBJECT_STORAGE_SETTINGS,
  objectStorageConfig,
  objectStorageDefaults,
  objectStorageFields,
  type ObjectStorageConfig,
  type ObjectStorageFileValues,
} from './object-storage.js';
import {
  METRICS_SETTINGS,
  metricsConfig,
  metricsDefaults,
  metricsFields,
  type MetricsConfig,
  type MetricsFileValues,
} from './metrics.js';
import {
  SECRETS_SETTINGS,
  secretsConfig,
  secretsDefaults,
  secretsFields,
  type SecretsConfig,
  type SecretsFileValues,
} from './secrets.js';
import {
  SERVER_SETTINGS,
  serverConfig,
  serverDefaults,
  serverFields,
  type ServerConfig,
  type ServerFileValues,
} from './server.js';
import { z, type SettingInfo } from './setting.js';
import {
  SNAPSHOT_SETTINGS,
  snapshotConfig,
  snapshotDefaults,
  snapshotFields,
  type SnapshotConfig,
  type SnapshotFileValues,
} from './snapshot.js';
import {
  SYNC_SETTINGS,
  syncConfig,
  syncDefaults,
  syncFields,
  type SyncConfig,
  type SyncFileValues,
} from './sync.js';
import {
  TEAMS_SETTINGS,
  teamsConfig,
  teamsDefaults,
  teamsFields,
  type TeamsConfig,
  type TeamsFileValues,
} from './teams.js';
import {
  WAREHOUSE_SETTINGS,
  warehouseConfig,
  warehouseDefaults,
  warehouseFields,
  type WarehouseConfig,
  type WarehouseFileValues,
} from './warehouse.js';

/** The validated configuration. Every key is present; `undefined` only where the text says so. */
export type Config = ServerConfig &
  WarehouseConfig &
  SyncConfig &
  HttpConfig &
  SecretsConfig &
  DaemonConfig &
  MetricsConfig &
  FilesConfig &
  AuditConfig &
  ObjectStorageConfig &
  SnapshotConfig &
  TeamsConfig;

/** The keys a config file may hold (every one optional), as written in YAML. */
export type ConfigFileValues = ServerFileValues &
  WarehouseFileValues &
  SyncFileValues &
  HttpFileValues &
  SecretsFileValues &
  DaemonFileValues &
  MetricsFileValues &
  FilesFileValues &
  AuditFileValues &
  ObjectStorageFileValues &
  SnapshotFileValues &
  TeamsFileValues;

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

/** Defaults, as a config file would write them. `version` goes into the User-Agent. */
export function configDefaults(version: string) {
  return {
    ...serverDefaults,
    ...warehouseDefaults,
    ...syncDefaults,
    ...httpDefaults(version),
    ...secretsDefaults,
    ...daemonDefaults,
    ...metricsDefaults,
    ...filesDefaults,
    ...auditDefaults,
    ...objectStorageDefaults,
    ...snapshotDefaults,
    ...teamsDefaults,
  } satisfies ConfigFileValues;
}

const FIELDS = {
  ...serverFields,
  ...warehouseFields,
  ...syncFields,
  ...httpFields,
  ...secretsFields,
  ...daemonFields,
  ...metricsFields,
  ...filesFields,
  ...auditFields,
  ...objectStorageFields,
  ...snapshotFields,
  ...teamsFields,
};

/**
 * The order keys are checked, listed in messages and shown by `ocs-sync config` in: kept as it
 * was before the sections had files of their own, so no message changes.
 */
const KEY_ORDER = [
  'base_url',
  'api_key',
  'auth_scheme',
  'allow_insecure_http',
  'warehouse',
  'page_size',
  'resources',
  'exclude_resources',
  'exclude_fields',
  'concurrency',
  'pages_in_flight',
  'page_threads',
  'http',
  'log_level',
  'private_key_file',
  'private_key',
  'private_key_passphrase',
  'secrets',
  'on_schema_change',
  'lock',
  'deletes',
  'history',
  'schedule',
  'full_refresh_schedule',
  'timezone',
  'health',
  'metrics',
  'files',
  'audit',
  'object_storage',
  'snapshot',
  'data_file_mode',
  'teams_at_once',
] as const satisfies readonly (keyof typeof FIELDS)[];
// Fails to compile when a section's key is missing from KEY_ORDER.
const everyKeyOrdered: Exclude<keyof typeof FIELDS, (typeof KEY_ORDER)[number]> extends never
  ? true
  : never = true;
void everyKeyOrdered;

const orderOf = (path: string) =>
  KEY_ORDER.indexOf(path.split('.')[0] as (typeof KEY_ORDER)[number]);

/** Every setting (leaf) with its environment variable and what it accepts. */
export const SETTINGS: readonly SettingInfo[] = [
  ...SERVER_SETTINGS,
  ...WAREHOUSE_SETTINGS,
  ...SYNC_SETTINGS,
  ...HTTP_SETTINGS,
  ...SECRETS_SETTINGS,
  ...DAEMON_SETTINGS,
  ...METRICS_SETTINGS,
  ...FILES_SETTINGS,
  ...AUDIT_SETTINGS,
  ...OBJECT_STORAGE_SETTINGS,
  ...SNAPSHOT_SETTINGS,
  ...TEAMS_SETTINGS,
].sort((a, b) => orderOf(a.path) - orderOf(b.path));

export const SETTINGS_BY_PATH: ReadonlyMap<string, SettingInfo> = new Map(
  SETTINGS.map((setting) => [setting.path, setting]),
);

/** The schema of the merged values (defaults < file < environment < flags), snake_case. */
export const configSchema = z.strictObject(
  Object.fromEntries(KEY_ORDER.map((key) => [key, FIELDS[key]])) as typeof FIELDS,
);

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
  const warehouse = warehouseConfig(values);
  return {
    ...serverConfig(values),
    ...warehouse,
    ...syncConfig(values),
    ...httpConfig(values),
    ...secretsConfig(values),
    ...daemonConfig(values),
    ...metricsConfig(values),
    ...filesConfig(values, warehouse.warehouse.target),
    ...auditConfig(values),
    ...objectStorageConfig(values),
    ...snapshotConfig(values),
    ...teamsConfig(values),
  };
}
