/**
 * The wording of config validation, in one place: a value of the wrong type or out of range
 * (with the setting's allowed values), an unknown key (with a "did you mean"), a misspelt
 * environment variable, and the rules that span keys. A value's own check (a URL, a cron
 * expression, a PEM) sits beside its setting in the section's file and words its problem to
 * follow the setting's name; a source's own faults (a file that cannot be read, bad YAML, a key
 * that may come only from the environment) are reported where it is read, in load.ts. A problem
 * is data where it is found (its place: a key and line of the file, a team's entry, a variable,
 * a flag) and is worded once, in `problemText`; they are reported all at once, those in the file
 * first by line, and no secret ever appears in them.
 */
import type { z } from 'zod';
import { closest } from '../did-you-mean.js';
import { ConfigError } from '../errors.js';
import { SECRET_POLICIES } from '../sealing/policy-names.js';
import { redactUrl } from '../warehouse/url.js';
import { isBucketText } from '../storage/location.js';
import { SECTION_KEYS, SETTINGS, SETTINGS_BY_PATH } from './schema.js';
import { normalizePem } from './secrets.js';
import { checkBaseUrl, isLoopbackHost } from './server.js';
import { camelToSnake, getAt, isPlainObject, type Tree } from './setting.js';
import { isResourceName } from './sync.js';

/** Where a value came from (later sources win): see load.ts. */
export type Origin =
  | { kind: 'default' }
  | { kind: 'file' }
  | { kind: 'env'; variable: string }
  | { kind: 'flag' }
  /** A team's entry in the file's `teams:` list (`via`: the variable a value was read from). */
  | { kind: 'team'; index: number; name: string | undefined; via?: string };

/** A setting's path in the file's shape: `['http', 'max_attempts']`, `['resources', 2]`. */
export type Segments = readonly (string | number)[];

/** A team of a `teams:` list: its place in the list, and its name when it has a usable one. */
export interface TeamRef {
  index: number;
  name: string | undefined;
}

/** Where in the config file a key is: the file's name, and the key's line when known. */
export interface FileSpot {
  file: string;
  line?: number;
}

/** The spot of a path of the file (`['teams', 1, 'warehouse']`), found in its parsed lines. */
export type SpotOf = (segments: Segments) => FileSpot;

/**
 * Where a problem is, as data from where it is found until `problemText` words it:
 * "file.yaml:12: http.max_attempts", "OCS_PAGE_SIZE (page_size)",
 * "page_size (command-line flag)", "file.yaml:20: teams[1] (malawi).warehouse.url".
 */
export type Place =
  /** A key of the config file (`path` empty: the file, or a line of it, as a whole). */
  | ({ in: 'file'; path: Segments } & FileSpot)
  /** A key of a team's entry in the file's `teams:` list (`via`: the variable its value came from). */
  | ({ in: 'team'; team: TeamRef; path: Segments; via?: string } & FileSpot)
  /** An environment variable (`path`: the setting it gives, empty to name the variable alone). */
  | { in: 'env'; variable: string; path: Segments }
  | { in: 'flag'; path: Segments }
  /** A setting itself, wherever it is given or missing: a default, a key a command needs. */
  | { in: 'setting'; path: Segments };

/** One problem of a configuration, as found: formatted only when reported (`problemText`). */
export interface Problem {
  /** Where it is; none for a problem of no one place. */
  place?: Place;
  /** What is wrong, worded to follow the place's name ("must be …; got 0"); all of it without one. */
  message: string;
  /** The message is a sentence of its own after the place and a colon, not words following it. */
  standalone?: boolean;
  /** The team of a `teams:` list it is about, named first when its place does not name it. */
  team?: TeamRef;
}

/** The place of a problem of the merged values, by the path of the value at fault. */
export type Locate = (segments: Segments) => Place;

