/**
 * Metrics of a run that exits: `metrics.*` (the Prometheus Pushgateway each run pushes to, the
 * node_exporter textfile each run writes, the `team` label of a configuration of one team, how
 * long a push may take).
 */
import { TEAM_NAME_RULE, isTeamName } from './teams.js';
import { checked, integer, isString, z, type SectionValues, type SettingInfo } from './setting.js';

export interface MetricsConfig {
  metrics: {
    /** The Pushgateway each run's metrics are pushed to (PUT, group job="ocs-sync", team). */
    pushUrl: string | undefined;
    /** The file each run's metrics are written to, for node_exporter's textfile collector. */
    textfile: string | undefined;
    /** The `team` label of a configuration without teams: (a fleet's team: its name). */
    team: string | undefined;
    /** How long a push, or writing the textfile, may take, in seconds. */
    pushTimeoutSeconds: number;
  };
}

export interface MetricsFileValues {
  metrics?: {
    push_url?: string;
    textfile?: string;
    team?: string;
    push_timeout_seconds?: number;
  };
}

export const metricsDefaults = {
  metrics: { push_timeout_seconds: 5 },
} satisfies MetricsFileValues;

export const METRICS_SETTINGS: readonly SettingInfo[] = [
  {
    path: 'metrics.push_url',
    env: 'OCS_METRICS_PUSH_URL',
    kind: 'text',
    url: true,
    allowed:
      'the http:// or https:// URL of a Prometheus Pushgateway, e.g. http://pushgateway:9091',
  },
  {
    path: 'metrics.textfile',
    env: 'OCS_METRICS_TEXTFILE',
    kind: 'text',
    allowed:
      "the path of a .prom file in node_exporter's textfile collector folder, e.g. /var/lib/node_exporter/textfile/ocs-sync.prom",
  },
  {
    path: 'metrics.team',
    env: 'OCS_METRICS_TEAM',
    kind: 'text',
    allowed: TEAM_NAME_RULE,
  },
  {
    path: 'metrics.push_timeout_seconds',
    kind: 'integer',
    allowed: 'an integer from 1 to 60',
  },
];

function checkPushUrl(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    return 'is not a URL; write it like http://pushgateway:9091';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `must use http:// or https://, not ${url.protocol}//`;
  }
  if (url.search !== '' || url.hash !== '') {
    return "must not have a ?query or #fragment: give the Pushgateway's root URL, e.g. http://pushgateway:9091";
  }
  if (/\/metrics(\/|$)/.test(url.pathname)) {
    return "must be the Pushgateway's root URL, without /metrics/job/…: ocs-sync adds the group (job and team) itself";
  }
  return undefined;
}

function checkTextfile(value: string): string | undefined {
  if (value.trim() === '') return 'must not be empty';
  if (!value.trim().endsWith('.prom')) {
    return "must end with .prom: node_exporter's textfile collector reads only *.prom files";
  }
  return undefined;
}

export const metricsFields = {
  metrics: z.strictObject({
    push_url: checked(isString, checkPushUrl).optional(),
    textfile: checked(isString, checkTextfile).optional(),
    team: checked(isString, (value) =>
      isTeamName(value.trim()) ? undefined : `must be ${TEAM_NAME_RULE}`,
    ).optional(),
    push_timeout_seconds: integer(1, 60),
  }),
};

export function metricsConfig(values: SectionValues<typeof metricsFields>): MetricsConfig {
  return {
    metrics: {
      pushUrl: values.metrics.push_url?.trim().replace(/\/+$/, ''),
      textfile: values.metrics.textfile?.trim(),
      team: values.metrics.team?.trim(),
      pushTimeoutSeconds: values.metrics.push_timeout_seconds,
    },
  };
}
