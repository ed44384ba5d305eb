/**
 * A configuration with a `teams:` list: each entry is a team (its name, server, API key source,
 * private key, warehouse, and any setting it overrides) layered over the shared settings, and
 * validated as a configuration of its own, every problem named with the team. Then the rules
 * between teams: names and warehouses (and blob stores, checkpoint files) are each a team's own.
 * Pure, but `readApiKey`, which reads a team's key when a command needs it.
 */
import { resolve } from 'node:path';
import { ConfigError, describeError } from '../errors.js';
import { readKeyFile, warnIfExposed } from '../sealing/keys.js';
import { recordByName } from '../names.js';
import { isPostgresTarget, sqliteFileOf } from '../warehouse/url.js';
import {
  isBucketText,
  locationsOverlap,
  parseLocation,
  type Location,
} from '../storage/location.js';
import { layerSources, originFinder, type ConfigSources } from './layers.js';
import {
  crossKeyProblems,
  issueProblems,
  placeOf,
  teamLabel,
  type Locate,
  type Origin,
  type Place,
  type Problem,
  type Segments,
  type SpotOf,
  type TeamRef,
} from './problems.js';
import { SETTINGS, configSchema, toConfig, type Config } from './schema.js';
import { isPlainObject, type Tree } from './setting.js';
import {
  ENV_NAME,
  PROCESS_SETTINGS,
  TEAM_NAME_RULE,
  choosesTeam,
  isTeamName,
  variableShown,
  type ApiKeySource,
  type TeamChoice,
} from './teams.js';

/** One team of a `teams:` list, ready to run. */
export interface TeamSetup {
  name: string;
  /** Its place in the list (for messages). */
  index: number;
  /** Where its API key is read from when a command needs it (undefined: its entry names none). */
  apiKey: ApiKeySource | undefined;
  /** Its settings: the shared ones, its entry over them, flags over both. `apiKey` is unset. */
  config: Config;
}

export interface Fleet {
  teams: TeamSetup[];
  teamsAtOnce: number;
}

/** What a command may look up about one team's settings (for `ocs-sync config`). */
export interface TeamView {
  merged: Tree;
  originOf(segments: readonly (string | number)[]): Origin;
}

export interface FleetContext {
  sources: ConfigSources;
  /** The file's `teams:` value, as parsed. */
  teams: unknown;
  /** `teams`: the teams the command runs, when not every one. */
  needs: { server: boolean; teams?: TeamChoice };
  env: Readonly<Record<string, string | undefined>>;
  /** The file and line of a path of the file. */
  spotOf: SpotOf;
  /** Collects every problem. */
  problems: Problem[];
}

const ENTRY_SHAPE =
  'a mapping with name, base_url, api_key_env or api_key_file, private_key_file and warehouse (and any shared setting it overrides)';

/** Every team validated; problems are pushed to `context.problems`. */
export function resolveFleet(context: FleetContext): {
  fleet: Fleet | undefined;
  views: Map<string, TeamView>;
  trees: Tree[];
} {
  const { problems, spotOf, sources } = context;
  const views = new Map<string, TeamView>();
  const trees: Tree[] = [];
  problems.push(...sharedKeyProblems(context));
  if (!Array.isArray(context.teams) || context.teams.length === 0) {
    problems.push({
      place: inFile(['teams'], spotOf),
      message: Array.isArray(context.teams)
        ? 'is an empty list; name at least one team, or remove teams: for a configuration of one team'
        : `must be a list of teams, each ${ENTRY_SHAPE}`,
    });
    return { fleet: undefined, views, trees };
  }
  const teams: TeamSetup[] = [];
  const locators = new Map<TeamSetup, Locate>();
  const firstIndexOf = new Map<string, number>();
  context.teams.forEach((value: unknown, index) => {
    const entry = readEntry(value, index, context, firstIndexOf);
    // A team this command does not run, whose warehouse URL is not given here, is not checked
    // further, nor run.
    if (entry === undefined || entry.notHere) return;
    const origin: Origin = { kind: 'team', index, name: entry.name };
    const { merged, origins } = layerSources(sources, { entry: entry.settings, origin });
    for (const [path, variable] of entry.readFrom) {
      origins.set(path, { ...origin, via: variable });
    }
    const originOf = originFinder(origins);
    const locate: Locate = (segments) => placeOf(segments, originOf(segments), spotOf);
    trees.push(merged);
    if (entry.name !== undefined) views.set(entry.name, { merged, originOf });
    // A problem of no place where a value is given (a key the command needs) is named with the
    // team; one of a shared value (a line of the file, a variable) is the same for every team.
    const team: TeamRef = { index, name: entry.name };
    const named = (problem: Problem): Problem =>
      problem.place === undefined || problem.place.in === 'setting'
        ? { ...problem, team }
        : problem;
    const parsed = configSchema.safeParse(merged);
    const own = teamProblems(merged, entry, context.needs, locate).map(named);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        own.push(...issueProblems(issue, merged, locate).map(named));
      }
    }
    problems.push(...own);
    if (
      !parsed.success ||
      own.length > 0 ||
      entry.problems.length > 0 ||
      entry.name === undefined
    ) {
      return;
    }
    const setup = { name: entry.name, index, apiKey: entry.apiKey, config: toConfig(parsed.data) };
    teams.push(setup);
    locators.set(setup, locate);
  });
  problems.push(...sharedPlaceProblems(teams, (setup) => locators.get(setup)!));
  const teamsAtOnce = teams[0]?.config.teamsAtOnce ?? 1;
  return { fleet: { teams, teamsAtOnce }, views, trees };
}

