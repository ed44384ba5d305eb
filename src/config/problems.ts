/**
 * The wording of config validation, in one place: a value of the wrong type or out of range
 * (with the setting's allowed values), an unknown key (with a "did you mean"), a misspelt
 * environment variable, and the rules that span keys. A value's own check (a URL, a cron
 * expression, a PEM) sits beside its setting in the section's file and words its problem to
 * follow the setting's name; a source's own faults (a file that cannot be read, bad YAML, a key
 * that may come only from the environment) are reported where it is read, in load.ts. Problems
 * are reported all at once, those in the file first by line, and no secret ever appears in them.
 */
import type { z } from 'zod';
import { closest } from '../did-you-mean.js';
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

/**
 * The place a problem names: "file.yaml:12: http.max_attempts", "OCS_PAGE_SIZE (page_size)",
 * "page_size (command-line flag)", "file.yaml:20: teams[1] (malawi).warehouse.url".
 */
export type Label = (segments: readonly (string | number)[]) => string;

export function placeLabel(
  segments: readonly (string | number)[],
  origin: Origin,
  /** `FILE:LINE` of the value; for a team's value, of its place in the team's entry. */
  fileLocation: string,
): string {
  const shown = displayPath(segments);
  switch (origin.kind) {
    case 'file':
      return `${fileLocation}: ${shown}`;
    case 'team':
      return `${fileLocation}: ${teamLabel(origin.index, origin.name)}.${shown}${origin.via ? ` (from ${origin.via})` : ''}`;
    case 'env':
      return `${origin.variable} (${shown})`;
    case 'flag':
      return `${shown} (command-line flag)`;
    default:
      return shown;
  }
}

/** `teams[1] (malawi)`, or `teams[1]` for an entry without a usable name. */
export function teamLabel(index: number, name: string | undefined): string {
  return `teams[${index}]${name === undefined ? '' : ` (${name})`}`;
}

export function displayPath(segments: readonly (string | number)[]): string {
  let text = '';
  for (const segment of segments) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text || '(top level)';
}

