/** The server and how to reach it: `base_url`, `api_key`, `auth_scheme`, `allow_insecure_http`. */
import {
  checked,
  isString,
  nonEmptyText,
  z,
  type SectionValues,
  type SettingInfo,
} from './setting.js';

export type AuthScheme = 'api-key' | 'bearer';
export const AUTH_SCHEMES = ['api-key', 'bearer'] as const satisfies readonly AuthScheme[];

export interface ServerConfig {
  /** Server root without a trailing slash; undefined only for commands that do not need it. */
  baseUrl: string | undefined;
  /** Never log it; `describeConfigForLog` shows "set" / "not set". */
  apiKey: string | undefined;
  authScheme: AuthScheme;
  allowInsecureHttp: boolean;
}

export interface ServerFileValues {
  base_url?: string;
  api_key?: string;
  auth_scheme?: AuthScheme;
  allow_insecure_http?: boolean;
}

export const serverDefaults = {
  auth_scheme: 'api-key' as AuthScheme,
  allow_insecure_http: false,
} satisfies ServerFileValues;

export const SERVER_SETTINGS: readonly SettingInfo[] = [
  {
    path: 'base_url',
    env: 'OCS_BASE_URL',
    kind: 'text',
    url: true,
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
];

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

export const serverFields = {
  base_url: checked(isString, checkBaseUrl).optional(),
  api_key: nonEmptyText.optional(),
  auth_scheme: z.enum(AUTH_SCHEMES),
  allow_insecure_http: z.boolean(),
};

export function serverConfig(values: SectionValues<typeof serverFields>): ServerConfig {
  return {
    baseUrl: values.base_url === undefined ? undefined : values.base_url.trim().replace(/\/+$/, ''),
    apiKey: values.api_key?.trim(),
    authScheme: values.auth_scheme,
    allowInsecureHttp: values.allow_insecure_http,
  };
}