const TEAM_LABEL_IS_NAME =
  'with teams:, each team\'s metrics are labelled with its name (team="NAME"); remove it';

/** A key of the file's shared settings (outside `teams:`). */
function inFile(path: Segments, spotOf: SpotOf): Place {
  return { in: 'file', ...spotOf(path), path };
}

/** Keys that never come from the shared settings of a `teams:` configuration. */
function sharedKeyProblems(context: FleetContext): Problem[] {
  const problems: Problem[] = [];
  if (context.sources.file?.api_key !== undefined && context.sources.file.api_key !== null) {
    problems.push({
      place: inFile(['api_key'], context.spotOf),
      standalone: true,
      message:
        "with teams:, each team's API key comes from its own entry (api_key_env or api_key_file), never from the file; remove it",
    });
  }
  const fileMetrics = context.sources.file?.metrics;
  if (isPlainObject(fileMetrics) && fileMetrics.team !== undefined && fileMetrics.team !== null) {
    problems.push({
      place: inFile(['metrics', 'team'], context.spotOf),
      standalone: true,
      message: TEAM_LABEL_IS_NAME,
    });
  }
  const teamFromEnv = context.sources.envOrigins.get('metrics.team');
  if (teamFromEnv?.kind === 'env') {
    problems.push({
      place: { in: 'env', variable: teamFromEnv.variable, path: [] },
      message: `is set, but ${TEAM_LABEL_IS_NAME}`,
    });
  }
  const fromEnv = context.sources.envOrigins.get('api_key');
  if (fromEnv?.kind === 'env') {
    problems.push({
      place: { in: 'env', variable: fromEnv.variable, path: [] },
      message: `is set, but with teams: each team's API key comes from its own entry (api_key_env or api_key_file); unset ${fromEnv.variable} (the value is not shown)`,
    });
  }
  return problems;
}

interface Entry {
  name: string | undefined;
  apiKey: ApiKeySource | undefined;
  /** The entry's settings, in the file's shape, without the team's own keys. */
  settings: Tree;
  /** Settings read from a variable the entry names (`warehouse.url_env`), by path. */
  readFrom: Map<string, string>;
  /** Its `warehouse.url_env` is not set in this process, which does not run the team. */
  notHere: boolean;
  /** Problems of the entry's own keys. */
  problems: Problem[];
}