function settingFor(segments: readonly (string | number)[]) {
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
): string[] {
  const problems: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('OCS_') || known.has(name) || env[name] === undefined) continue;
    const suggestion = closest(name, [...known], 2);
    if (suggestion !== undefined && (env[suggestion] ?? '').trim() === '') {
      problems.push(
        `${name} is not a variable ocs-sync reads; did you mean ${suggestion}? (the value is not shown)`,
      );
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
export function issueProblems(issue: z.core.$ZodIssue, merged: Tree, label: Label): string[] {
  const segments = issue.path.filter(
    (segment): segment is string | number => typeof segment !== 'symbol',
  );
  if (issue.code === 'unrecognized_keys') {
    const parent = segments.filter((segment) => typeof segment === 'string').join('.');
    return issue.keys.map(
      (key) => `${label([...segments, key])} is not a known key; ${unknownKeyAdvice(parent, key)}`,
    );
  }
  if (issue.code === 'custom' && issue.params?.wrongType !== true) {
    return [`${label(segments)} ${issue.message}`];
  }
  const setting = settingFor(segments);
  const path = segments.filter((segment) => typeof segment === 'string').join('.');
  const value = getAt(merged, segments);
  if (setting?.secret) {
    return [`${label(segments)} must be ${setting.allowed} (the value is not shown)`];
  }
  if (setting === undefined) {
    // A section given as something other than a mapping, e.g. `http: 5`.
    const keys = SECTION_KEYS.get(path);
    if (keys !== undefined) {
      return [
        `${label(segments)} must be a mapping with keys ${keys.join(', ')}; got ${showValue(path, value)}`,
      ];
    }
    return [`${label(segments)} is not valid: ${issue.message}`];
  }
  // An item of a list or a mapping has a more precise place than the setting.
  const shown = showValue(setting.path, value);
  return [`${label(segments)} must be ${setting.allowed}; got ${shown}`];
}

/**
 * Rules that span keys, and the keys a command needs (`needs.server`: it talks to the server).
 * `teamApiKey` is set for a team of a `teams:` list: whether its entry says where its key is
 * (its key is read when needed, never merged).
 */
export function crossKeyProblems(
  merged: Tree,
  needs: { server: boolean },
  label: Label,
  teamApiKey?: boolean,
): string[] {
  const problems: string[] = [];
  const baseUrl = merged.base_url;
  const apiKey = teamApiKey === undefined ? merged.api_key : teamApiKey ? 'set' : undefined;

  if (needs.server) {
    if (baseUrl === undefined) {
      problems.push(
        'base_url is required for this command: set OCS_BASE_URL, or base_url in the config file (e.g. https://chat.example.org)',
      );
    }
    if (apiKey === undefined && teamApiKey === undefined) {
      problems.push(
        "api_key is required for this command: set OCS_API_KEY (the environment is the usual place for it) to the API key of one of the team's admins",
      );
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
      problems.push(
        `${label(['base_url'])} uses plain http:// to ${url.hostname}, which is not a loopback address, so the API key would cross the network unencrypted; use https://, or set allow_insecure_http: true (OCS_ALLOW_INSECURE_HTTP=true) if that network is trusted`,
      );
    }
  }

  const resources = merged.resources;
  if (Array.isArray(resources) && resources.length === 0) {
    problems.push(
      `${label(['resources'])} is an empty list, which would sync nothing; remove it to sync every resource of the manifest, or name the resources to sync`,
    );
  }
  if (Array.isArray(resources) && Array.isArray(merged.exclude_resources)) {
    const excluded = new Set(merged.exclude_resources);
    const both = resources.filter((name) => excluded.has(name));
    if (both.length > 0) {
      problems.push(
        `${label(['exclude_resources'])} names ${both.map((name) => JSON.stringify(name)).join(', ')}, which resources also lists; name each resource in only one of them`,
      );
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
          problems.push(
            `${label(['secrets', 'resources', name])} is not a resource name; keys of secrets.resources are resource names (lowercase letters, digits and _), each mapped to ${SECRET_POLICIES.join(', ')}`,
          );
        }
        if (policy === 'reseal') resealers.push(`secrets.resources.${name}`);
      }
    }
    if (resealers.length > 0 && secrets.archive_public_key === undefined) {
      problems.push(
        `${resealers.join(', ')} ${resealers.length === 1 ? 'asks' : 'ask'} for reseal, which needs secrets.archive_public_key (OCS_ARCHIVE_PUBLIC_KEY): the base64 of the 32-byte X25519 public key to seal to`,
      );
    }
  }

  if (merged.private_key !== undefined && merged.private_key_file !== undefined) {
    problems.push(
      `${label(['private_key'])} and ${label(['private_key_file'])} are both set; give the private key only one way`,
    );
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
    problems.push(
      'files.dir (OCS_FILES_DIR) must be set with a PostgreSQL warehouse: the folder (or s3://BUCKET/PREFIX) where file contents are kept; or set files.enabled: false (OCS_FILES_ENABLED=false) to back up file metadata only',
    );
  }

  const audit = merged.audit;
  if (isPlainObject(audit)) {
    const signing = audit.signing_key_file !== undefined;
    const checkpoints = audit.checkpoint_file !== undefined;
    if (audit.enabled !== true && (signing || checkpoints)) {
      problems.push(
        `${label(['audit', signing ? 'signing_key_file' : 'checkpoint_file'])} is set but audit.enabled is not: set audit.enabled: true (OCS_AUDIT=true) to keep the audit chain, or remove it`,
      );
    } else if (signing && !checkpoints) {
      problems.push(
        `${label(['audit', 'signing_key_file'])} is set without audit.checkpoint_file (OCS_AUDIT_CHECKPOINT_FILE): name the file each run's signed checkpoint is appended to, and ship it off this machine`,
      );
    } else if (checkpoints && !signing) {
      problems.push(
        `${label(['audit', 'checkpoint_file'])} is set without audit.signing_key_file (OCS_AUDIT_SIGNING_KEY_FILE): checkpoints are signed; create a key with \`ocs-sync keygen --signing --out DIR\``,
      );
    }
  }

  const retention = isPlainObject(audit) ? audit.checkpoint_retention : undefined;
  const retentionKeys = isPlainObject(retention)
    ? ['mode', 'days'].filter((key) => retention[key] !== undefined)
    : [];
  if (retentionKeys.length === 1) {
    const missing = retentionKeys[0] === 'mode' ? 'days' : 'mode';
    problems.push(
      `${label(['audit', 'checkpoint_retention', retentionKeys[0]!])} is set without audit.checkpoint_retention.${missing}: give both, the mode (compliance or governance) and the days each checkpoint stays locked`,
    );
  }
  if (
    isPlainObject(audit) &&
    retentionKeys.length > 0 &&
    !(typeof audit.checkpoint_file === 'string' && isBucketText(audit.checkpoint_file))
  ) {
    problems.push(
      `${label(['audit', 'checkpoint_retention'])} asks for Object Lock retention, which only a bucket gives: set audit.checkpoint_file (OCS_AUDIT_CHECKPOINT_FILE) to s3://BUCKET/PREFIX/, or remove audit.checkpoint_retention`,
    );
  }

  const storage = merged.object_storage;
  if (isPlainObject(storage) && storage.kms_key_id !== undefined && storage.sse !== 'aws:kms') {
    problems.push(
      `${label(['object_storage', 'kms_key_id'])} is set but object_storage.sse is not aws:kms: set sse: aws:kms (OCS_S3_SSE) to encrypt with that KMS key, or remove kms_key_id`,
    );
  }

  const http = merged.http;
  if (
    isPlainObject(http) &&
    Number.isInteger(http.min_retry_delay_ms) &&
    Number.isInteger(http.max_retry_delay_seconds) &&
    (http.min_retry_delay_ms as number) > (http.max_retry_delay_seconds as number) * 1000
  ) {
    problems.push(
      `${label(['http', 'min_retry_delay_ms'])} (${String(http.min_retry_delay_ms)} ms) is longer than http.max_retry_delay_seconds (${String(http.max_retry_delay_seconds)} s); the minimum delay must not exceed the maximum`,
    );
  }
  return problems;
}

