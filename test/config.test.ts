import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  describeConfigForLog,
  loadConfig,
  parseConfigText,
  readConfigFile,
  resolveConfig,
  type ConfigInputs,
} from '../src/config/load.js';
import { configSchema, SETTINGS, type Config, type ConfigFlags } from '../src/config/schema.js';
import { secretPolicyFor } from '../src/config/secrets.js';
import { historyFor, selectResources } from '../src/config/sync.js';
import { parseWarehouseUrl, redactUrl } from '../src/warehouse/url.js';
import { ConfigError } from '../src/errors.js';
import { packageVersion } from '../src/package-info.js';
import { threadPlanOf } from '../src/cli/wiring.js';

const SERVER = { server: true };
const LOCAL = { server: false };
const SERVER_ENV = { OCS_BASE_URL: 'https://chat.example.org', OCS_API_KEY: 'key-for-tests-0001' };

const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-config-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));
let fileCounter = 0;
function writeConfig(text: string): string {
  const path = join(directory, `config-${++fileCounter}.yaml`);
  writeFileSync(path, text);
  return path;
}

/** The problems of the ConfigError that `run` throws (fails the test if it does not throw one). */
function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError, but the configuration was accepted');
}

function resolve(inputs: Partial<ConfigInputs>, needs = LOCAL): Config {
  return resolveConfig({ env: {}, ...inputs }, needs);
}

/** A file's text through the real YAML reader, then resolved. */
function resolveYaml(text: string, env: Record<string, string> = {}, needs = LOCAL): Config {
  const path = writeConfig(text);
  return loadConfig({ configPath: path, env, needs });
}

describe('defaults and sources', () => {
  it('has every documented default without any file, environment or flag', () => {
    const config = resolve({});
    expect(config).toMatchObject({
      baseUrl: undefined,
      apiKey: undefined,
      authScheme: 'api-key',
      allowInsecureHttp: false,
      warehouse: {
        url: './ocs-sync.db',
        target: { dialect: 'sqlite', path: './ocs-sync.db' },
        schema: 'ocs',
        poolSize: 4,
        statementTimeoutSeconds: 300,
      },
      pageSize: 1000,
      resources: undefined,
      excludeResources: [],
      concurrency: 1,
      pagesInFlight: 2,
      http: {
        requestTimeoutSeconds: 60,
        maxAttempts: 6,
        minRetryDelayMs: 500,
        maxRetryDelaySeconds: 60,
        maxRequestsPerMinute: 0,
      },
      logLevel: 'info',
      secrets: { default: 'plaintext', resources: {}, archivePublicKey: undefined },
      onSchemaChange: 'evolve',
      lock: { waitSeconds: 60, staleAfterSeconds: 600 },
      deletes: 'mark',
      history: false,
      schedule: '*/15 * * * *',
      fullRefreshSchedule: '0 3 * * 0',
      timezone: 'UTC',
      health: { listen: { host: '127.0.0.1', port: 9464 }, maxAgeSeconds: 3600 },
    });
    const version = (
      JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
        version: string;
      }
    ).version;
    expect(packageVersion()).toBe(version);
    expect(config.http.userAgent).toBe(`ocs-sync/${version}`);
  });

  it('runs `sync` from environment variables alone, with no config file', () => {
    const config = loadConfig({
      env: {
        OCS_BASE_URL: 'https://chat.example.org/',
        OCS_API_KEY: 'key-from-env-1234',
        OCS_WAREHOUSE_URL: 'postgres://sync:pw@db.internal:5432/analytics',
        OCS_WAREHOUSE_SCHEMA: 'ocs_export',
        OCS_PAGE_SIZE: '500',
        OCS_CONCURRENCY: '3',
        OCS_MAX_REQUESTS_PER_MINUTE: '300',
        OCS_AUTH_SCHEME: 'bearer',
        OCS_LOG_LEVEL: 'debug',
        OCS_SCHEDULE: '0 * * * *',
        OCS_FULL_REFRESH_SCHEDULE: 'off',
        OCS_TIMEZONE: 'Europe/Berlin',
        OCS_HEALTH_LISTEN: '0.0.0.0:9100',
        OCS_SECRETS_DEFAULT: 'sealed',
        OCS_DELETES: 'remove',
        OCS_ON_SCHEMA_CHANGE: 'stop',
        OCS_HISTORY: 'chat_messages',
        OCS_FILES_DIR: '/var/lib/ocs-sync/files',
        PATH: '/usr/bin',
      },
      needs: SERVER,
    });
    expect(config.baseUrl).toBe('https://chat.example.org');
    expect(config.apiKey).toBe('key-from-env-1234');
    expect(config.authScheme).toBe('bearer');
    expect(config.warehouse.target).toEqual({
      dialect: 'postgres',
      connectionString: 'postgres://sync:pw@db.internal:5432/analytics',
    });
    expect(config.warehouse.schema).toBe('ocs_export');
    expect(config.pageSize).toBe(500);
    expect(config.concurrency).toBe(3);
    expect(config.http.maxRequestsPerMinute).toBe(300);
    expect(config.logLevel).toBe('debug');
    expect(config.schedule).toBe('0 * * * *');
    expect(config.fullRefreshSchedule).toBeNull();
    expect(config.timezone).toBe('Europe/Berlin');
    expect(config.health.listen).toEqual({ host: '0.0.0.0', port: 9100 });
    expect(config.secrets.default).toBe('sealed');
    expect(config.deletes).toBe('remove');
    expect(config.onSchemaChange).toBe('stop');
    expect(config.history).toEqual(['chat_messages']);
  });

  it('reads the file named by OCS_CONFIG when --config is not given', () => {
    const path = writeConfig('page_size: 42\n');
    expect(loadConfig({ env: { OCS_CONFIG: path }, needs: LOCAL }).pageSize).toBe(42);
    expect(
      loadConfig({
        configPath: writeConfig('page_size: 7\n'),
        env: { OCS_CONFIG: path },
        needs: LOCAL,
      }).pageSize,
    ).toBe(7);
  });

  it('layers defaults < file < environment < flags, merging sections key by key', () => {
    const file = {
      page_size: 100,
      warehouse: { schema: 'from_file', pool_size: 9 },
      http: { max_attempts: 3, user_agent: 'file-agent' },
      log_level: 'warn',
    };
    const env = { OCS_PAGE_SIZE: '200', OCS_WAREHOUSE_SCHEMA: 'from_env', OCS_LOG_LEVEL: 'error' };
    const flags: ConfigFlags = { pageSize: 300, http: { maxAttempts: 4 } };

    const fileOnly = resolve({ file });
    expect(fileOnly.pageSize).toBe(100);
    expect(fileOnly.warehouse.schema).toBe('from_file');

    const fileAndEnv = resolve({ file, env });
    expect(fileAndEnv.pageSize).toBe(200);
    expect(fileAndEnv.warehouse.schema).toBe('from_env');
    expect(fileAndEnv.warehouse.poolSize).toBe(9); // the file's sibling key survives
    expect(fileAndEnv.warehouse.url).toBe('./ocs-sync.db'); // and so does the default
    expect(fileAndEnv.logLevel).toBe('error');

    const all = resolve({ file, env, flags });
    expect(all.pageSize).toBe(300);
    expect(all.http.maxAttempts).toBe(4);
    expect(all.http.userAgent).toBe('file-agent');
    expect(all.warehouse.schema).toBe('from_env');
    expect(all.logLevel).toBe('error');
  });

  it('converts flags given as text, as a CLI parser hands them over', () => {
    const config = resolve({
      flags: {
        pageSize: '250',
        allowInsecureHttp: 'true',
        resources: 'a,b',
      } as unknown as ConfigFlags,
    });
    expect(config.pageSize).toBe(250);
    expect(config.allowInsecureHttp).toBe(true);
    expect(config.resources).toEqual(['a', 'b']);
  });

  it('treats empty environment variables and empty file keys as unset', () => {
    const config = resolve({
      file: { page_size: null, warehouse: { url: null } },
      env: { OCS_PAGE_SIZE: '  ' },
    });
    expect(config.pageSize).toBe(1000);
    expect(config.warehouse.url).toBe('./ocs-sync.db');
    expect(resolve({ env: { OCS_BASE_URL: '' } }).baseUrl).toBeUndefined();
  });

  it('requires base_url and api_key only for commands that talk to the server', () => {
    const problems = problemsOf(() => resolve({}, SERVER));
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^base_url is required.*OCS_BASE_URL/);
    expect(problems[1]).toMatch(/^api_key is required.*OCS_API_KEY/);
    expect(() => resolve({}, LOCAL)).not.toThrow();
    expect(resolve({ env: SERVER_ENV }, SERVER).apiKey).toBe(SERVER_ENV.OCS_API_KEY);
  });
});