/** One entry's own keys checked and taken out; undefined when it is not a mapping. */
function readEntry(
  value: unknown,
  index: number,
  context: FleetContext,
  firstIndexOf: Map<string, number>,
): Entry | undefined {
  const { spotOf, problems } = context;
  /** A key of the entry (`name`: the team's, once known to be usable). */
  const at = (path: Segments, name?: string): Place => ({
    in: 'team',
    ...spotOf(['teams', index, ...path]),
    team: { index, name },
    path,
  });
  if (!isPlainObject(value)) {
    problems.push({ place: at([]), message: `must be ${ENTRY_SHAPE}; got ${describe(value)}` });
    return undefined;
  }
  const settings = recordByName(Object.entries(value));
  const own: Problem[] = [];
  let name: string | undefined;
  const rawName = settings.name;
  if (rawName === undefined || rawName === null) {
    own.push({ place: at([]), message: `has no name; every team needs one: ${TEAM_NAME_RULE}` });
  } else if (typeof rawName !== 'string' || !isTeamName(rawName)) {
    own.push({
      place: at(['name']),
      message: `must be ${TEAM_NAME_RULE}; got ${describe(rawName)}`,
    });
  } else {
    name = rawName;
    const first = firstIndexOf.get(rawName);
    if (first !== undefined) {
      own.push({
        place: at(['name'], name),
        message: `is also the name of teams[${first}]; each team needs a name of its own`,
      });
    } else {
      firstIndexOf.set(rawName, index);
    }
  }
  const entryKey: KeyOf = (path) => at(path.split('.'), name);

  if (settings.api_key !== undefined && settings.api_key !== null) {
    own.push({
      place: entryKey('api_key'),
      standalone: true,
      message: `an API key is never written in the configuration file; name the environment variable that holds it (api_key_env: OCS_${(name ?? 'TEAM').toUpperCase().replace(/[^A-Z0-9]/g, '_')}_API_KEY) or a file that does (api_key_file: /run/secrets/${name ?? 'team'}-api-key); the value is not shown`,
    });
  }
  const apiKey = readKeySource(settings, entryKey, own);
  for (const path of PROCESS_SETTINGS) {
    const [section, key] = path.split('.') as [string, string | undefined];
    const given = key === undefined ? settings[section] : (settings[section] as Tree)?.[key];
    if (
      given !== undefined &&
      given !== null &&
      (key === undefined || isPlainObject(settings[section]))
    ) {
      own.push({
        place: entryKey(path),
        message:
          "is a setting of the whole process, the same for every team; set it at the top level of the file, not in a team's entry",
      });
    }
  }
  // As at the top level of the file: a ConfigMap is no place for a passphrase either.
  for (const setting of SETTINGS.filter((candidate) => candidate.envOnly)) {
    if (!Object.hasOwn(settings, setting.path)) continue;
    own.push({
      place: entryKey(setting.path),
      message: `may only come from the environment (${setting.env}, which every team shares), so that it never sits in a file; remove it from the team's entry (the value is not shown)`,
    });
    delete settings[setting.path];
  }
  if (settings.teams !== undefined) {
    own.push({
      place: entryKey('teams'),
      standalone: true,
      message: "a team's entry cannot hold teams of its own",
    });
  }
  if (
    isPlainObject(settings.metrics) &&
    settings.metrics.team !== undefined &&
    settings.metrics.team !== null
  ) {
    own.push({ place: entryKey('metrics.team'), standalone: true, message: TEAM_LABEL_IS_NAME });
  }
  const runsHere = name === undefined || choosesTeam(context.needs.teams, name);
  const { readFrom, notHere } = readWarehouseUrlEnv(settings, context.env, entryKey, own, runsHere);
  for (const key of ['name', 'api_key', 'api_key_env', 'api_key_file', 'teams'])
    delete settings[key];
  problems.push(...own);
  return { name, apiKey, settings, readFrom, notHere, problems: own };
}

/** The place of a key of a team's entry, by its dotted path. */
type KeyOf = (path: string) => Place;

/** `api_key_env` or `api_key_file` (one of them), checked. */
function readKeySource(settings: Tree, key: KeyOf, problems: Problem[]): ApiKeySource | undefined {
  const env = settings.api_key_env;
  const file = settings.api_key_file;
  const given = (value: unknown) => value !== undefined && value !== null;
  if (given(env) && given(file)) {
    problems.push({
      place: key('api_key_env'),
      message: "and api_key_file are both set; give the team's API key one way",
    });
    return undefined;
  }
  if (given(env)) {
    if (typeof env !== 'string' || !ENV_NAME.test(env)) {
      problems.push({
        place: key('api_key_env'),
        message:
          'must be the name of an environment variable (letters, digits and _), such as OCS_KENYA_API_KEY; the value is not shown, as it may be the key itself (if it is, put the key in that variable and change it on the server: it sat in the file)',
      });
      return undefined;
    }
    return { env };
  }
  if (given(file)) {
    if (typeof file !== 'string' || file.trim() === '') {
      problems.push({
        place: key('api_key_file'),
        message: 'must be the path of a file holding the API key',
      });
      return undefined;
    }
    return { file: file.trim() };
  }
  return undefined;
}