/** Problems as reported: each once, those in the file first by line, no secret in any. */
export function reportedProblems(
  problems: string[],
  fileName: string,
  merged: Tree | readonly Tree[],
): string[] {
  const trees = Array.isArray(merged) ? merged : [merged as Tree];
  return trees.reduce<string[]>(
    (scrubbed, tree) => scrubSecrets(scrubbed, tree),
    inFileOrder(dedupe(problems), fileName),
  );
}

/** Problems located in the file first, by line (as someone fixing them reads it), then the rest. */
function inFileOrder(problems: string[], fileName: string): string[] {
  const lineOf = (problem: string): number | undefined => {
    if (!problem.startsWith(`${fileName}:`)) return undefined;
    const match = /^:(\d+):/.exec(problem.slice(fileName.length));
    return match ? Number(match[1]) : 0;
  };
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

function dedupe(problems: string[]): string[] {
  return [...new Set(problems)];
}

/** A last guard: no problem text may carry a secret, whatever produced it. */
function scrubSecrets(problems: string[], merged: Tree): string[] {
  const secrets = new Set<string>();
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
  if (secrets.size === 0) return problems;
  const ordered = [...secrets].sort((a, b) => b.length - a.length);
  return problems.map((problem) =>
    ordered.reduce((text, secret) => text.split(secret).join('[redacted]'), problem),
  );
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