describe('every problem at once', () => {
  it('reports all four bad keys of a file in one error, each with its file, line and what is allowed', () => {
    const path = writeConfig(
      [
        'page_size: 5000',
        'htpp:',
        '  max_attempts: 3',
        'log_level: loud',
        "schedule: '61 * * * *'",
        'warehouse:',
        '  url: ./fine.db',
      ].join('\n'),
    );
    const problems = problemsOf(() => loadConfig({ configPath: path, env: {}, needs: LOCAL }));
    expect(problems).toHaveLength(4);
    // In the order of the file's lines.
    expect(problems.map((problem) => problem.slice(path.length).split(':')[1])).toEqual([
      '1',
      '2',
      '4',
      '5',
    ]);
    const text = problems.join('\n');
    expect(text).toContain(`${path}:1: page_size must be an integer from 1 to 1000; got 5000`);
    expect(text).toContain(`${path}:2: htpp is not a known key; did you mean "http"?`);
    expect(text).toMatch(
      new RegExp(
        `${escape(path)}:4: log_level must be trace, debug, info, warn, error, fatal, silent; got "loud"`,
      ),
    );
    expect(text).toMatch(
      new RegExp(`${escape(path)}:5: schedule is not a valid cron expression \\(.*61.*\\)`),
    );
    // The error's message lists them too, for whoever prints it.
    try {
      loadConfig({ configPath: path, env: {}, needs: LOCAL });
    } catch (error) {
      expect((error as Error).message).toMatch(/^Configuration has 4 problems:/);
    }
  });

  it('adds environment, flag and cross-key problems to the same error', () => {
    const problems = problemsOf(() =>
      resolve(
        {
          file: { resources: ['chat_messages'], exclude_resources: ['chat_messages'] },
          env: { OCS_CONCURRENCY: '9', OCS_PAGE_SIZE: 'lots' },
          flags: { http: { maxAttempts: 0 } },
        },
        SERVER,
      ),
    );
    const text = problems.join('\n');
    expect(text).toContain('OCS_CONCURRENCY (concurrency) must be an integer from 1 to 8; got 9');
    expect(text).toContain(
      'OCS_PAGE_SIZE (page_size) must be an integer from 1 to 1000; got "lots"',
    );
    expect(text).toContain(
      'http.max_attempts (command-line flag) must be an integer from 1 to 20; got 0',
    );
    expect(text).toContain('exclude_resources names "chat_messages", which resources also lists');
    expect(text).toContain('base_url is required');
    expect(text).toContain('api_key is required');
    expect(problems).toHaveLength(6);
  });

  it('names environment variables when their text is not a number', () => {
    const problems = problemsOf(() =>
      resolve({ env: { OCS_MAX_REQUESTS_PER_MINUTE: '1.5', OCS_CONCURRENCY: 'two' } }),
    );
    expect(problems).toEqual([
      'OCS_CONCURRENCY (concurrency) must be an integer from 1 to 8; got "two"',
      'OCS_MAX_REQUESTS_PER_MINUTE (http.max_requests_per_minute) must be an integer from 0 (no cap) to 100000; got 1.5',
    ]);
  });

  it('suggests the right key for unknown ones, or lists what is allowed', () => {
    const problems = problemsOf(() =>
      resolve({
        file: {
          pageSize: 10,
          url: 'x.db',
          http: { max_attempt: 3 },
          warehouse: { zzz: 1 },
          fnord: true,
        },
        filePath: 'ocs.yaml',
        fileLines: { pageSize: 1, url: 2, 'http.max_attempt': 4 },
      }),
    );
    expect(problems).toContain(
      'ocs.yaml:1: pageSize is not a known key; did you mean "page_size"? (keys are snake_case)',
    );
    expect(problems).toContain(
      'ocs.yaml:2: url is not a known key; did you mean warehouse.url? (it belongs there)',
    );
    expect(problems).toContain(
      'ocs.yaml:4: http.max_attempt is not a known key; did you mean "max_attempts"?',
    );
    expect(problems).toContain(
      'ocs.yaml: warehouse.zzz is not a known key; allowed under warehouse: url, schema, pool_size, statement_timeout_seconds',
    );
    const fnord = problems.find((problem) => problem.includes('fnord'));
    expect(fnord).toMatch(/fnord is not a known key; allowed: base_url, api_key, .*log_level/);
    expect(fnord).not.toContain('private_key_passphrase');
  });

  it('flags an OCS_ variable that is a near miss of an unset one', () => {
    const problems = problemsOf(() =>
      resolve({ env: { OCS_BASEURL: 'https://x.org', OCS_PAGESIZE: '10' } }),
    );
    expect(problems).toEqual([
      'OCS_BASEURL is not a variable ocs-sync reads; did you mean OCS_BASE_URL? (the value is not shown)',
      'OCS_PAGESIZE is not a variable ocs-sync reads; did you mean OCS_PAGE_SIZE? (the value is not shown)',
    ]);
    // Unrelated OCS_ variables, and near misses of variables that are set, are left alone.
    expect(() =>
      resolve({ env: { OCS_SOMETHING_ELSE: '1', OCS_PAGE_SIZE: '5', OCS_PAGE_SIZ: '6' } }),
    ).not.toThrow();
  });

  it('rejects a file that is not a mapping', () => {
    expect(problemsOf(() => resolve({ file: ['a'], filePath: 'x.yaml' }))).toEqual([
      'x.yaml: must be a mapping of keys (such as base_url: …, warehouse: …), not a list',
    ]);
    expect(problemsOf(() => resolve({ file: { http: 5 } }))[0]).toMatch(
      /^config file: http must be a mapping with keys request_timeout_seconds, .*; got 5$/,
    );
  });
});