/** Where a value of the merged configuration is, by where it came from. */
export function placeOf(segments: Segments, origin: Origin, spotOf: SpotOf): Place {
  switch (origin.kind) {
    case 'file':
      return { in: 'file', ...spotOf(segments), path: segments };
    case 'team': {
      const team = { index: origin.index, name: origin.name };
      const spot = spotOf(['teams', origin.index, ...segments]);
      return origin.via === undefined
        ? { in: 'team', ...spot, team, path: segments }
        : { in: 'team', ...spot, team, path: segments, via: origin.via };
    }
    case 'env':
      return { in: 'env', variable: origin.variable, path: segments };
    case 'flag':
      return { in: 'flag', path: segments };
    default:
      return { in: 'setting', path: segments };
  }
}

/** `file.yaml:12`, or `file.yaml` when the line is not known. */
export function spotText(spot: FileSpot): string {
  return `${spot.file}${spot.line === undefined ? '' : `:${spot.line}`}`;
}

/** A place as people read it; see `Place`. */
export function placeText(place: Place): string {
  const shown = displayPath(place.path);
  switch (place.in) {
    case 'file':
      return place.path.length === 0 ? `${spotText(place)}:` : `${spotText(place)}: ${shown}`;
    case 'team':
      return `${spotText(place)}: ${teamLabel(place.team)}${place.path.length === 0 ? '' : `.${shown}`}${place.via === undefined ? '' : ` (from ${place.via})`}`;
    case 'env':
      return place.path.length === 0 ? place.variable : `${place.variable} (${shown})`;
    case 'flag':
      return `${shown} (command-line flag)`;
    case 'setting':
      return shown;
  }
}

/** A problem as people read it: its team when its place does not name it, its place, what is wrong. */
export function problemText(problem: Problem): string {
  const { place, message } = problem;
  const text =
    place === undefined
      ? message
      : `${placeText(place)}${problem.standalone === true && !endsWithColon(place) ? ':' : ''} ${message}`;
  return problem.team !== undefined && place?.in !== 'team'
    ? `${teamLabel(problem.team)}: ${text}`
    : text;
}

/** The file, or a line of it, as a whole: its text ends with a colon already. */
function endsWithColon(place: Place): boolean {
  return place.in === 'file' && place.path.length === 0;
}

/** `teams[1] (malawi)`, or `teams[1]` for an entry without a usable name. */
export function teamLabel(team: TeamRef): string {
  return `teams[${team.index}]${team.name === undefined ? '' : ` (${team.name})`}`;
}

export function displayPath(segments: Segments): string {
  let text = '';
  for (const segment of segments) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text || '(top level)';
}

function settingFor(segments: Segments) {
  const names = segments.filter((segment): segment is string => typeof segment === 'string');
  for (let length = names.length; length > 0; length--) {
    const setting = SETTINGS_BY_PATH.get(names.slice(0, length).join('.'));
    if (setting) return setting;
  }
  return undefined;
}

/** `OCS_API_KEYS` when `OCS_API_KEY` is unset is almost surely a typo worth stopping for. */
export function envTypoProblems(
  env: Readonly<Record<string, string | undefined>>,
  known: ReadonlySet<string>,
): Problem[] {
  const problems: Problem[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('OCS_') || known.has(name) || env[name] === undefined) continue;
    const suggestion = closest(name, [...known], 2);
    if (suggestion !== undefined && (env[suggestion] ?? '').trim() === '') {
      problems.push({
        place: { in: 'env', variable: name, path: [] },
        message: `is not a variable ocs-sync reads; did you mean ${suggestion}? (the value is not shown)`,
      });
    }
  }
  return problems;
}

/** "did you mean …" for an unknown key, or the keys allowed at that place. */
function unknownKeyAdvice(parent: string, key: string): string {
  const allowed = SECTION_KEYS.get(parent) ?? [];
  const normalized = camelToSnake(key)
    .replace(/[-\s]+/g, '_')
    .toLowerCase();
  if (normalized !== key && allowed.includes(normalized)) {
    return `did you mean ${JSON.stringify(normalized)}? (keys are snake_case)`;
  }
  const near = closest(normalized, allowed, normalized.length <= 4 ? 1 : 2);
  if (near !== undefined) return `did you mean ${JSON.stringify(near)}?`;
  // The right key in the wrong section, e.g. top-level `url:` for `warehouse.url`.
  const elsewhere = [
    ...SETTINGS.filter((setting) => !setting.envOnly).map((setting) => setting.path),
    ...SECTION_KEYS.keys(),
  ].find((path) => path !== '' && path.split('.').pop() === normalized);
  if (elsewhere !== undefined) return `did you mean ${elsewhere}? (it belongs there)`;
  return `allowed${parent === '' ? '' : ` under ${parent}`}: ${allowed.join(', ')}`;
}

