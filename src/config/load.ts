/**
 * Where the configuration comes from, later wins: built-in defaults < YAML file (`--config FILE`)
 * < environment < command-line flags. `resolveConfig` is pure and validates the merged values
 * once, reporting every problem together; `loadConfig` is the thin wrapper that reads the file.
 * Which keys there are, their defaults and environment variables: one file per section, put
 * together in schema.ts. How each problem is worded: problems.ts.
 */

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import type { LineCounter } from 'yaml';
import { unknownNameAdvice } from '../did-you-mean.js';
import { UsageError } from '../errors.js';
import { recordByName, valueByName } from '../names.js';
import { packageVersion } from '../package-info.js';
import { isPostgresTarget, redactUrl } from '../warehouse/url.js';
import { resolveFleet, type Fleet, type TeamSetup, type TeamView } from './fleet.js';
import {
  flagsToSnake,
  fromText,
  layerSources,
  originFinder,
  setAt,
  type ConfigSources,
} from './layers.js';
import {
  ConfigProblemsError,
  crossKeyProblems,
  envTypoProblems,
  issueProblems,
  placeOf,
  spotText,
  type FileSpot,
  type Origin,
  type Problem,
  type Segments,
} from './problems.js';
import {
  configDefaults,
  configSchema,
  SETTINGS,
  toConfig,
  type Config,
  type ConfigFlags,
} from './schema.js';
import { getAt, isPlainObject, type Tree } from './setting.js';
import { variableShown, type TeamChoice } from './teams.js';

export interface ConfigInputs {
  /** The parsed YAML file (anything YAML can give; checked here). */
  file?: unknown;
  /** The file's name, for messages. */
  filePath?: string;
  /** Line of each key in the file, by dotted path (`http.max_attempts`, `resources.2`). */
  fileLines?: Readonly<Record<string, number>>;
  env: Readonly<Record<string, string | undefined>>;
  flags?: ConfigFlags;
  /** Goes into the default User-Agent; defaults to this package's version. */
  version?: string;
}

export interface ConfigNeeds {
  /** The command talks to the server: base_url and api_key are required. */
  server: boolean;
  /** With a `teams:` list, the teams the command runs, when it does not run every one. */
  teams?: TeamChoice;
}

/** Environment variable naming a config file when `--config` is not given. */
export const CONFIG_PATH_ENV = 'OCS_CONFIG';

const ENV_VARIABLES = new Set<string>([
  ...SETTINGS.flatMap((setting) => (setting.env ? [setting.env] : [])),
  CONFIG_PATH_ENV,
]);

/**
 * Validates configuration from every source at once. Throws ConfigError listing every problem;
 * each names the key (and file line) or environment variable, and what is allowed. Secret values
 * never appear in the text.
 */
export function resolveConfig(inputs: ConfigInputs, needs: ConfigNeeds): Config {
  const { setup } = resolveWithOrigins(inputs, needs);
  if (setup.kind === 'fleet') throw teamNeeded(setup.fleet, inputs.filePath);
  return setup.config;
}

/** Like resolveConfig, for a configuration of one team or of a `teams:` list. */
export function resolveSetup(inputs: ConfigInputs, needs: ConfigNeeds): Setup {
  return resolveWithOrigins(inputs, needs).setup;
}

/** The error for a command that needs one team of a `teams:` list and was not told which. */
export function teamNeeded(fleet: Fleet, filePath: string | undefined): UsageError {
  return new UsageError(
    `${filePath ?? 'The configuration'} has a teams: list (${fleet.teams.map((team) => team.name).join(', ')}); this command works on one team: choose it with --team NAME.`,
  );
}

/** One setting of the effective configuration and where its value came from. */
export interface SettingSource {
  key: string;
  /** Shown as is; secrets are `set`/`not set`, URLs without their password. */
  value: unknown;
  /** `default`, `FILE:LINE`, `env OCS_…`, or `flag`. */
  source: string;
}