/**
 * `warehouse.url_env`: the team's warehouse URL (a role and password of its own) from a variable;
 * `notHere` when the variable is not set and this process does not run the team (`runsHere`).
 */
function readWarehouseUrlEnv(
  settings: Tree,
  env: Readonly<Record<string, string | undefined>>,
  key: KeyOf,
  problems: Problem[],
  runsHere: boolean,
): { readFrom: Map<string, string>; notHere: boolean } {
  const readFrom = new Map<string, string>();
  const warehouse = settings.warehouse;
  if (!isPlainObject(warehouse) || warehouse.url_env === undefined || warehouse.url_env === null) {
    return { readFrom, notHere: false };
  }
  const variable = warehouse.url_env;
  const copy = recordByName(Object.entries(warehouse));
  delete copy.url_env;
  settings.warehouse = copy;
  if (typeof variable !== 'string' || !ENV_NAME.test(variable)) {
    problems.push({
      place: key('warehouse.url_env'),
      message:
        'must be the name of an environment variable (letters, digits and _), such as OCS_KENYA_WAREHOUSE_URL; the value is not shown, as it may be the URL itself (if it is, put the URL in that variable and change its password: it sat in the file)',
    });
  } else if (warehouse.url !== undefined && warehouse.url !== null) {
    problems.push({
      place: key('warehouse.url_env'),
      message: 'and warehouse.url are both set; give one of them',
    });
  } else if ((env[variable] ?? '').trim() === '') {
    if (!runsHere) return { readFrom, notHere: true };
    problems.push({
      place: key('warehouse.url_env'),
      standalone: true,
      message: `${variableShown(variable)} is not set; set it to the team's warehouse URL`,
    });
  } else {
    copy.url = env[variable]!.trim();
    readFrom.set('warehouse.url', variable);
  }
  return { readFrom, notHere: false };
}

/** Problems of the keys a command needs and of the rules that span keys, for one team. */
function teamProblems(merged: Tree, entry: Entry, needs: { server: boolean }, locate: Locate) {
  const problems = crossKeyProblems(merged, needs, locate, entry.apiKey !== undefined);
  if (needs.server && entry.apiKey === undefined && entry.problems.length === 0) {
    problems.push({
      message:
        'it has no API key: name the environment variable that holds it (api_key_env) or a file that does (api_key_file)',
    });
  }
  return problems;
}

/** Two teams never share a warehouse, a blob store or a checkpoint file. */
function sharedPlaceProblems(
  teams: readonly TeamSetup[],
  locateOf: (team: TeamSetup) => Locate,
): Problem[] {
  const problems: Problem[] = [];
  const seen = new Map<string, TeamSetup>();
  const claim = (team: TeamSetup, key: string, path: string[], what: string, advice: string) => {
    const first = seen.get(key);
    if (first === undefined) {
      seen.set(key, team);
      return;
    }
    problems.push({
      place: locateOf(team)(path),
      standalone: true,
      message: `${what} is ${teamLabel(first)}'s too; ${advice}`,
      team: { index: team.index, name: team.name },
    });
  };
  for (const team of teams) {
    const { warehouse, files, audit } = team.config;
    const target = warehouse.target;
    const sqliteFile = sqliteFileOf(target);
    if (sqliteFile !== undefined) {
      claim(
        team,
        `sqlite ${resolve(sqliteFile)}`,
        ['warehouse', 'url'],
        `the SQLite file ${sqliteFile}`,
        'give each team a file of its own (warehouse: { url: ./NAME.db })',
      );
    } else if (isPostgresTarget(target)) {
      claim(
        team,
        `postgres ${databaseOf(target.connectionString)} ${warehouse.schema}`,
        ['warehouse', 'schema'],
        `the schema ${warehouse.schema} of PostgreSQL database ${databaseOf(target.connectionString)}`,
        'give each team a schema of its own (warehouse: { schema: NAME })',
      );
    }
    if (files.enabled && files.dir !== undefined) {
      claim(
        team,
        `files ${placeKey(files.dir)}`,
        ['files', 'dir'],
        `the blob store ${files.dir}`,
        'give each team a folder or bucket prefix of its own (files: { dir: … }): a run clears the unfinished downloads and uploads there when it starts',
      );
    }
    if (team.config.metrics.textfile !== undefined) {
      claim(
        team,
        `textfile ${resolve(team.config.metrics.textfile)}`,
        ['metrics', 'textfile'],
        `the metrics textfile ${team.config.metrics.textfile}`,
        "give each team a file of its own (metrics: { textfile: …/ocs-sync-NAME.prom }): each run replaces the file with its team's metrics",
      );
    }
    if (audit.checkpointFile !== undefined) {
      claim(
        team,
        `checkpoints ${placeKey(audit.checkpointFile)}`,
        ['audit', 'checkpoint_file'],
        `the checkpoint file ${audit.checkpointFile}`,
        "give each team a file or bucket prefix of its own: a team's checkpoints sign its own chain",
      );
    }
  }
  problems.push(...nestedPrefixProblems(teams, locateOf));
  return problems;
}

