/** The HTTP client: `http.*` (timeouts, retries, a cap on requests, the User-Agent, page size cap). */
import { checked, integer, isString, z, type SectionValues, type SettingInfo } from './setting.js';

export interface HttpConfig {
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
}

export interface HttpFileValues {
  http?: {
    request_timeout_seconds?: number;
    max_attempts?: number;
    min_retry_delay_ms?: number;
    max_retry_delay_seconds?: number;
    max_requests_per_minute?: number;
    user_agent?: string;
    max_page_mib?: number;
  };
}

/** `version` goes into the User-Agent. */
export function httpDefaults(version: string) {
  return {
    http: {
      request_timeout_seconds: 60,
      max_attempts: 6,
      min_retry_delay_ms: 500,
      max_retry_delay_seconds: 60,
      max_requests_per_minute: 0,
      user_agent: `ocs-sync/${version}`,
      max_page_mib: 64,
    },
  } satisfies HttpFileValues;
}

export const HTTP_SETTINGS: readonly SettingInfo[] = [
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
];

function checkUserAgent(value: string): string | undefined {
  if (value.length < 1 || value.length > 200 || !/^[\x20-\x7e]+$/.test(value)) {
    return 'must be printable ASCII text of 1 to 200 characters (no line breaks)';
  }
  return undefined;
}

export const httpFields = {
  http: z.strictObject({
    request_timeout_seconds: integer(1, 3600),
    max_attempts: integer(1, 20),
    min_retry_delay_ms: integer(0, 600000),
    max_retry_delay_seconds: integer(1, 3600),
    max_requests_per_minute: integer(0, 100000),
    user_agent: checked(isString, checkUserAgent),
    max_page_mib: integer(1, 512),
  }),
};

export function httpConfig(values: SectionValues<typeof httpFields>): HttpConfig {
  return {
    http: {
      requestTimeoutSeconds: values.http.request_timeout_seconds,
      maxAttempts: values.http.max_attempts,
      minRetryDelayMs: values.http.min_retry_delay_ms,
      maxRetryDelaySeconds: values.http.max_retry_delay_seconds,
      maxRequestsPerMinute: values.http.max_requests_per_minute,
      userAgent: values.http.user_agent,
      maxPageMib: values.http.max_page_mib,
    },
  };
}