/** The effective configuration, each setting with its value and origin (for `ocs-sync config`). */
export function explainConfig(
  inputs: ConfigInputs,
  needs: ConfigNeeds,
  /** The team of a `teams:` list to explain. */
  teamName?: string,
): { config: Config; settings: SettingSource[] } {
  const { setup, view, placeInFile } = resolveWithOrigins(
    inputs,
    teamName === undefined ? needs : { ...needs, teams: { names: [teamName] } },
  );
  const team =
    setup.kind === 'fleet' ? pickTeam(setup.fleet, teamName, inputs.filePath) : undefined;
  if (setup.kind === 'single' && teamName !== undefined) throw noTeams(teamName);
  const config = team?.config ?? (setup as Extract<Setup, { kind: 'single' }>).config;
  const { merged, originOf } = view(team?.name)!;
  const sourceOf = (segments: string[]): string => {
    const origin = originOf(segments);
    switch (origin.kind) {
      case 'file':
        return placeInFile(segments);
      case 'team':
        return `${placeInFile(['teams', origin.index, ...segments])}${origin.via ? ` (${origin.via})` : ''}`;
      case 'env':
        return `env ${origin.variable}`;
      case 'flag':
        return 'flag';
      default:
        return 'default';
    }
  };
  const settings: SettingSource[] = [];
  if (team !== undefined) {
    settings.push({ key: 'team', value: team.name, source: placeInFile(['teams', team.index]) });
    const source = team.apiKey;
    settings.push({
      key: 'api_key',
      value:
        source === undefined
          ? 'not set'
          : 'env' in source
            ? `from env ${variableShown(source.env)}`
            : `from file ${source.file}`,
      source: placeInFile([
        'teams',
        team.index,
        source && 'env' in source ? 'api_key_env' : 'api_key_file',
      ]),
    });
  }
  for (const setting of SETTINGS) {
    if (team !== undefined && setting.path === 'api_key') continue;
    const segments = setting.path.split('.');
    const value = getAt(merged, segments);
    if (
      setting.path === 'secrets.resources' &&
      isPlainObject(value) &&
      Object.keys(value).length > 0
    ) {
      for (const [resource, policy] of Object.entries(value)) {
        settings.push({
          key: `secrets.resources.${resource}`,
          value: policy,
          source: sourceOf([...segments, resource]),
        });
      }
      continue;
    }
    const shown = setting.secret
      ? value === undefined
        ? 'not set'
        : 'set'
      : value === undefined
        ? 'not set'
        : typeof value === 'string' && setting.url
          ? redactUrl(value)
          : value;
    settings.push({
      key: setting.path,
      value: shown,
      source: value === undefined ? '-' : sourceOf(segments),
    });
  }
  return { config, settings };
}

/**
 * One team of a `teams:` list, by name (UsageError listing the names when it is not one of them,
 * or when no name is given).
 */
export function pickTeam(
  fleet: Fleet,
  name: string | undefined,
  filePath: string | undefined,
): TeamSetup {
  if (name === undefined) throw teamNeeded(fleet, filePath);
  const team = fleet.teams.find((candidate) => candidate.name === name);
  if (team === undefined) {
    throw new UsageError(
      `--team ${JSON.stringify(name)} is not a team of ${filePath ?? 'the configuration'}; ${unknownNameAdvice(
        name,
        fleet.teams.map((candidate) => candidate.name),
      )}`,
    );
  }
  return team;
}

/** --team given with a configuration of one team. */
export function noTeams(name: string): UsageError {
  return new UsageError(
    `--team ${JSON.stringify(name)}: this configuration has no teams: list, so it is one team without a name; leave --team out, or give a configuration with teams: (--config FILE or OCS_CONFIG).`,
  );
}

/** What a configuration describes: one team, or a `teams:` list of them. */
export type Setup = { kind: 'single'; config: Config } | { kind: 'fleet'; fleet: Fleet };

interface Resolved {
  setup: Setup;
  /** The merged values and their origins: the single team's, or one team's by name. */
  view(team?: string): TeamView | undefined;
  /** `FILE:LINE` of a key of the file, or `FILE` when its line is not known. */
  placeInFile(segments: Segments): string;
}