/** The problems of one issue zod found in the merged values. */
export function issueProblems(issue: z.core.$ZodIssue, merged: Tree, locate: Locate): Problem[] {
  const segments = issue.path.filter(
    (segment): segment is string | number => typeof segment !== 'symbol',
  );
  if (issue.code === 'unrecognized_keys') {
    const parent = segments.filter((segment) => typeof segment === 'string').join('.');
    return issue.keys.map((key) => ({
      place: locate([...segments, key]),
      message: `is not a known key; ${unknownKeyAdvice(parent, key)}`,
    }));
  }
  const place = locate(segments);
  if (issue.code === 'custom' && issue.params?.wrongType !== true) {
    return [{ place, message: issue.message }];
  }
  const setting = settingFor(segments);
  const path = segments.filter((segment) => typeof segment === 'string').join('.');
  const value = getAt(merged, segments);
  if (setting?.secret) {
    return [{ place, message: `must be ${setting.allowed} (the value is not shown)` }];
  }
  if (setting === undefined) {
    // A section given as something other than a mapping, e.g. `http: 5`.
    const keys = SECTION_KEYS.get(path);
    if (keys !== undefined) {
      return [
        {
          place,
          message: `must be a mapping with keys ${keys.join(', ')}; got ${showValue(path, value)}`,
        },
      ];
    }
    return [{ place, message: `is not valid: ${issue.message}` }];
  }
  // An item of a list or a mapping has a more precise place than the setting.
  const shown = showValue(setting.path, value);
  return [{ place, message: `must be ${setting.allowed}; got ${shown}` }];
}

/**
 * Rules that span keys, and the keys a command needs (`needs.server`: it talks to the server).
 * `teamApiKey` is set for a team of a `teams:` list: whether its entry says where its key is
 * (its key is read when needed, never merged).
 */
