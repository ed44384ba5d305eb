/**
 * What a sync takes and how: `page_size`, `resources`, `exclude_resources`, `exclude_fields`,
 * `concurrency`, `pages_in_flight`, `page_threads`, `history`, `deletes`, `on_schema_change`, and
 * `log_level`.
 */
import type { DeleteMode } from '../interfaces.js';
import type { PageThreadsSetting } from '../page-threads.js';
import {
  EXCLUDE_FIELDS_ALLOWED,
  checkExcludeFields,
  isExcludeFieldsShape,
  normaliseExcludeFields,
} from './exclude-fields.js';
import { LOG_LEVELS, type LogLevel } from './log-options.js';
import type { SecretsConfig } from './secrets.js';
import { checked, integer, isString, z, type SectionValues, type SettingInfo } from './setting.js';

export type SchemaChangePolicy = 'evolve' | 'stop';
export const SCHEMA_CHANGE_POLICIES = [
  'evolve',
  'stop',
] as const satisfies readonly SchemaChangePolicy[];
export const DELETE_MODES = ['mark', 'remove'] as const satisfies readonly DeleteMode[];

export interface SyncConfig {
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
  /**
   * Whether a sync hands its pages to threads of its own (the page thread; SQLite's writer
   * thread): `auto` is yes unless other teams of a fleet sync at the same time (`teams_at_once`
   * above 1), each then keeping its pages on the sync's thread. planPageThreads
   * (src/page-threads.ts) decides, and says no for a warehouse no other thread can write
   * (SQLite's `:memory:`).
   */
  pageThreads: PageThreadsSetting;
  /** true = every resource, false = none, or a list of resources. */
  history: boolean | string[];
  deletes: DeleteMode;
  onSchemaChange: SchemaChangePolicy;
  logLevel: LogLevel;
}

export interface SyncFileValues {
  page_size?: number;
  resources?: string[];
  exclude_resources?: string[];
  exclude_fields?: Record<string, string[]>;
  concurrency?: number;
  pages_in_flight?: number;
  page_threads?: PageThreadsSetting;
  history?: boolean | string[];
  deletes?: DeleteMode;
  on_schema_change?: SchemaChangePolicy;
  log_level?: LogLevel;
}

export const syncDefaults = {
  page_size: 1000,
  exclude_resources: [] as string[],
  exclude_fields: {} as Record<string, string[]>,
  concurrency: 1,
  pages_in_flight: 2,
  page_threads: 'auto' as PageThreadsSetting,
  history: false as boolean | string[],
  deletes: 'mark' as DeleteMode,
  on_schema_change: 'evolve' as SchemaChangePolicy,
  log_level: 'info' as LogLevel,
} satisfies SyncFileValues;

const RESOURCE_NAMES = 'a list of resource names (lowercase letters, digits and _)';

export const SYNC_SETTINGS: readonly SettingInfo[] = [
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
  { path: 'page_threads', kind: 'text', allowed: 'auto, true or false' },
  {
    path: 'history',
    env: 'OCS_HISTORY',
    kind: 'history',
    allowed: 'true, false, or a list of resource names (in OCS_HISTORY: comma-separated)',
  },
  { path: 'deletes', env: 'OCS_DELETES', kind: 'text', allowed: DELETE_MODES.join(' or ') },
  {
    path: 'on_schema_change',
    env: 'OCS_ON_SCHEMA_CHANGE',
    kind: 'text',
    allowed: SCHEMA_CHANGE_POLICIES.join(' or '),
  },
  {
    path: 'log_level',
    env: 'OCS_LOG_LEVEL',
    kind: 'text',
    allowed: LOG_LEVELS.join(', '),
  },
];

const RESOURCE_NAME = /^[a-z][a-z0-9_]{0,62}$/;

export function isResourceName(name: string): boolean {
  return RESOURCE_NAME.test(name);
}

const resourceName = checked(isString, (name) =>
  isResourceName(name)
    ? undefined
    : `has ${JSON.stringify(name.slice(0, 80))}, which is not a resource name (lowercase letters, digits and _, starting with a letter)`,
);
const resourceList = z.array(resourceName);

export const syncFields = {
  page_size: integer(1, 1000),
  resources: resourceList.optional(),
  exclude_resources: resourceList,
  exclude_fields: checked(isExcludeFieldsShape, checkExcludeFields),
  concurrency: integer(1, 8),
  pages_in_flight: integer(1, 8),
  page_threads: z.union([z.literal('auto'), z.boolean()]),
  history: z.union([z.boolean(), resourceList]),
  deletes: z.enum(DELETE_MODES),
  on_schema_change: z.enum(SCHEMA_CHANGE_POLICIES),
  log_level: z.enum(LOG_LEVELS),
};

export function syncConfig(values: SectionValues<typeof syncFields>): SyncConfig {
  return {
    pageSize: values.page_size,
    resources: values.resources === undefined ? undefined : [...new Set(values.resources)],
    excludeResources: [...new Set(values.exclude_resources)],
    excludeFields: normaliseExcludeFields(values.exclude_fields),
    concurrency: values.concurrency,
    pagesInFlight: values.pages_in_flight,
    pageThreads: values.page_threads,
    history: Array.isArray(values.history) ? [...new Set(values.history)] : values.history,
    deletes: values.deletes,
    onSchemaChange: values.on_schema_change,
    logLevel: values.log_level,
  };
}

/** Whether a resource keeps every version in `<resource>__history`. */
export function historyFor(config: SyncConfig, resource: string): boolean {
  return Array.isArray(config.history) ? config.history.includes(resource) : config.history;
}

/**
 * The manifest's resources this configuration selects, in manifest order, plus the names the
 * configuration mentions that the manifest does not have (worth a warning: a typo, or a resource
 * this server version lacks).
 */
export function selectResources(
  config: SyncConfig & SecretsConfig,
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