function resolveWithOrigins(inputs: ConfigInputs, needs: ConfigNeeds): Resolved {
  const problems: Problem[] = [];
  const file = inputs.filePath ?? 'config file';

  /** The file and the line of a key of it (of its nearest ancestor with a known line). */
  const spotOf = (segments: Segments): FileSpot => {
    for (let length = segments.length; length > 0; length--) {
      const line = valueByName(inputs.fileLines, segments.slice(0, length).join('.'));
      if (line !== undefined) return { file, line };
    }
    return { file };
  };
  const placeInFile = (segments: Segments): string => spotText(spotOf(segments));

  const sources: ConfigSources = {
    defaults: configDefaults(inputs.version ?? packageVersion()),
    file: undefined,
    env: recordByName(),
    envOrigins: new Map(),
    flags: undefined,
  };
  let teams: { value: unknown } | undefined;

  // The file.
  if (inputs.file !== undefined && inputs.file !== null) {
    if (!isPlainObject(inputs.file)) {
      problems.push({
        place: { in: 'file', file, path: [] },
        message: `must be a mapping of keys (such as base_url: …, warehouse: …), not ${Array.isArray(inputs.file) ? 'a list' : 'a single value'}`,
      });
    } else {
      const keys = recordByName(Object.entries(inputs.file));
      for (const setting of SETTINGS.filter((candidate) => candidate.envOnly)) {
        if (Object.hasOwn(keys, setting.path)) {
          problems.push({
            place: { in: 'file', ...spotOf([setting.path]), path: [setting.path] },
            message: `may only come from the environment (${setting.env}), so that it never sits in a file; remove it from the file`,
          });
          delete keys[setting.path];
        }
      }
      if (Object.hasOwn(keys, 'teams')) {
        teams = { value: keys.teams };
        delete keys.teams;
      }
      sources.file = keys;
    }
  }

  // The environment.
  const envOrigins = new Map<string, Origin>();
  for (const setting of SETTINGS) {
    if (!setting.env) continue;
    const raw = inputs.env[setting.env];
    // Empty counts as unset: compose files often pass `VAR=${VAR}` for variables nobody set.
    if (raw === undefined || raw.trim() === '') continue;
    setAt(sources.env, setting.path.split('.'), fromText(setting.kind, raw));
    envOrigins.set(setting.path, { kind: 'env', variable: setting.env });
  }
  sources.envOrigins = envOrigins;
  problems.push(...envTypoProblems(inputs.env, ENV_VARIABLES));

  // Command-line flags (camelCase in, snake_case here).
  if (inputs.flags !== undefined) {
    sources.flags = flagsToSnake(inputs.flags as Tree, [], problems);
  }

  if (teams !== undefined) {
    const { fleet, views, trees } = resolveFleet({
      sources,
      teams: teams.value,
      needs,
      env: inputs.env,
      spotOf,
      problems,
    });
    if (problems.length > 0 || fleet === undefined) {
      throw new ConfigProblemsError(problems, trees);
    }
    return {
      setup: { kind: 'fleet', fleet },
      view: (team) => (team === undefined ? undefined : views.get(team)),
      placeInFile,
    };
  }

  // One validation of the merged values.
  const { merged, origins } = layerSources(sources);
  const originOf = originFinder(origins);
  const locate = (segments: Segments) => placeOf(segments, originOf(segments), spotOf);
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(...issueProblems(issue, merged, locate));
    }
  }
  problems.push(...crossKeyProblems(merged, needs, locate));

  if (problems.length > 0 || !parsed.success) {
    throw new ConfigProblemsError(problems, merged);
  }
  const config = toConfig(parsed.data);
  return {
    setup: { kind: 'single', config },
    view: (team) => (team === undefined ? { merged, originOf } : undefined),
    placeInFile,
  };
}

// I/O: the file, the package version.

export interface ConfigFileContents {
  file: unknown;
  fileLines: Record<string, number>;
}

/** Reads and parses a YAML config file; ConfigError names the file and line of any fault. */
export function readConfigFile(path: string, givenBy = '--config'): ConfigFileContents {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EISDIR'
          ? 'is a directory, not a file'
          : code === 'EACCES' || code === 'EPERM'
            ? 'cannot be read (permission denied)'
            : `cannot be read (${code ?? (error as Error).message})`;
    throw new ConfigProblemsError([{ message: `Config file ${path} (from ${givenBy}) ${reason}` }]);
  }
  return parseConfigText(text, path);
}