export function crossKeyProblems(
  merged: Tree,
  needs: { server: boolean },
  locate: Locate,
  teamApiKey?: boolean,
): Problem[] {
  const problems: Problem[] = [];
  const baseUrl = merged.base_url;
  const apiKey = teamApiKey === undefined ? merged.api_key : teamApiKey ? 'set' : undefined;

  if (needs.server) {
    if (baseUrl === undefined) {
      problems.push({
        place: { in: 'setting', path: ['base_url'] },
        message:
          'is required for this command: set OCS_BASE_URL, or base_url in the config file (e.g. https://chat.example.org)',
      });
    }
    if (apiKey === undefined && teamApiKey === undefined) {
      problems.push({
        place: { in: 'setting', path: ['api_key'] },
        message:
          "is required for this command: set OCS_API_KEY (the environment is the usual place for it) to the API key of one of the team's admins",
      });
    }
  }

  // The key travels in a header: refuse to send it in clear text across a network.
  if (
    typeof baseUrl === 'string' &&
    checkBaseUrl(baseUrl) === undefined &&
    (typeof apiKey === 'string' || needs.server) &&
    merged.allow_insecure_http !== true
  ) {
    const url = new URL(baseUrl);
    if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) {
      problems.push({
        place: locate(['base_url']),
        message: `uses plain http:// to ${url.hostname}, which is not a loopback address, so the API key would cross the network unencrypted; use https://, or set allow_insecure_http: true (OCS_ALLOW_INSECURE_HTTP=true) if that network is trusted`,
      });
    }
  }

  const resources = merged.resources;
  if (Array.isArray(resources) && resources.length === 0) {
    problems.push({
      place: locate(['resources']),
      message:
        'is an empty list, which would sync nothing; remove it to sync every resource of the manifest, or name the resources to sync',
    });
  }
  if (Array.isArray(resources) && Array.isArray(merged.exclude_resources)) {
    const excluded = new Set(merged.exclude_resources);
    const both = resources.filter((name) => excluded.has(name));
    if (both.length > 0) {
      problems.push({
        place: locate(['exclude_resources']),
        message: `names ${both.map((name) => JSON.stringify(name)).join(', ')}, which resources also lists; name each resource in only one of them`,
      });
    }
  }

  const secrets = merged.secrets;
  if (isPlainObject(secrets)) {
    const perResource = secrets.resources;
    const resealers: string[] = [];
    if (secrets.default === 'reseal') resealers.push('secrets.default');
    if (isPlainObject(perResource)) {
      for (const [name, policy] of Object.entries(perResource)) {
        if (!isResourceName(name)) {
          problems.push({
            place: locate(['secrets', 'resources', name]),
            message: `is not a resource name; keys of secrets.resources are resource names (lowercase letters, digits and _), each mapped to ${SECRET_POLICIES.join(', ')}`,
          });
        }
        if (policy === 'reseal') resealers.push(`secrets.resources.${name}`);
      }
    }
    if (resealers.length > 0 && secrets.archive_public_key === undefined) {
      problems.push({
        message: `${resealers.join(', ')} ${resealers.length === 1 ? 'asks' : 'ask'} for reseal, which needs secrets.archive_public_key (OCS_ARCHIVE_PUBLIC_KEY): the base64 of the 32-byte X25519 public key to seal to`,
      });
    }
  }

  if (merged.private_key !== undefined && merged.private_key_file !== undefined) {
    problems.push({
      place: locate(['private_key']),
      message: `and ${placeText(locate(['private_key_file']))} are both set; give the private key only one way`,
    });
  }

  const files = merged.files;
  if (
    needs.server &&
    isPlainObject(files) &&
    files.enabled !== false &&
    files.dir === undefined &&
    isPlainObject(merged.warehouse) &&
    typeof merged.warehouse.url === 'string' &&
    /^postgres(ql)?:/i.test(merged.warehouse.url.trim())
  ) {
    problems.push({
      message:
        'files.dir (OCS_FILES_DIR) must be set with a PostgreSQL warehouse: the folder (or s3://BUCKET/PREFIX) where file contents are kept; or set files.enabled: false (OCS_FILES_ENABLED=false) to back up file metadata only',
    });
  }

  const audit = merged.audit;
  if (isPlainObject(audit)) {
    const signing = audit.signing_key_file !== undefined;
    const checkpoints = audit.checkpoint_file !== undefined;
    if (audit.enabled !== true && (signing || checkpoints)) {
      problems.push({
        place: locate(['audit', signing ? 'signing_key_file' : 'checkpoint_file']),
        message:
          'is set but audit.enabled is not: set audit.enabled: true (OCS_AUDIT=true) to keep the audit chain, or remove it',
      });
    } else if (signing && !checkpoints) {
      problems.push({
        place: locate(['audit', 'signing_key_file']),
        message:
          "is set without audit.checkpoint_file (OCS_AUDIT_CHECKPOINT_FILE): name the file each run's signed checkpoint is appended to, and ship it off this machine",
      });
    } else if (checkpoints && !signing) {
      problems.push({
        place: locate(['audit', 'checkpoint_file']),
        message:
          'is set without audit.signing_key_file (OCS_AUDIT_SIGNING_KEY_FILE): checkpoints are signed; create a key with `ocs-sync keygen --signing --out DIR`',
      });
    }
  }

  const retention = isPlainObject(audit) ? audit.checkpoint_retention : undefined;
  const retentionKeys = isPlainObject(retention)
    ? ['mode', 'days'].filter((key) => retention[key] !== undefined)
    : [];
  if (retentionKeys.length === 1) {
    const missing = retentionKeys[0] === 'mode' ? 'days' : 'mode';
    problems.push({
      place: locate(['audit', 'checkpoint_retention', retentionKeys[0]!]),
      message: `is set without audit.checkpoint_retention.${missing}: give both, the mode (compliance or governance) and the days each checkpoint stays locked`,
    });
  }
  if (
    isPlainObject(audit) &&
    retentionKeys.length > 0 &&
    !(typeof audit.checkpoint_file === 'string' && isBucketText(audit.checkpoint_file))
  ) {
    problems.push({
      place: locate(['audit', 'checkpoint_retention']),
      message:
        'asks for Object Lock retention, which only a bucket gives: set audit.checkpoint_file (OCS_AUDIT_CHECKPOINT_FILE) to s3://BUCKET/PREFIX/, or remove audit.checkpoint_retention',
    });
  }

  const storage = merged.object_storage;
  if (isPlainObject(storage) && storage.kms_key_id !== undefined && storage.sse !== 'aws:kms') {
    problems.push({
      place: locate(['object_storage', 'kms_key_id']),
      message:
        'is set but object_storage.sse is not aws:kms: set sse: aws:kms (OCS_S3_SSE) to encrypt with that KMS key, or remove kms_key_id',
    });
  }

  const http = merged.http;
  if (
    isPlainObject(http) &&
    Number.isInteger(http.min_retry_delay_ms) &&
    Number.isInteger(http.max_retry_delay_seconds) &&
    (http.min_retry_delay_ms as number) > (http.max_retry_delay_seconds as number) * 1000
  ) {
    problems.push({
      place: locate(['http', 'min_retry_delay_ms']),
      message: `(${String(http.min_retry_delay_ms)} ms) is longer than http.max_retry_delay_seconds (${String(http.max_retry_delay_seconds)} s); the minimum delay must not exceed the maximum`,
    });
  }
  return problems;
}

