/**
 * Many teams in one configuration: `teams_at_once` (the section's one setting), the rule for a
 * team's name, which keys belong to a team's entry only and which to the whole daemon only, and
 * the stable assignment of teams to shards (`daemon --shard i/n`). Pure. How a team's entry is
 * layered over the shared settings: fleet.ts.
 */
import { createHash } from 'node:crypto';
import { integer, type SectionValues, type SettingInfo } from './setting.js';

export interface TeamsConfig {
  /** Teams syncing at the same time (daemon, `sync --team all`); the rest wait for a slot. */
  teamsAtOnce: number;
}

export interface TeamsFileValues {
  teams_at_once?: number;
}

export const teamsDefaults = { teams_at_once: 4 } satisfies TeamsFileValues;

export const TEAMS_SETTINGS: readonly SettingInfo[] = [
  {
    path: 'teams_at_once',
    env: 'OCS_TEAMS_AT_ONCE',
    kind: 'integer',
    allowed: 'an integer from 1 to 64',
  },
];

export const teamsFields = { teams_at_once: integer(1, 64) };

export function teamsConfig(values: SectionValues<typeof teamsFields>): TeamsConfig {
  return { teamsAtOnce: values.teams_at_once };
}

/** `--team all`: every team of the configuration. */
export const ALL_TEAMS = 'all';

const TEAM_NAME = /^[a-z][a-z0-9_-]{0,39}$/;

/** The rule, phrased to follow "must be" (docs/operating.md says the same). */
export const TEAM_NAME_RULE =
  'lowercase letters, digits, - and _, starting with a letter, at most 40 characters, and not "all"';

export function isTeamName(name: string): boolean {
  return TEAM_NAME.test(name) && name !== ALL_TEAMS;
}

/** Keys a team's entry may hold that the shared settings never do. */
export const TEAM_ENTRY_KEYS = ['name', 'api_key_env', 'api_key_file'] as const;

/** Settings of the whole process, given once at the top level and never in a team's entry. */
export const PROCESS_SETTINGS = ['teams_at_once', 'log_level', 'health.listen'] as const;

/** A variable name that a shell can set. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * How a message names the variable a setting such as `api_key_env` or `warehouse.url_env` names:
 * as written when it is written as variables are (capitals, digits and _), otherwise not at all,
 * since a key or a URL put there by mistake would be printed for anyone who reads the logs.
 */
export function variableShown(name: string): string {
  return /^[A-Z_][A-Z0-9_]*$/.test(name) ? name : 'the variable it names (not shown)';
}

/** Where a team's API key is read from when it is needed. */
export type ApiKeySource = { env: string } | { file: string };

// ---------------------------------------------------------------------------------------------
// Shards: `daemon --shard i/n` runs the teams whose shard is i.

export interface Shard {
  /** 0 to count - 1. */
  index: number;
  count: number;
}

/**
 * The teams a command runs, when it runs some of a `teams:` list (`--team NAME`, `--teams a,b`,
 * `--shard i/n`): a team it does not run need not have its warehouse URL's variable set in this
 * process (a job or shard is given its own teams' URLs only).
 */
export type TeamChoice = { names: readonly string[] } | { shard: Shard };

export function choosesTeam(choice: TeamChoice | undefined, name: string): boolean {
  if (choice === undefined) return true;
  if ('names' in choice) return choice.names.includes(name);
  return shardOfTeam(name, choice.shard.count) === choice.shard.index;
}

/** `1/3` -> { index: 1, count: 3 }; the problem, phrased to follow the flag's name, otherwise. */
export function parseShard(text: string): Shard | { problem: string } {
  const match = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(text);
  const index = match ? Number(match[1]) : NaN;
  const count = match ? Number(match[2]) : NaN;
  if (!match || !Number.isSafeInteger(count) || count < 1 || count > 1000) {
    return {
      problem: `must be I/N: this shard's number I (from 0) of N shards (1 to 1000), e.g. 0/3; got ${JSON.stringify(text)}`,
    };
  }
  if (index >= count) {
    return { problem: `numbers shards from 0 to ${count - 1}; got ${index}` };
  }
  return { index, count };
}

/**
 * The shard (0..count-1) a team belongs to: Lamping and Veach's jump consistent hash of the first
 * 8 bytes of the SHA-256 of its name. It depends on the name and the number of shards only, so
 * adding or removing a team never moves another, and going from n to n+1 shards moves only the
 * teams the new shard takes (about 1 in n+1).
 */
export function shardOfTeam(name: string, count: number): number {
  let key = createHash('sha256').update(name, 'utf8').digest().readBigUInt64BE(0);
  let bucket = -1;
  let next = 0;
  while (next < count) {
    bucket = next;
    key = (key * 2862933555777941757n + 1n) & 0xffffffffffffffffn;
    next = Math.floor((bucket + 1) * (2 ** 31 / (Number(key >> 33n) + 1)));
  }
  return bucket;
}