/** A folder's absolute path, or a bucket location's canonical text. */
function placeKey(text: string): string {
  return isBucketText(text) ? parseLocation(text).text : resolve(text);
}

/** Two teams' bucket prefixes where one holds the other: a run of one would clear the other's. */
function nestedPrefixProblems(
  teams: readonly TeamSetup[],
  locateOf: (team: TeamSetup) => Locate,
): Problem[] {
  const problems: Problem[] = [];
  const places: Array<{ team: TeamSetup; path: string[]; location: Location }> = [];
  for (const team of teams) {
    const { files, audit } = team.config;
    const named: Array<[string[], string | undefined]> = [
      [['files', 'dir'], files.enabled ? files.dir : undefined],
      [['audit', 'checkpoint_file'], audit.checkpointFile],
    ];
    for (const [path, text] of named) {
      if (text !== undefined && isBucketText(text)) {
        places.push({ team, path, location: parseLocation(text) });
      }
    }
  }
  places.forEach((place, index) => {
    for (const other of places.slice(0, index)) {
      if (other.team === place.team || other.location.text === place.location.text) continue;
      if (!locationsOverlap(place.location, other.location)) continue;
      problems.push({
        place: locateOf(place.team)(place.path),
        standalone: true,
        message: `${place.location.text} and ${teamLabel(other.team)}'s ${other.location.text} are one inside the other; give each team a prefix of its own beside the others (s3://BUCKET/TEAM/…)`,
        team: { index: place.team.index, name: place.team.name },
      });
    }
  });
  return problems;
}

/** host:port/database of a PostgreSQL URL (who connects does not make it another database). */
function databaseOf(connectionString: string): string {
  const url = new URL(connectionString);
  const host = (url.hostname || url.searchParams.get('host') || 'localhost').toLowerCase();
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || url.username;
  return `${host}:${url.port || '5432'}/${database}`;
}

function describe(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * The team's API key, read from where its entry says (the environment or a file), when a command
 * needs it: each run reads it afresh, so a rotated key file is picked up. ConfigError names the
 * team and the source, never the key.
 */
export function readApiKey(
  team: Pick<TeamSetup, 'name' | 'index' | 'apiKey'>,
  env: Readonly<Record<string, string | undefined>>,
  /** Told when others than the owner may read the key's file. */
  warn?: (message: string) => void,
): string {
  const who = teamLabel(team);
  const source = team.apiKey;
  if (source === undefined) {
    throw new ConfigError([
      `${who} has no API key: name the environment variable that holds it (api_key_env) or a file (api_key_file)`,
    ]);
  }
  if ('env' in source) {
    const key = env[source.env]?.trim();
    if (!key) {
      throw new ConfigError([
        `${who}.api_key_env: ${variableShown(source.env)} is not set (or empty); set it to the API key of one of the team's admins`,
      ]);
    }
    return key;
  }
  let text: string;
  try {
    text = readKeyFile(source.file, 'API key file');
  } catch (error) {
    throw new ConfigError([`${who}.api_key_file: ${describeError(error)}`]);
  }
  if (warn) warnIfExposed(source.file, 'API key file', warn);
  const key = text.trim();
  if (key === '') throw new ConfigError([`${who}.api_key_file: ${source.file} is empty`]);
  return key;
}

/** A team's settings with its API key read (for a command that talks to its server). */
export function withApiKey(
  team: TeamSetup,
  env: Readonly<Record<string, string | undefined>>,
  warn?: (message: string) => void,
): Config {
  return { ...team.config, apiKey: readApiKey(team, env, warn) };
}