/**
 * The ConfigError of a configuration's problems, the one place they are worded: each reported
 * once, those in the config file first by line (as someone fixing them reads it), then the rest
 * as found, and no secret of the values (`merged`: the one team's, or each team's) in any.
 * `found` holds them as reported, as data.
 */
export class ConfigProblemsError extends ConfigError {
  readonly found: readonly Problem[];

  constructor(problems: readonly Problem[], merged: Tree | readonly Tree[] = []) {
    const scrub = secretScrubber(Array.isArray(merged) ? merged : [merged as Tree]);
    const texts = new Set<string>();
    const found: Problem[] = [];
    for (const problem of inFileOrder(problems)) {
      const text = scrub(problemText(problem));
      if (texts.has(text)) continue;
      texts.add(text);
      found.push({ ...problem, message: scrub(problem.message) });
    }
    super([...texts]);
    this.found = found;
  }
}

/** Problems in the file first, by line, then the rest, each group in the order found. */
function inFileOrder(problems: readonly Problem[]): Problem[] {
  const lineOf = ({ place }: Problem): number | undefined =>
    place?.in === 'file' || place?.in === 'team' ? (place.line ?? 0) : undefined;
  return problems
    .map((problem, index) => ({ problem, index, line: lineOf(problem) }))
    .sort(
      (a, b) =>
        Number(a.line === undefined) - Number(b.line === undefined) ||
        (a.line ?? 0) - (b.line ?? 0) ||
        a.index - b.index,
    )
    .map((entry) => entry.problem);
}

/** A last guard: no problem text may carry a secret, whatever produced it. */
function secretScrubber(trees: readonly Tree[]): (text: string) => string {
  const secrets = new Set<string>();
  for (const merged of trees) {
    for (const path of ['api_key', 'private_key', 'private_key_passphrase']) {
      const value = merged[path];
      if (typeof value !== 'string') continue;
      for (const candidate of [value, value.trim(), normalizePem(value)]) {
        if (candidate.length >= 6) secrets.add(candidate);
      }
      // Each line of a PEM body, should one ever be quoted on its own.
      for (const line of normalizePem(value).split('\n')) {
        if (line.trim().length >= 16 && !line.startsWith('-----')) secrets.add(line.trim());
      }
    }
  }
  const ordered = [...secrets].sort((a, b) => b.length - a.length);
  return (text) =>
    ordered.reduce((scrubbed, secret) => scrubbed.split(secret).join('[redacted]'), text);
}

/** For messages: a value shown briefly, URLs without passwords. */
function showValue(path: string, value: unknown): string {
  if (SETTINGS_BY_PATH.get(path)?.secret) return '(not shown)';
  if (typeof value === 'string' && SETTINGS_BY_PATH.get(path)?.url) {
    value = redactUrl(value);
  }
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
