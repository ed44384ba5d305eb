/**
 * Where team data is kept: `warehouse.*` (which database and how to talk to it), `lock.*` (one
 * writer at a time) and `data_file_mode` (the mode of the files that hold team data).
 */
import { checkWarehouseUrl, type WarehouseTarget } from '../warehouse/url.js';
import { checked, integer, isString, z, type SectionValues, type SettingInfo } from './setting.js';

export interface WarehouseConfig {
  warehouse: {
    url: string;
    target: WarehouseTarget;
    /** PostgreSQL schema for the tables. */
    schema: string;
    poolSize: number;
    /** 0 = no timeout. */
    statementTimeoutSeconds: number;
  };
  lock: { waitSeconds: number; staleAfterSeconds: number };
  /**
   * Mode of the files ocs-sync creates that hold team data (SQLite warehouse, blobs, Parquet);
   * the folders it creates get the same with x wherever r is set (0600 -> 0700).
   */
  dataFileMode: number;
}

export interface WarehouseFileValues {
  warehouse?: {
    url?: string;
    schema?: string;
    pool_size?: number;
    statement_timeout_seconds?: number;
  };
  lock?: { wait_seconds?: number; stale_after_seconds?: number };
  data_file_mode?: string | number;
}

export const warehouseDefaults = {
  warehouse: {
    url: './ocs-sync.db',
    schema: 'ocs',
    pool_size: 4,
    statement_timeout_seconds: 300,
  },
  lock: { wait_seconds: 60, stale_after_seconds: 600 },
  data_file_mode: '0600' as string | number,
} satisfies WarehouseFileValues;

export const WAREHOUSE_SETTINGS: readonly SettingInfo[] = [
  {
    path: 'warehouse.url',
    env: 'OCS_WAREHOUSE_URL',
    kind: 'text',
    url: true,
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
  { path: 'lock.wait_seconds', kind: 'integer', allowed: 'an integer from 0 to 86400' },
  { path: 'lock.stale_after_seconds', kind: 'integer', allowed: 'an integer from 1 to 2592000' },
  {
    path: 'data_file_mode',
    env: 'OCS_DATA_FILE_MODE',
    kind: 'text',
    allowed:
      "an octal file mode in quotes, such as '0600' or '0640': read and write for the owner, no execute bits",
  },
];

const PG_SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function checkPgSchema(value: string): string | undefined {
  if (!PG_SCHEMA_NAME.test(value)) {
    return 'must match ^[a-z_][a-z0-9_]{0,62}$ (lowercase letters, digits and _)';
  }
  if (value.startsWith('pg_')) return 'must not start with pg_ (PostgreSQL reserves it)';
  return undefined;
}

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

const isStringOrNumber = (value: unknown): value is string | number =>
  typeof value === 'string' || typeof value === 'number';

export const warehouseFields = {
  warehouse: z.strictObject({
    url: checked(isString, (value) => {
      const result = checkWarehouseUrl(value);
      return 'problem' in result ? result.problem : undefined;
    }),
    schema: checked(isString, checkPgSchema),
    pool_size: integer(1, 100),
    statement_timeout_seconds: integer(0, 2147483),
  }),
  lock: z.strictObject({
    wait_seconds: integer(0, 86400),
    stale_after_seconds: integer(1, 2592000),
  }),
  data_file_mode: checked(isStringOrNumber, checkFileMode),
};

export function warehouseConfig(values: SectionValues<typeof warehouseFields>): WarehouseConfig {
  const target = checkWarehouseUrl(values.warehouse.url);
  if ('problem' in target) throw new Error('toConfig called with an unvalidated warehouse.url');
  return {
    warehouse: {
      url: values.warehouse.url.trim(),
      target: target.target,
      schema: values.warehouse.schema,
      poolSize: values.warehouse.pool_size,
      statementTimeoutSeconds: values.warehouse.statement_timeout_seconds,
    },
    lock: {
      waitSeconds: values.lock.wait_seconds,
      staleAfterSeconds: values.lock.stale_after_seconds,
    },
    dataFileMode: parseFileMode(values.data_file_mode) ?? 0o600,
  };
}
