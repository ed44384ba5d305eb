/**
 * How the sources of the configuration are layered: text from the environment or a flag turned
 * into a setting's type, flags' camelCase turned into the file's snake_case, and the deep merge
 * of one layer over another that records where each value came from. Pure.
 */
import { recordByName } from '../names.js';
import { parseExcludeFieldsText } from './exclude-fields.js';
import type { Origin, Problem } from './problems.js';
import { SETTINGS_BY_PATH } from './schema.js';
import { camelToSnake, isPlainObject, type TextKind, type Tree } from './setting.js';

export function setAt(tree: Tree, segments: readonly string[], value: unknown): void {
  let node = tree;
  for (const segment of segments.slice(0, -1)) {
    if (!isPlainObject(node[segment])) node[segment] = recordByName();
    node = node[segment] as Tree;
  }
  node[segments[segments.length - 1]!] = value;
}

/**
 * Deep-merges `layer` into `target`: mappings merge key by key, anything else (lists included)
 * replaces. `null` means "not set" (YAML `key:` with nothing after it) and leaves the lower value.
 * `origin` undefined keeps origins recorded by the caller.
 */
export function mergeInto(
  target: Tree,
  layer: Tree,
  origin: Origin | undefined,
  prefix: string[],
  origins: Map<string, Origin>,
): void {
  for (const [key, value] of Object.entries(layer)) {
    if (value === undefined || value === null) continue;
    const path = [...prefix, key];
    if (origin) origins.set(path.join('.'), origin);
    if (isPlainObject(value)) {
      if (!isPlainObject(target[key])) target[key] = recordByName();
      mergeInto(target[key] as Tree, value, origin, path, origins);
    } else {
      target[key] = Array.isArray(value) ? [...(value as unknown[])] : value;
    }
  }
}

const TRUE_WORDS = new Set(['true', 'yes', 'on', '1']);
const FALSE_WORDS = new Set(['false', 'no', 'off', '0']);

/** Text from the environment or a CLI flag, as the setting's type; left as text if it does not
 * convert, so validation reports it with the setting's allowed values. */
export function fromText(kind: TextKind, raw: string): unknown {
  const text = raw.trim();
  const word = text.toLowerCase();
  switch (kind) {
    case 'integer':
      return /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text) ? Number(text) : text;
    case 'boolean':
      if (TRUE_WORDS.has(word)) return true;
      if (FALSE_WORDS.has(word)) return false;
      return text;
    case 'list':
      return splitList(text);
    case 'history':
      if (TRUE_WORDS.has(word)) return true;
      if (FALSE_WORDS.has(word)) return false;
      return splitList(text);
    case 'field_map':
      return parseExcludeFieldsText(text);
    case 'text':
      return text;
  }
}

function splitList(text: string): string[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

export function flagsToSnake(flags: Tree, prefix: string[], problems: Problem[]): Tree {
  const out: Tree = recordByName();
  // Keys of secrets.resources and exclude_fields are resource names, not setting names.
  const isResourceMap = ['secrets.resources', 'exclude_fields'].includes(prefix.join('.'));
  for (const [key, value] of Object.entries(flags)) {
    if (value === undefined) continue;
    const name = isResourceMap ? key : camelToSnake(key);
    const path = [...prefix, name];
    const setting = SETTINGS_BY_PATH.get(path.join('.'));
    if (setting?.envOnly) {
      problems.push({
        place: { in: 'setting', path },
        message: `may only come from the environment (${setting.env}); it is not accepted as a command-line flag`,
      });
      continue;
    }
    if (isPlainObject(value) && !isResourceMap) {
      out[name] = flagsToSnake(value, path, problems);
    } else if (typeof value === 'string' && setting && setting.kind !== 'text') {
      out[name] = fromText(setting.kind, value);
    } else {
      out[name] = value;
    }
  }
  return out;
}

/** The sources, each as a tree in the file's shape, before they are layered. */
export interface ConfigSources {
  defaults: Tree;
  /** The file's keys (a `teams:` list taken out), when there is a file. */
  file: Tree | undefined;
  env: Tree;
  /** Each environment variable's setting, by dotted path. */
  envOrigins: ReadonlyMap<string, Origin>;
  flags: Tree | undefined;
}

/**
 * The merged values and where each came from: defaults < file < environment < flags, and with a
 * team, its entry just below the flags (a team's own settings beat the shared ones, wherever
 * those come from; a flag given for one run beats everything). A team's private key replaces a
 * shared one given the other way (a file for a PEM, or the reverse).
 */
export function layerSources(
  sources: ConfigSources,
  team?: { entry: Tree; origin: Origin },
): { merged: Tree; origins: Map<string, Origin> } {
  // Without a prototype at every level: a key `__proto__` or `constructor` in the file is a key.
  const merged: Tree = recordByName();
  const origins = new Map<string, Origin>();
  mergeInto(merged, sources.defaults, { kind: 'default' }, [], origins);
  if (sources.file !== undefined) mergeInto(merged, sources.file, { kind: 'file' }, [], origins);
  for (const [path, origin] of sources.envOrigins) origins.set(path, origin);
  mergeInto(merged, sources.env, undefined, [], origins);
  if (team !== undefined) {
    const ownKey = ['private_key', 'private_key_file'].filter((key) => team.entry[key] != null);
    if (ownKey.length > 0) {
      delete merged.private_key;
      delete merged.private_key_file;
    }
    mergeInto(merged, team.entry, team.origin, [], origins);
  }
  if (sources.flags !== undefined) mergeInto(merged, sources.flags, { kind: 'flag' }, [], origins);
  return { merged, origins };
}

/** The origin of a value: that of its nearest ancestor path that has one. */
export function originFinder(
  origins: ReadonlyMap<string, Origin>,
): (segments: readonly (string | number)[]) => Origin {
  return (segments) => {
    for (let length = segments.length; length > 0; length--) {
      const origin = origins.get(segments.slice(0, length).join('.'));
      if (origin) return origin;
    }
    return { kind: 'default' };
  };
}