/** The YAML parser, loaded only when there is a file to read (commands start faster without). */
function yaml(): typeof Yaml {
  return createRequire(import.meta.url)('yaml') as typeof Yaml;
}

const QUOTE_A_STAR =
  'a value that starts with * (such as a cron expression) must be quoted, e.g. schedule: "*/15 * * * *"';

/** Parses YAML text of a config file. Exported for tests and for `config check`-style tools. */
export function parseConfigText(text: string, path: string): ConfigFileContents {
  const { isAlias, LineCounter, parseDocument, visit } = yaml();
  const lineCounter = new LineCounter();
  const document = parseDocument(text, { lineCounter, uniqueKeys: true });
  const problems: Problem[] = [];
  const seenLines = new Set<number>();
  for (const error of document.errors) {
    const line = error.linePos?.[0].line;
    // Only the first line of the parser's message: the rest quotes the source, which could be a key.
    const message = (error.message.split('\n')[0] ?? '')
      .replace(/ at line \d+, column \d+:?$/, '')
      .trim();
    if (error.code === 'UNEXPECTED_TOKEN' && /alias/i.test(message)) {
      if (line !== undefined && seenLines.has(line)) continue;
      if (line !== undefined) seenLines.add(line);
      problems.push({
        place: { in: 'file', file: path, line, path: [] },
        message: `YAML syntax error: ${message}; ${QUOTE_A_STAR}`,
      });
      continue;
    }
    problems.push({
      place: { in: 'file', file: path, line, path: [] },
      message: `YAML syntax error: ${message}`,
    });
  }
  if (problems.length > 0) throw new ConfigProblemsError(problems);

  let file: unknown;
  try {
    file = document.toJS({ maxAliasCount: 1000 });
  } catch (error) {
    // Usually an alias without its anchor: an unquoted value starting with *.
    const anchors = new Set<string>();
    const aliases: Array<{ name: string; line: number | undefined }> = [];
    visit(document, {
      Node(_, node) {
        if (isAlias(node)) {
          aliases.push({
            name: node.source,
            line: node.range ? lineCounter.linePos(node.range[0]).line : undefined,
          });
        } else if (node.anchor) {
          anchors.add(node.anchor);
        }
      },
    });
    const dangling = aliases.filter((alias) => !anchors.has(alias.name));
    throw new ConfigProblemsError(
      dangling.length > 0
        ? dangling.map((alias) => ({
            place: { in: 'file', file: path, line: alias.line, path: [] },
            message: `YAML alias *${alias.name} refers to no &${alias.name} anchor; ${QUOTE_A_STAR}`,
          }))
        : [
            {
              place: { in: 'file', file: path, path: [] },
              message: `YAML cannot be read: ${(error as Error).message.split('\n')[0]}`,
            },
          ],
    );
  }
  const fileLines: Record<string, number> = recordByName();
  collectLines(document.contents, [], lineCounter, fileLines);
  return { file, fileLines };
}

function collectLines(
  node: unknown,
  prefix: string[],
  lineCounter: LineCounter,
  out: Record<string, number>,
): void {
  const { isAlias, isMap, isScalar, isSeq } = yaml();
  if (isMap(node)) {
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      const path = [...prefix, key];
      const range = isScalar(pair.key) ? pair.key.range : undefined;
      if (range) out[path.join('.')] = lineCounter.linePos(range[0]).line;
      collectLines(pair.value, path, lineCounter, out);
    }
  } else if (isSeq(node)) {
    node.items.forEach((item, index) => {
      const path = [...prefix, String(index)];
      const range =
        isScalar(item) || isMap(item) || isSeq(item) || isAlias(item) ? item.range : undefined;
      if (range) out[path.join('.')] = lineCounter.linePos(range[0]).line;
      collectLines(item, path, lineCounter, out);
    });
  }
}

export interface LoadConfigOptions {
  /** `--config FILE`; when absent, OCS_CONFIG names the file; with neither, no file is read. */
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  flags?: ConfigFlags;
  needs: ConfigNeeds;
}