describe('base_url and plain http', () => {
  it('trims trailing slashes and keeps a path prefix', () => {
    expect(resolve({ env: { OCS_BASE_URL: 'https://x.org/ocs//' } }).baseUrl).toBe(
      'https://x.org/ocs',
    );
  });

  it('refuses to send the API key over http:// to a host that is not loopback', () => {
    const problems = problemsOf(() =>
      resolve({ env: { ...SERVER_ENV, OCS_BASE_URL: 'http://chat.internal:8000' } }, SERVER),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^OCS_BASE_URL \(base_url\) uses plain http:\/\/ to chat\.internal, which is not a loopback address.*allow_insecure_http: true \(OCS_ALLOW_INSECURE_HTTP=true\)/,
    );
    // Also for a private address: "internal" is not "loopback".
    expect(() =>
      resolve({ env: { ...SERVER_ENV, OCS_BASE_URL: 'http://10.0.0.5' } }, SERVER),
    ).toThrow(ConfigError);
  });

  it.each([
    'http://127.0.0.1:8000',
    'http://127.8.9.10',
    'http://localhost:8000/',
    'http://LOCALHOST',
    'http://[::1]:8000',
  ])('allows http:// to loopback %s', (url) => {
    expect(resolve({ env: { ...SERVER_ENV, OCS_BASE_URL: url } }, SERVER).baseUrl).toBe(
      url.replace(/\/$/, ''),
    );
  });

  it('allows plain http anywhere when allow_insecure_http is true', () => {
    const env = { ...SERVER_ENV, OCS_BASE_URL: 'http://chat.internal' };
    expect(resolve({ env, file: { allow_insecure_http: true } }, SERVER).allowInsecureHttp).toBe(
      true,
    );
    expect(() =>
      resolve({ env: { ...env, OCS_ALLOW_INSECURE_HTTP: 'true' } }, SERVER),
    ).not.toThrow();
    expect(() => resolve({ env, flags: { allowInsecureHttp: true } }, SERVER)).not.toThrow();
  });

  it('does not object to http:// when no key will be sent', () => {
    expect(resolve({ env: { OCS_BASE_URL: 'http://chat.internal' } }, LOCAL).baseUrl).toBe(
      'http://chat.internal',
    );
  });

  it.each([
    ['ftp://x.org', /must use http:\/\/ or https:\/\/, not ftp:/],
    ['chat.example.org', /is not a URL/],
    ['https://user:pw@x.org', /must not contain a user name or password/],
    ['https://x.org/?team=1', /must not contain a \?query/],
    ['https://x.org/api/export/', /without \/api\/export/],
  ])('rejects base_url %s', (url, message) => {
    const problems = problemsOf(() => resolve({ file: { base_url: url } }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^config file: base_url /);
    expect(problems[0]).toMatch(message);
  });
});

describe('warehouse URL', () => {
  it.each([
    ['./ocs-sync.db', { dialect: 'sqlite', path: './ocs-sync.db' }],
    ['/var/lib/ocs/ocs.db', { dialect: 'sqlite', path: '/var/lib/ocs/ocs.db' }],
    ['C:\\data\\ocs.db', { dialect: 'sqlite', path: 'C:\\data\\ocs.db' }],
    [':memory:', { dialect: 'sqlite', path: ':memory:' }],
    ['sqlite::memory:', { dialect: 'sqlite', path: ':memory:' }],
    ['sqlite:data/ocs.db', { dialect: 'sqlite', path: 'data/ocs.db' }],
    ['sqlite:///abs/ocs.db', { dialect: 'sqlite', path: '/abs/ocs.db' }],
    ['file:///abs/ocs.db', { dialect: 'sqlite', path: '/abs/ocs.db' }],
    [
      'postgres://u:p%40ss@db:5432/warehouse?sslmode=require',
      {
        dialect: 'postgres',
        connectionString: 'postgres://u:p%40ss@db:5432/warehouse?sslmode=require',
      },
    ],
    [
      'postgresql://db/warehouse',
      { dialect: 'postgres', connectionString: 'postgresql://db/warehouse' },
    ],
  ])('parses %s', (url, expected) => {
    expect(parseWarehouseUrl(url)).toEqual(expected);
  });

  it.each([
    ['mysql://u:hunter22@db/x', /scheme "mysql:", which ocs-sync does not support/],
    ['postgres:db', /must be written postgres:\/\//],
    ['sqlite:', /sqlite: needs a path/],
    ['', /must not be empty/],
    ['host=db dbname=x password=hunter22', /libpq key=value string/],
    ['postgres://u:hunter22@db:99999/x', /is not a valid PostgreSQL URL/],
  ])('rejects %s with a clear problem', (url, message) => {
    let error: unknown;
    try {
      parseWarehouseUrl(url);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problem = (error as ConfigError).problems[0]!;
    expect(problem).toMatch(/^warehouse\.url /);
    expect(problem).toMatch(message);
    expect(problem).not.toContain('hunter22');
  });

  it('names the variable when OCS_WAREHOUSE_URL is bad, without the password', () => {
    const problems = problemsOf(() =>
      resolve({ env: { OCS_WAREHOUSE_URL: 'mysql://me:hunter22@db/x' } }),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^OCS_WAREHOUSE_URL \(warehouse\.url\) uses the scheme "mysql:"/);
    expect(problems[0]).not.toContain('hunter22');
  });

  it('redacts passwords in URLs and leaves paths alone', () => {
    expect(redactUrl('postgres://me:hunter22@db:5432/x')).toBe('postgres://me:***@db:5432/x');
    expect(redactUrl('postgres://db/x?password=hunter22&sslmode=require')).toBe(
      'postgres://db/x?password=***&sslmode=require',
    );
    expect(redactUrl('postgres://me@db/x')).toBe('postgres://me@db/x');
    expect(redactUrl('postgres://me:hunter22@db:99999/x')).toBe('postgres://me:***@db:99999/x');
    expect(redactUrl('./ocs.db')).toBe('./ocs.db');
    expect(redactUrl('sqlite:x.db')).toBe('sqlite:x.db');
  });

  it('checks the PostgreSQL schema name', () => {
    const problems = problemsOf(() =>
      resolve({
        file: { warehouse: { schema: 'Bad-Name' } },
        env: { OCS_WAREHOUSE_SCHEMA: 'pg_mine' },
      }),
    );
    expect(problems).toEqual([
      'OCS_WAREHOUSE_SCHEMA (warehouse.schema) must not start with pg_ (PostgreSQL reserves it)',
    ]);
    expect(problemsOf(() => resolve({ file: { warehouse: { schema: 'Bad-Name' } } }))[0]).toContain(
      'warehouse.schema must match ^[a-z_][a-z0-9_]{0,62}$',
    );
  });
});

describe('secrets never appear in problems', () => {
  const apiKey = 'sk-live-9f8e7d6c5b4a';
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const pemBody = privateKey.split('\n')[1]!;

  function expectClean(problems: string[], ...secrets: string[]) {
    const text = problems.join('\n');
    for (const secret of secrets) expect(text).not.toContain(secret);
  }

  it('not the API key when the URL is refused', () => {
    const problems = problemsOf(() =>
      resolve({ env: { OCS_API_KEY: apiKey, OCS_BASE_URL: 'http://remote.example.org' } }, SERVER),
    );
    expect(problems).toHaveLength(1);
    expectClean(problems, apiKey);
  });

  it('not the API key or private key when they are malformed', () => {
    const problems = problemsOf(() =>
      resolve({
        file: { api_key: ['in', apiKey], private_key: `not a pem ${apiKey}-xyz` },
      }),
    );
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^config file: api_key must be text .*\(the value is not shown\)$/);
    expect(problems[1]).toMatch(/^config file: private_key must be a PEM private key/);
    expectClean(problems, apiKey, 'not a pem');
  });

  it('not the API key even when it was pasted under another key', () => {
    const problems = problemsOf(() =>
      resolve({ file: { auth_scheme: apiKey }, env: { OCS_API_KEY: apiKey } }),
    );
    expect(problems).toEqual([
      'config file: auth_scheme must be api-key (header X-Api-Key) or bearer (header Authorization: Bearer); got "[redacted]"',
    ]);
  });

  it('not a public key given as the private key', () => {
    const problems = problemsOf(() => resolve({ env: { OCS_PRIVATE_KEY: publicKey } }));
    expect(problems[0]).toMatch(/^OCS_PRIVATE_KEY \(private_key\) holds a public key/);
    expectClean(problems, publicKey.split('\n')[1]!);
  });

  it('accepts a PEM with written-out \\n from the environment, and a passphrase', () => {
    const config = resolve({
      env: {
        OCS_PRIVATE_KEY: privateKey.replace(/\n/g, '\\n'),
        OCS_PRIVATE_KEY_PASSPHRASE: 'pass phrase',
      },
    });
    expect(config.privateKey).toBe(privateKey);
    expect(config.privateKeyPassphrase).toBe('pass phrase');
  });

  it('not the passphrase when a file holds it, nor values of unknown keys or variables', () => {
    const problems = problemsOf(() =>
      resolve({
        file: {
          private_key_passphrase: 'hunter2-passphrase',
          api_keys: apiKey,
          private_key: privateKey,
        },
        env: { OCS_API_KEYS: `${apiKey}-other`, OCS_PRIVATE_KEY_FILE: '/keys/a.pem' },
      }),
    );
    const text = problems.join('\n');
    expect(text).toContain(
      'private_key_passphrase may only come from the environment (OCS_PRIVATE_KEY_PASSPHRASE)',
    );
    expect(text).toContain('api_keys is not a known key; did you mean "api_key"?');
    expect(text).toContain(
      'OCS_API_KEYS is not a variable ocs-sync reads; did you mean OCS_API_KEY?',
    );
    expect(text).toContain('private_key and OCS_PRIVATE_KEY_FILE (private_key_file) are both set');
    expectClean(problems, apiKey, 'hunter2-passphrase', pemBody);
  });

  it('not a secret quoted on a line with a YAML syntax error', () => {
    const path = writeConfig(`page_size: 10\napi_key: "${apiKey}\n`);
    const problems = problemsOf(() => readConfigFile(path));
    expect(problems[0]).toMatch(new RegExp(`^${escape(path)}:\\d+: YAML syntax error: `));
    expectClean(problems, apiKey);
  });

  it('not any secret in the log summary', () => {
    const config = resolve(
      {
        env: {
          ...SERVER_ENV,
          OCS_API_KEY: apiKey,
          OCS_PRIVATE_KEY: privateKey,
          OCS_PRIVATE_KEY_PASSPHRASE: 'hunter2-passphrase',
          OCS_WAREHOUSE_URL: 'postgres://me:hunter22@db/x',
          OCS_FILES_DIR: '/var/lib/ocs-sync/files',
        },
      },
      SERVER,
    );
    const summary = describeConfigForLog(config);
    const text = JSON.stringify(summary);
    expectClean([text], apiKey, pemBody, 'hunter2-passphrase', 'hunter22');
    expect(summary).toMatchObject({
      apiKey: 'set',
      privateKey: 'set',
      privateKeyPassphrase: 'set',
      warehouse: { dialect: 'postgres', url: 'postgres://me:***@db/x', schema: 'ocs' },
      baseUrl: 'https://chat.example.org',
    });
    expect(describeConfigForLog(resolve({}))).toMatchObject({
      apiKey: 'not set',
      privateKey: 'not set',
      warehouse: { dialect: 'sqlite', url: './ocs-sync.db' },
      health: { listen: '127.0.0.1:9464' },
    });
  });

  it('rejects the passphrase as a command-line flag', () => {
    const problems = problemsOf(() =>
      resolve({ flags: { privateKeyPassphrase: 'hunter2-passphrase' } as unknown as ConfigFlags }),
    );
    expect(problems).toEqual([
      'private_key_passphrase may only come from the environment (OCS_PRIVATE_KEY_PASSPHRASE); it is not accepted as a command-line flag',
    ]);
  });
});

describe('schedules, time zone, health', () => {
  it('rejects a bad cron expression, naming the field at fault', () => {
    const problems = problemsOf(() =>
      resolve({ env: { OCS_SCHEDULE: '*/15 * * *', OCS_FULL_REFRESH_SCHEDULE: '0 25 * * *' } }),
    );
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(
      /^OCS_SCHEDULE \(schedule\) is not a valid cron expression \(expected 5 or 6 fields but got 4\)/,
    );
    expect(problems[1]).toMatch(
      /^OCS_FULL_REFRESH_SCHEDULE \(full_refresh_schedule\) is not a valid cron expression \(.*25.*\)/,
    );
  });

  it('turns the full refresh off with off, in YAML as text or false', () => {
    expect(resolveYaml('full_refresh_schedule: off\n').fullRefreshSchedule).toBeNull();
    expect(resolveYaml('full_refresh_schedule: false\n').fullRefreshSchedule).toBeNull();
    expect(resolveYaml("full_refresh_schedule: '30 2 * * *'\n").fullRefreshSchedule).toBe(
      '30 2 * * *',
    );
  });

  it('takes page_threads as auto (the default), true or false; a fleet of several at once turns auto off', () => {
    expect(resolveYaml('page_size: 10\n').pageThreads).toBe('auto');
    expect(resolveYaml('page_threads: false\n').pageThreads).toBe(false);
    expect(resolveYaml('page_threads: true\n').pageThreads).toBe(true);
    const path = writeConfig('page_threads: sometimes\n');
    expect(problemsOf(() => loadConfig({ configPath: path, env: {}, needs: LOCAL }))).toEqual([
      `${path}:1: page_threads must be auto, true or false; got "sometimes"`,
    ]);
    const auto = resolveYaml('page_size: 10\n');
    expect(threadPlanOf(auto, 1)).toEqual({ pageThread: true, writerThread: true });
    expect(threadPlanOf(auto, 2)).toEqual({ pageThread: false, writerThread: false });
    expect(threadPlanOf(resolveYaml('page_threads: true\n'), 4).pageThread).toBe(true);
  });

  it('explains that a cron expression starting with * must be quoted in YAML', () => {
    const path = writeConfig('page_size: 10\nschedule: */5 * * * *\n');
    const problems = problemsOf(() => readConfigFile(path));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      new RegExp(`^${escape(path)}:2: YAML syntax error: .*must be quoted`),
    );
  });

  it('rejects an unknown time zone and accepts IANA ones', () => {
    const problems = problemsOf(() => resolve({ file: { timezone: 'Mars/Olympus_Mons' } }));
    expect(problems).toEqual([
      'config file: timezone is not a time zone this Node.js knows; use an IANA name such as UTC, Europe/Berlin or America/New_York',
    ]);
    expect(resolve({ env: { OCS_TIMEZONE: 'America/New_York' } }).timezone).toBe(
      'America/New_York',
    );
  });

  it('parses the health listener, or off', () => {
    expect(resolve({ env: { OCS_HEALTH_LISTEN: 'off' } }).health.listen).toBeNull();
    expect(resolve({ env: { OCS_HEALTH_LISTEN: '[::1]:9000' } }).health.listen).toEqual({
      host: '::1',
      port: 9000,
    });
    expect(
      describeConfigForLog(resolve({ env: { OCS_HEALTH_LISTEN: '[::1]:9000' } })),
    ).toMatchObject({
      health: { listen: '[::1]:9000' },
    });
    const problems = problemsOf(() => resolve({ env: { OCS_HEALTH_LISTEN: '9464' } }));
    expect(problems[0]).toMatch(/^OCS_HEALTH_LISTEN \(health\.listen\) must be HOST:PORT/);
    expect(problemsOf(() => resolve({ file: { health: { listen: 'h:70000' } } }))[0]).toContain(
      'has a port above 65535',
    );
  });
});

describe('metrics of a run that exits', () => {
  it('are off by default, and read the Pushgateway, the textfile and the team label', () => {
    expect(resolve({}).metrics).toEqual({
      pushUrl: undefined,
      textfile: undefined,
      team: undefined,
      pushTimeoutSeconds: 5,
    });
    expect(
      resolve({
        env: {
          OCS_METRICS_PUSH_URL: 'https://ocs:pw@push.example.org/gateway/',
          OCS_METRICS_TEXTFILE: '/var/lib/node_exporter/textfile/ocs-sync.prom',
          OCS_METRICS_TEAM: 'kenya',
        },
        file: { metrics: { push_timeout_seconds: 10 } },
      }).metrics,
    ).toEqual({
      pushUrl: 'https://ocs:pw@push.example.org/gateway',
      textfile: '/var/lib/node_exporter/textfile/ocs-sync.prom',
      team: 'kenya',
      pushTimeoutSeconds: 10,
    });
  });

  it('say what is wrong with each, never showing a password', () => {
    const problems = problemsOf(() =>
      resolve({
        env: {
          OCS_METRICS_PUSH_URL: 'ftp://u:s3cret@gateway',
          OCS_METRICS_TEXTFILE: '/var/lib/node_exporter/ocs-sync.txt',
          OCS_METRICS_TEAM: 'Kenya Team',
        },
        file: { metrics: { push_timeout_seconds: 0 } },
      }),
    );
    expect(problems).toEqual([
      'config file: metrics.push_timeout_seconds must be an integer from 1 to 60; got 0',
      'OCS_METRICS_PUSH_URL (metrics.push_url) must use http:// or https://, not ftp://',
      "OCS_METRICS_TEXTFILE (metrics.textfile) must end with .prom: node_exporter's textfile collector reads only *.prom files",
      expect.stringMatching(/^OCS_METRICS_TEAM \(metrics\.team\) must be lowercase letters/),
    ]);
    expect(problems.join('\n')).not.toContain('s3cret');
    expect(
      problemsOf(() =>
        resolve({ env: { OCS_METRICS_PUSH_URL: 'http://gw:9091/metrics/job/x' } }),
      )[0],
    ).toMatch(/root URL, without \/metrics\/job/);
    const summary = JSON.stringify(
      describeConfigForLog(resolve({ env: { OCS_METRICS_PUSH_URL: 'http://u:s3cret@gw:9091' } })),
    );
    expect(summary).toContain('gw:9091');
    expect(summary).not.toContain('s3cret');
  });
});

describe('history, resources and secrets policies', () => {
  it.each([
    ['true', true],
    ['TRUE', true],
    ['false', false],
    ['0', false],
    ['chat_messages', ['chat_messages']],
    [' chat_messages , participants,, ', ['chat_messages', 'participants']],
  ])('reads OCS_HISTORY=%j', (text, expected) => {
    expect(resolve({ env: { OCS_HISTORY: text } }).history).toEqual(expected);
  });

  it('reads history from the file as a boolean or a list, and answers per resource', () => {
    const listed = resolveYaml('history: [chat_messages, participants]\n');
    expect(listed.history).toEqual(['chat_messages', 'participants']);
    expect(historyFor(listed, 'chat_messages')).toBe(true);
    expect(historyFor(listed, 'experiments')).toBe(false);
    const all = resolveYaml('history: true\n');
    expect(historyFor(all, 'experiments')).toBe(true);
  });

  it('rejects history that is neither a boolean nor resource names', () => {
    const problems = problemsOf(() => resolve({ env: { OCS_HISTORY: 'Chat-Messages' } }));
    expect(problems).toEqual([
      'OCS_HISTORY (history[0]) has "Chat-Messages", which is not a resource name (lowercase letters, digits and _, starting with a letter)',
    ]);
    expect(problemsOf(() => resolve({ file: { history: 'yes' } }))[0]).toContain('got "yes"');
  });

  it('names the list item at fault in resources', () => {
    const problems = problemsOf(() =>
      resolve({
        file: { resources: ['chat_messages', 'Bad Name'] },
        fileLines: { 'resources.1': 3 },
        filePath: 'c.yaml',
      }),
    );
    expect(problems).toEqual([
      'c.yaml:3: resources[1] has "Bad Name", which is not a resource name (lowercase letters, digits and _, starting with a letter)',
    ]);
  });

  it('refuses an empty resources list, which would sync nothing', () => {
    expect(problemsOf(() => resolve({ file: { resources: [] } }))[0]).toMatch(
      /^config file: resources is an empty list, which would sync nothing/,
    );
  });

  it('selects resources in manifest order and reports names the manifest lacks', () => {
    const manifest = ['experiments', 'participants', 'chat_messages'];
    const only = resolve({ env: { OCS_RESOURCES: 'chat_messages,ghost,experiments' } });
    expect(selectResources(only, manifest)).toEqual({
      selected: ['experiments', 'chat_messages'],
      unknown: ['ghost'],
    });
    const except = resolve({ env: { OCS_EXCLUDE_RESOURCES: 'experiments,phantom' } });
    expect(selectResources(except, manifest)).toEqual({
      selected: ['participants', 'chat_messages'],
      unknown: ['phantom'],
    });
    expect(selectResources(resolve({}), ['a', 'b'])).toEqual({ selected: ['a', 'b'], unknown: [] });
  });

  it('applies per-resource secrets policies and requires the archive key for reseal', () => {
    const archiveKey = Buffer.alloc(32, 7).toString('base64');
    const config = resolve({
      file: {
        secrets: {
          default: 'sealed',
          resources: { participant_data: 'reseal', llm_providers: 'drop' },
        },
      },
      env: { OCS_ARCHIVE_PUBLIC_KEY: archiveKey },
    });
    expect(secretPolicyFor(config, 'participant_data')).toBe('reseal');
    expect(secretPolicyFor(config, 'llm_providers')).toBe('drop');
    expect(secretPolicyFor(config, 'chatbot_channels')).toBe('sealed');
    expect(config.secrets.archivePublicKey).toBe(archiveKey);

    const problems = problemsOf(() =>
      resolve({
        file: { secrets: { resources: { participant_data: 'reseal', 'Bad-Name': 'shred' } } },
      }),
    );
    expect(problems).toHaveLength(3);
    expect(problems).toContain(
      'config file: secrets.resources.Bad-Name must be a mapping of resource name to one of plaintext, sealed, reseal, drop; got "shred"',
    );
    expect(problems).toContain(
      'config file: secrets.resources.Bad-Name is not a resource name; keys of secrets.resources are resource names (lowercase letters, digits and _), each mapped to plaintext, sealed, reseal, drop',
    );
    expect(problems).toContain(
      'secrets.resources.participant_data asks for reseal, which needs secrets.archive_public_key (OCS_ARCHIVE_PUBLIC_KEY): the base64 of the 32-byte X25519 public key to seal to',
    );
  });

  it('checks the archive public key is 32 bytes of base64', () => {
    expect(
      problemsOf(() =>
        resolve({ env: { OCS_ARCHIVE_PUBLIC_KEY: Buffer.alloc(16).toString('base64') } }),
      ),
    ).toEqual([
      'OCS_ARCHIVE_PUBLIC_KEY (secrets.archive_public_key) decodes to 16 bytes; an X25519 public key is 32 bytes (base64: 44 characters ending in =)',
    ]);
    expect(
      problemsOf(() => resolve({ env: { OCS_ARCHIVE_PUBLIC_KEY: 'not base64!' } }))[0],
    ).toContain('is not base64');
  });

  it('reads the audit keys from the file and the environment, and reports their problems with the rest', () => {
    expect(resolve({}).audit).toEqual({
      enabled: false,
      signingKeyFile: undefined,
      checkpointFile: undefined,
    });
    expect(
      resolve({
        env: {
          OCS_AUDIT: 'true',
          OCS_AUDIT_SIGNING_KEY_FILE: '/keys/ocs-audit-signing.key',
          OCS_AUDIT_CHECKPOINT_FILE: '/var/lib/checkpoints.jsonl',
        },
      }).audit,
    ).toEqual({
      enabled: true,
      signingKeyFile: '/keys/ocs-audit-signing.key',
      checkpointFile: '/var/lib/checkpoints.jsonl',
    });
    expect(resolveYaml('audit:\n  enabled: true\n').audit.enabled).toBe(true);
    expect(
      problemsOf(() =>
        resolveYaml('page_size: 0\naudit:\n  signing_key_file: /keys/k\n  checkpoint_file: /c\n'),
      ),
    ).toEqual([
      expect.stringMatching(/page_size/),
      expect.stringMatching(
        /audit.signing_key_file is set but audit.enabled is not: set audit.enabled: true \(OCS_AUDIT=true\)/,
      ),
    ]);
    expect(
      problemsOf(() =>
        resolve({ env: { OCS_AUDIT: 'true', OCS_AUDIT_SIGNING_KEY_FILE: '/keys/k' } }),
      ),
    ).toEqual([
      "OCS_AUDIT_SIGNING_KEY_FILE (audit.signing_key_file) is set without audit.checkpoint_file (OCS_AUDIT_CHECKPOINT_FILE): name the file each run's signed checkpoint is appended to, and ship it off this machine",
    ]);
    expect(
      problemsOf(() => resolve({ env: { OCS_AUDIT: 'true', OCS_AUDIT_CHECKPOINT_FILE: '/c' } })),
    ).toEqual([
      'OCS_AUDIT_CHECKPOINT_FILE (audit.checkpoint_file) is set without audit.signing_key_file (OCS_AUDIT_SIGNING_KEY_FILE): checkpoints are signed; create a key with `ocs-sync keygen --signing --out DIR`',
    ]);
    expect(problemsOf(() => resolve({ env: { OCS_AUDIT: 'sometimes' } }))[0]).toMatch(/OCS_AUDIT/);
  });

  it('checks retry delays against each other', () => {
    expect(
      problemsOf(() =>
        resolve({ file: { http: { min_retry_delay_ms: 5000, max_retry_delay_seconds: 2 } } }),
      ),
    ).toEqual([
      'config file: http.min_retry_delay_ms (5000 ms) is longer than http.max_retry_delay_seconds (2 s); the minimum delay must not exceed the maximum',
    ]);
  });
});

describe('config files', () => {
  it('names a missing file and where its name came from', () => {
    const missing = join(directory, 'nope.yaml');
    expect(problemsOf(() => loadConfig({ configPath: missing, env: {}, needs: LOCAL }))).toEqual([
      `Config file ${missing} (from --config) does not exist`,
    ]);
    expect(problemsOf(() => loadConfig({ env: { OCS_CONFIG: directory }, needs: LOCAL }))).toEqual([
      `Config file ${directory} (from OCS_CONFIG) is a directory, not a file`,
    ]);
  });

  it('names the line of a YAML syntax error and of duplicate keys', () => {
    const problems = problemsOf(() =>
      parseConfigText('page_size: 10\nlog_level: info\npage_size: 20\n', 'd.yaml'),
    );
    expect(problems).toEqual(['d.yaml:3: YAML syntax error: Map keys must be unique']);
  });

  it('treats an empty file as no settings', () => {
    expect(resolveYaml('# nothing yet\n').pageSize).toBe(1000);
  });

  it('records the line of each key', () => {
    expect(
      parseConfigText('a: 1\nhttp:\n  max_attempts: 3\nlist:\n  - x\n  - y\n', 'f').fileLines,
    ).toEqual({
      a: 1,
      http: 2,
      'http.max_attempts': 3,
      list: 4,
      'list.0': 5,
      'list.1': 6,
    });
  });
});

describe('config.example.yaml', () => {
  const examplePath = new URL('../config.example.yaml', import.meta.url);
  const text = readFileSync(examplePath, 'utf8');

  it('is valid and states exactly the built-in defaults', () => {
    const { file, fileLines } = parseConfigText(text, 'config.example.yaml');
    const fromExample = resolveConfig(
      { file, fileLines, filePath: 'config.example.yaml', env: {} },
      LOCAL,
    );
    expect(fromExample).toEqual(resolve({}));
  });

  it('is accepted for a server command once base_url and api_key are in the environment', () => {
    const { file } = parseConfigText(text, 'config.example.yaml');
    expect(resolveConfig({ file, env: SERVER_ENV }, SERVER).baseUrl).toBe(
      'https://chat.example.org',
    );
  });

  it('documents every key and every environment variable', () => {
    for (const setting of SETTINGS) {
      const key = setting.path.split('.').pop()!;
      if (!setting.envOnly)
        expect(text, setting.path).toMatch(new RegExp(`^\\s*#?\\s*${key}:`, 'm'));
      if (setting.env) expect(text, setting.env).toContain(setting.env);
    }
    expect(text).toContain('OCS_CONFIG');
  });
});

describe('schema bookkeeping', () => {
  it('has a SETTINGS entry for every leaf of the schema and no other', () => {
    const leaves: string[] = [];
    const walk = (schema: z.ZodObject, prefix: string) => {
      for (const [key, child] of Object.entries(schema.shape)) {
        const path = prefix ? `${prefix}.${key}` : key;
        if (child instanceof z.ZodObject) walk(child, path);
        else leaves.push(path);
      }
    };
    walk(configSchema, '');
    expect(leaves.sort()).toEqual(SETTINGS.map((setting) => setting.path).sort());
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('exclude_fields', () => {
  it('reads a mapping from the file and resource.field items from OCS_EXCLUDE_FIELDS', () => {
    expect(
      resolveYaml('exclude_fields:\n  chat_messages: [content, content]\n').excludeFields,
    ).toEqual({ chat_messages: ['content'] });
    expect(
      resolve({ env: { OCS_EXCLUDE_FIELDS: 'chat_messages.content, participants.identifier' } })
        .excludeFields,
    ).toEqual({ chat_messages: ['content'], participants: ['identifier'] });
    expect(resolve({}).excludeFields).toEqual({});
  });

  it('reports every bad name at once, with the other problems of the configuration', () => {
    const problems = problemsOf(() =>
      resolveYaml('page_size: 0\nexclude_fields:\n  Chat: [content]\n  chats: [id, "bad name"]\n'),
    );
    const text = problems.join('\n');
    expect(text).toMatch(/page_size/);
    expect(text).toMatch(/exclude_fields.*"Chat" is not a resource name/);
    expect(text).toMatch(/chats\.id cannot be excluded/);
    expect(text).toMatch(/"bad name" \(of chats\) is not a field name/);
  });

  it('names the environment variable and the form it takes when an item is not resource.field', () => {
    const problems = problemsOf(() => resolve({ env: { OCS_EXCLUDE_FIELDS: 'content' } }));
    expect(problems.join('\n')).toMatch(/OCS_EXCLUDE_FIELDS.*comma-separated resource\.field/);
  });
});
