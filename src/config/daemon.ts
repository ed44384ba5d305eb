/**
 * Running as a daemon: when syncs run (`schedule`, `full_refresh_schedule`, `timezone`) and the
 * health server (`health.*`).
 */
import { createRequire } from 'node:module';
import type * as NodeCron from 'node-cron';
import { parseListenAddress, type ListenAddress } from '../listen-address.js';
import {
  checked,
  integer,
  isString,
  isStringOrFalse,
  z,
  type SectionValues,
  type SettingInfo,
} from './setting.js';

export interface DaemonConfig {
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
}

export interface DaemonFileValues {
  schedule?: string;
  full_refresh_schedule?: string | false;
  timezone?: string;
  health?: { listen?: string | false; max_age_seconds?: number };
}

export const DEFAULT_SCHEDULE = '*/15 * * * *';
export const DEFAULT_FULL_REFRESH_SCHEDULE = '0 3 * * 0';
export const DEFAULT_HEALTH_LISTEN = '127.0.0.1:9464';

export const daemonDefaults = {
  schedule: DEFAULT_SCHEDULE,
  full_refresh_schedule: DEFAULT_FULL_REFRESH_SCHEDULE as string | false,
  timezone: 'UTC',
  health: { listen: DEFAULT_HEALTH_LISTEN as string | false, max_age_seconds: 3600 },
} satisfies DaemonFileValues;

export const DAEMON_SETTINGS: readonly SettingInfo[] = [
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
];

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

function checkTimezone(value: string): string | undefined {
  // The default needs no check, and the check loads time-zone data (tens of ms at start-up).
  if (value === 'UTC') return undefined;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    return undefined;
  } catch {
    return 'is not a time zone this Node.js knows; use an IANA name such as UTC, Europe/Berlin or America/New_York';
  }
}

const isOff = (value: string | false): value is false | 'off' => value === false || value === 'off';

export const daemonFields = {
  schedule: checked(isString, checkCron),
  full_refresh_schedule: checked(isStringOrFalse, (value) =>
    isOff(value) ? undefined : checkCron(value),
  ),
  timezone: checked(isString, checkTimezone),
  health: z.strictObject({
    listen: checked(isStringOrFalse, (value) => {
      if (isOff(value)) return undefined;
      const parsed = parseListenAddress(value);
      return 'problem' in parsed ? parsed.problem : undefined;
    }),
    max_age_seconds: integer(1, 31536000),
  }),
};

export function daemonConfig(values: SectionValues<typeof daemonFields>): DaemonConfig {
  const listen = values.health.listen;
  let listenAddress: ListenAddress | null = null;
  if (!isOff(listen)) {
    const parsed = parseListenAddress(listen);
    if ('problem' in parsed) throw new Error('toConfig called with an unvalidated health.listen');
    listenAddress = parsed;
  }
  const fullRefresh = values.full_refresh_schedule;
  return {
    schedule: values.schedule,
    fullRefreshSchedule: isOff(fullRefresh) ? null : fullRefresh,
    timezone: values.timezone,
    health: { listen: listenAddress, maxAgeSeconds: values.health.max_age_seconds },
  };
}