/** Reads the config file (if any), then resolves the configuration. Throws ConfigError. */
export function loadConfig(options: LoadConfigOptions): Config {
  return resolveConfig(configInputs(options), options.needs);
}

/** Reads the config file (if any), then resolves one team or a `teams:` list. */
export function loadSetup(options: LoadConfigOptions): { setup: Setup; filePath?: string } {
  const inputs = configInputs(options);
  return { setup: resolveSetup(inputs, options.needs), filePath: inputs.filePath };
}

/** Like loadConfig, with where each setting came from (`team`: one of a `teams:` list). */
export function loadConfigExplained(options: LoadConfigOptions & { team?: string }) {
  return explainConfig(configInputs(options), options.needs, options.team);
}

function configInputs(options: LoadConfigOptions): ConfigInputs {
  const env = options.env ?? process.env;
  const fromEnv = env[CONFIG_PATH_ENV]?.trim();
  const configPath = options.configPath ?? (fromEnv === '' ? undefined : fromEnv);
  const contents =
    configPath === undefined
      ? undefined
      : readConfigFile(configPath, options.configPath !== undefined ? '--config' : CONFIG_PATH_ENV);
  return {
    file: contents?.file,
    filePath: configPath,
    fileLines: contents?.fileLines,
    env,
    flags: options.flags,
  };
}

/** A summary safe for logs: no API key, no private key, no warehouse password. */
export function describeConfigForLog(config: Config): Record<string, unknown> {
  return {
    baseUrl: config.baseUrl === undefined ? 'not set' : redactUrl(config.baseUrl),
    apiKey: config.apiKey === undefined ? 'not set' : 'set',
    authScheme: config.authScheme,
    allowInsecureHttp: config.allowInsecureHttp,
    warehouse: {
      dialect: config.warehouse.target.dialect,
      url: redactUrl(config.warehouse.url),
      ...(isPostgresTarget(config.warehouse.target)
        ? {
            schema: config.warehouse.schema,
            poolSize: config.warehouse.poolSize,
            statementTimeoutSeconds: config.warehouse.statementTimeoutSeconds,
          }
        : {}),
    },
    pageSize: config.pageSize,
    resources: config.resources ?? 'all',
    excludeResources: config.excludeResources,
    excludeFields: config.excludeFields,
    concurrency: config.concurrency,
    pagesInFlight: config.pagesInFlight,
    pageThreads: config.pageThreads,
    http: { ...config.http },
    logLevel: config.logLevel,
    privateKey:
      config.privateKeyFile !== undefined
        ? `file ${config.privateKeyFile}`
        : config.privateKey !== undefined
          ? 'set'
          : 'not set',
    privateKeyPassphrase: config.privateKeyPassphrase === undefined ? 'not set' : 'set',
    secrets: {
      default: config.secrets.default,
      resources: { ...config.secrets.resources },
      archivePublicKey: config.secrets.archivePublicKey === undefined ? 'not set' : 'set',
      openThreads: config.secrets.openThreads ?? 'one per core, at most 8',
    },
    onSchemaChange: config.onSchemaChange,
    lock: { ...config.lock },
    deletes: config.deletes,
    history: config.history,
    schedule: config.schedule,
    fullRefreshSchedule: config.fullRefreshSchedule ?? 'off',
    timezone: config.timezone,
    health: {
      listen:
        config.health.listen === null
          ? 'off'
          : `${config.health.listen.host.includes(':') ? `[${config.health.listen.host}]` : config.health.listen.host}:${config.health.listen.port}`,
      maxAgeSeconds: config.health.maxAgeSeconds,
    },
    files: { ...config.files, dir: config.files.dir ?? 'not set' },
    objectStorage: { ...config.objectStorage, endpoint: config.objectStorage.endpoint ?? 'AWS' },
    metrics: {
      pushUrl: config.metrics.pushUrl === undefined ? 'off' : redactUrl(config.metrics.pushUrl),
      textfile: config.metrics.textfile ?? 'off',
      team: config.metrics.team ?? 'not set',
    },
  };
}
