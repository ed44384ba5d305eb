/**
 * A configuration with a `teams:` list: how a team's entry is layered over the shared settings,
 * the problems named with the team and the key at fault, the rules between teams, the API key read
 * from where the entry says, and the stable assignment of teams to shards.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readApiKey, type Fleet } from '../src/config/fleet.js';
import {
  explainConfig,
  parseConfigText,
  resolveConfig,
  resolveSetup,
  type ConfigInputs,
} from '../src/config/load.js';
import { isTeamName, parseShard, shardOfTeam } from '../src/config/teams.js';
import { ConfigError, UsageError } from '../src/errors.js';

const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-teams-config-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const SERVER = { server: true };
const LOCAL = { server: false };

/** The YAML text through the real parser (with its lines), resolved as a file named teams.yaml. */
function inputs(text: string, env: Record<string, string> = {}): ConfigInputs {
  const { file, fileLines } = parseConfigText(text, 'teams.yaml');
  return { file, fileLines, filePath: 'teams.yaml', env };
}

function fleetOf(text: string, env: Record<string, string> = {}, needs = LOCAL): Fleet {
  const setup = resolveSetup(inputs(text, env), needs);
  if (setup.kind !== 'fleet') throw new Error('expected a fleet');
  return setup.fleet;
}

function problemsOf(text: string, env: Record<string, string> = {}, needs = LOCAL): string[] {
  try {
    resolveSetup(inputs(text, env), needs);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError, but the configuration was accepted');
}

const TWO_TEAMS = `
base_url: https://chat.example.org
page_size: 500
schedule: '*/30 * * * *'
teams:
  - name: kenya
    api_key_env: OCS_KENYA_API_KEY
    private_key_file: /run/secrets/kenya/private.pem
    warehouse: { url: ./kenya.db }
  - name: malawi
    base_url: https://other.example.org
    api_key_file: /run/secrets/malawi/api-key
    warehouse: { url: ./malawi.db }
    page_size: 100
    history: true
    http: { max_attempts: 2 }
`;

describe('a teams: list', () => {
  it('gives each team the shared settings with its own entry over them', () => {
    const fleet = fleetOf(TWO_TEAMS, {}, SERVER);
    expect(fleet.teams.map((team) => team.name)).toEqual(['kenya', 'malawi']);
    expect(fleet.teamsAtOnce).toBe(4);
    const [kenya, malawi] = fleet.teams;
    expect(kenya!.config).toMatchObject({
      baseUrl: 'https://chat.example.org',
      pageSize: 500,
      schedule: '*/30 * * * *',
      history: false,
      privateKeyFile: '/run/secrets/kenya/private.pem',
      warehouse: { url: './kenya.db' },
      files: { dir: 'kenya-files' },
    });
    expect(kenya!.config.http.maxAttempts).toBe(6);
    expect(kenya!.apiKey).toEqual({ env: 'OCS_KENYA_API_KEY' });
    expect(malawi!.config).toMatchObject({
      baseUrl: 'https://other.example.org',
      pageSize: 100,
      schedule: '*/30 * * * *',
      history: true,
      privateKeyFile: undefined,
      warehouse: { url: './malawi.db' },
    });
    expect(malawi!.config.http.maxAttempts).toBe(2);
    expect(malawi!.apiKey).toEqual({ file: '/run/secrets/malawi/api-key' });
    // The key is read only when a command needs it.
    expect(kenya!.config.apiKey).toBeUndefined();
  });

  it('puts a team entry over the environment, and command-line flags over both', () => {
    const env = { OCS_PAGE_SIZE: '700', OCS_TEAMS_AT_ONCE: '2', OCS_HISTORY: 'chats' };
    const setup = resolveSetup(
      { ...inputs(TWO_TEAMS, env), flags: { concurrency: 3, pageSize: 50 } },
      LOCAL,
    );
    if (setup.kind !== 'fleet') throw new Error('expected a fleet');
    const [kenya, malawi] = setup.fleet.teams;
    expect(setup.fleet.teamsAtOnce).toBe(2);
    // The environment beats the file's shared keys; a team's own entry beats the environment.
    expect(kenya!.config.history).toEqual(['chats']);
    expect(malawi!.config.history).toBe(true);
    // A flag is for this one run: it beats everything.
    expect(kenya!.config.pageSize).toBe(50);
    expect(malawi!.config.pageSize).toBe(50);
    expect(malawi!.config.concurrency).toBe(3);
  });

  it('shares one PostgreSQL URL from the environment, each team in a schema of its own', () => {
    const fleet = fleetOf(
      `
files: { enabled: false }
teams:
  - name: kenya
    base_url: https://chat.example.org
    api_key_env: K
    warehouse: { schema: kenya }
  - name: malawi
    base_url: https://chat.example.org
    api_key_env: M
    warehouse: { schema: malawi, url_env: OCS_MALAWI_WAREHOUSE_URL }
`,
      {
        OCS_WAREHOUSE_URL: 'postgres://ocs:secret@db:5432/ocs',
        OCS_MALAWI_WAREHOUSE_URL: 'postgres://ocs_malawi:other@db:5432/ocs',
      },
    );
    expect(
      fleet.teams.map((team) => [team.config.warehouse.url, team.config.warehouse.schema]),
    ).toEqual([
      ['postgres://ocs:secret@db:5432/ocs', 'kenya'],
      ['postgres://ocs_malawi:other@db:5432/ocs', 'malawi'],
    ]);
  });

  it('lets a team give its private key the other way than the shared one', () => {
    const fleet = fleetOf(
      `
private_key_file: /keys/shared.pem
teams:
  - { name: kenya, warehouse: { url: ./k.db } }
  - { name: malawi, warehouse: { url: ./m.db }, private_key: "-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----" }
`,
    );
    expect(fleet.teams[0]!.config.privateKeyFile).toBe('/keys/shared.pem');
    expect(fleet.teams[1]!.config.privateKeyFile).toBeUndefined();
    expect(fleet.teams[1]!.config.privateKey).toContain('BEGIN PRIVATE KEY');
  });

  it('names the team and the key at fault, at its line, for every problem at once', () => {
    const problems = problemsOf(
      `
teams:
  - name: kenya
    base_url: https://chat.example.org
    api_key_env: OCS_KENYA_API_KEY
    warehouse: { url: ./kenya.db }
  - name: malawi
    base_url: https://chat.example.org
    api_key_env: OCS_MALAWI_API_KEY
    warehouse: { url: 'mysql://db/x', pool_size: 0 }
    pagesize: 3
    log_level: debug
`,
      {},
      SERVER,
    );
    expect(problems).toEqual([
      expect.stringMatching(
        /^teams\.yaml:10: teams\[1\] \(malawi\)\.warehouse\.url uses the scheme "mysql:"/,
      ),
      expect.stringMatching(
        /^teams\.yaml:10: teams\[1\] \(malawi\)\.warehouse\.pool_size must be an integer from 1 to 100; got 0$/,
      ),
      'teams.yaml:11: teams[1] (malawi).pagesize is not a known key; did you mean "page_size"?',
      expect.stringMatching(
        /^teams\.yaml:12: teams\[1\] \(malawi\)\.log_level is a setting of the whole process/,
      ),
    ]);
  });

  it('refuses an API key written in the file, and says where to put it instead, never showing it', () => {
    const secret = 'sk-live-0123456789abcdef';
    const problems = problemsOf(
      `
api_key: ${secret}
teams:
  - name: kenya
    base_url: https://chat.example.org
    api_key: ${secret}
    warehouse: { url: ./kenya.db }
`,
      { OCS_API_KEY: secret },
      SERVER,
    );
    const text = problems.join('\n');
    expect(text).not.toContain(secret);
    expect(text).toMatch(
      /teams\.yaml:6: teams\[0\] \(kenya\)\.api_key: an API key is never written in the configuration file; name the environment variable that holds it \(api_key_env: OCS_KENYA_API_KEY\) or a file that does \(api_key_file: /,
    );
    expect(text).toMatch(
      /teams\.yaml:2: api_key: with teams:, each team's API key comes from its own entry/,
    );
    expect(text).toMatch(
      /OCS_API_KEY is set, but with teams: each team's API key comes from its own entry/,
    );
  });

  it('needs a name, a safe one, once; an API key source for a command that talks to the server', () => {
    const problems = problemsOf(
      `
base_url: https://chat.example.org
teams:
  - warehouse: { url: ./a.db }
  - { name: Kenya Team, warehouse: { url: ./b.db } }
  - { name: all, warehouse: { url: ./c.db } }
  - { name: kenya, api_key_env: K, warehouse: { url: ./d.db } }
  - { name: kenya, api_key_env: K, warehouse: { url: ./e.db } }
  - { name: uganda, warehouse: { url: ./f.db } }
  - { name: zambia, api_key_env: 'not a name', api_key_file: /k, warehouse: { url: ./g.db } }
  - just text
`,
      {},
      SERVER,
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^teams\.yaml:4: teams\[0\] has no name; every team needs one: lowercase letters/,
        ),
        'teams.yaml:5: teams[1].name must be lowercase letters, digits, - and _, starting with a letter, at most 40 characters, and not "all"; got "Kenya Team"',
        expect.stringMatching(/^teams\.yaml:6: teams\[2\]\.name must be .*; got "all"$/),
        'teams.yaml:8: teams[4] (kenya).name is also the name of teams[3]; each team needs a name of its own',
        'teams[5] (uganda): it has no API key: name the environment variable that holds it (api_key_env) or a file that does (api_key_file)',
        "teams.yaml:10: teams[6] (zambia).api_key_env and api_key_file are both set; give the team's API key one way",
        expect.stringMatching(/^teams\.yaml:11: teams\[7\] must be a mapping with name, base_url/),
      ]),
    );
  });

  it('refuses two teams on one warehouse, blob store or checkpoint file, naming both', () => {
    const problems = problemsOf(
      `
files: { enabled: false }
teams:
  - { name: a, warehouse: { url: ./same.db } }
  - { name: b, warehouse: { url: 'sqlite:same.db' } }
  - { name: c, warehouse: { url: 'postgres://u:pw@DB/ocs', schema: shared } }
  - { name: d, warehouse: { url: 'postgres://other:pw2@db:5432/ocs', schema: shared } }
  - { name: e, warehouse: { url: 'postgres://u:pw@db/elsewhere', schema: shared } }
  - { name: f, warehouse: { url: ./f.db }, files: { enabled: true, dir: /data/files } }
  - { name: g, warehouse: { url: ./g.db }, files: { enabled: true, dir: /data/files/ } }
  - { name: h, warehouse: { url: ./h.db }, audit: { enabled: true, signing_key_file: /k, checkpoint_file: /c.jsonl } }
  - { name: i, warehouse: { url: ./i.db }, audit: { enabled: true, signing_key_file: /k, checkpoint_file: /c.jsonl } }
`,
    );
    expect(problems).toEqual([
      "teams.yaml:5: teams[1] (b).warehouse.url: the SQLite file same.db is teams[0] (a)'s too; give each team a file of its own (warehouse: { url: ./NAME.db })",
      "teams.yaml:7: teams[3] (d).warehouse.schema: the schema shared of PostgreSQL database db:5432/ocs is teams[2] (c)'s too; give each team a schema of its own (warehouse: { schema: NAME })",
      expect.stringMatching(
        /^teams\.yaml:10: teams\[6\] \(g\)\.files\.dir: the blob store \/data\/files\/ is teams\[5\] \(f\)'s too/,
      ),
      expect.stringMatching(
        /^teams\.yaml:12: teams\[8\] \(i\)\.audit\.checkpoint_file: the checkpoint file \/c\.jsonl is teams\[7\] \(h\)'s too/,
      ),
    ]);
    // Two teams left on the shared default warehouse: named, and told to give each its own.
    expect(problemsOf('teams:\n  - { name: a }\n  - { name: b }\n').join('\n')).toMatch(
      /^teams\[1\] \(b\): warehouse\.url: the SQLite file \.\/ocs-sync\.db is teams\[0\] \(a\)'s too/,
    );
  });

  it("labels each team's metrics with its name: metrics.team is refused anywhere, and a textfile is a team's own", () => {
    expect(
      problemsOf(
        `
metrics: { team: shared, push_url: http://pushgateway:9091 }
teams:
  - { name: a, warehouse: { url: ./a.db }, metrics: { team: a } }
`,
        { OCS_METRICS_TEAM: 'x' },
      ),
    ).toEqual([
      `teams.yaml:2: metrics.team: with teams:, each team's metrics are labelled with its name (team="NAME"); remove it`,
      `teams.yaml:4: teams[0] (a).metrics.team: with teams:, each team's metrics are labelled with its name (team="NAME"); remove it`,
      `OCS_METRICS_TEAM is set, but with teams:, each team's metrics are labelled with its name (team="NAME"); remove it`,
    ]);
    expect(
      problemsOf(`
teams:
  - { name: a, warehouse: { url: ./a.db }, metrics: { textfile: /t/same.prom } }
  - { name: b, warehouse: { url: ./b.db }, metrics: { textfile: /t/same.prom } }
`),
    ).toEqual([
      expect.stringMatching(
        /^teams\.yaml:4: teams\[1\] \(b\)\.metrics\.textfile: the metrics textfile \/t\/same\.prom is teams\[0\] \(a\)'s too; give each team a file of its own/,
      ),
    ]);
    const fleet = fleetOf(
      'metrics: { push_url: http://pushgateway:9091 }\nteams:\n  - { name: a, warehouse: { url: ./a.db }, metrics: { textfile: /t/a.prom } }\n',
    );
    expect(fleet.teams[0]!.config.metrics).toEqual({
      pushUrl: 'http://pushgateway:9091',
      textfile: '/t/a.prom',
      team: undefined,
      pushTimeoutSeconds: 5,
    });
  });

  it('refuses an empty list, a list that is not one, and teams in a team', () => {
    expect(problemsOf('teams: []\n')).toEqual([
      'teams.yaml:1: teams is an empty list; name at least one team, or remove teams: for a configuration of one team',
    ]);
    expect(problemsOf('teams: kenya\n')[0]).toMatch(
      /^teams\.yaml:1: teams must be a list of teams/,
    );
    expect(
      problemsOf('teams:\n  - { name: a, warehouse: { url: ./a.db }, teams: [] }\n')[0],
    ).toMatch(/teams\[0\] \(a\)\.teams: a team's entry cannot hold teams of its own/);
  });

  it('reads warehouse.url_env, and says when the variable is unset or both are given', () => {
    const problems = problemsOf(
      `
teams:
  - { name: a, warehouse: { url_env: A_URL } }
  - { name: b, warehouse: { url_env: B_URL, url: ./b.db } }
`,
    );
    expect(problems).toEqual([
      "teams.yaml:3: teams[0] (a).warehouse.url_env: A_URL is not set; set it to the team's warehouse URL",
      'teams.yaml:4: teams[1] (b).warehouse.url_env and warehouse.url are both set; give one of them',
    ]);
    // A problem with the URL it read names the variable it came from.
    expect(
      problemsOf('teams:\n  - { name: a, warehouse: { url_env: A_URL } }\n', { A_URL: 'ftp://x' }),
    ).toEqual([
      expect.stringMatching(
        /^teams\.yaml:2: teams\[0\] \(a\)\.warehouse\.url \(from A_URL\) uses the scheme "ftp:"/,
      ),
    ]);
  });

  it('is refused by the commands of one team without --team, listing the teams', () => {
    expect(() => resolveConfig(inputs(TWO_TEAMS), LOCAL)).toThrow(UsageError);
    expect(() => resolveConfig(inputs(TWO_TEAMS), LOCAL)).toThrow(
      'teams.yaml has a teams: list (kenya, malawi); this command works on one team: choose it with --team NAME.',
    );
  });

  it('explains one team: each setting with its team entry line, the shared file, or the default', () => {
    const { settings } = explainConfig(inputs(TWO_TEAMS), LOCAL, 'malawi');
    const source = (key: string) => settings.find((setting) => setting.key === key);
    expect(source('team')).toEqual({ key: 'team', value: 'malawi', source: 'teams.yaml:10' });
    expect(source('api_key')).toEqual({
      key: 'api_key',
      value: 'from file /run/secrets/malawi/api-key',
      source: 'teams.yaml:12',
    });
    expect(source('page_size')).toEqual({ key: 'page_size', value: 100, source: 'teams.yaml:14' });
    expect(source('schedule')?.source).toBe('teams.yaml:4');
    expect(source('concurrency')?.source).toBe('default');
    expect(() => explainConfig(inputs(TWO_TEAMS), LOCAL, 'zambia')).toThrow(
      /--team "zambia" is not a team of teams\.yaml/,
    );
  });

  it('accepts the example in config.example.yaml once it is uncommented', () => {
    const text = readFileSync(new URL('../config.example.yaml', import.meta.url), 'utf8');
    const lines = text.split('\n');
    const start = lines.indexOf('# teams:');
    const end = lines.findIndex((line, index) => index > start && !line.startsWith('#   '));
    const block = lines
      .slice(start, end)
      .map((line) => line.slice(2))
      .join('\n');
    const fleet = fleetOf(block, { OCS_MALAWI_WAREHOUSE_URL: 'postgres://m:pw@db/ocs' });
    expect(fleet.teams.map((team) => team.name)).toEqual(['kenya', 'malawi']);
    expect(fleet.teams[1]!.config.schedule).toBe('0 * * * *');
  });
});

describe("a team's API key", () => {
  const team = (apiKey: { env: string } | { file: string }) => ({
    name: 'kenya',
    index: 0,
    apiKey,
  });

  it('comes from its variable or its file, trimmed, read afresh each time', () => {
    expect(readApiKey(team({ env: 'K' }), { K: ' key-1 \n' })).toBe('key-1');
    const path = join(directory, 'api-key');
    writeFileSync(path, 'key-2\n');
    expect(readApiKey(team({ file: path }), {})).toBe('key-2');
    writeFileSync(path, 'key-3\n');
    expect(readApiKey(team({ file: path }), {})).toBe('key-3');
  });

  it('names the team and the source when it cannot be read', () => {
    const message = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        return (error as ConfigError).problems.join('\n');
      }
      return 'no error';
    };
    expect(message(() => readApiKey(team({ env: 'K' }), {}))).toBe(
      "teams[0] (kenya).api_key_env: K is not set (or empty); set it to the API key of one of the team's admins",
    );
    expect(message(() => readApiKey(team({ file: join(directory, 'nope') }), {}))).toBe(
      `teams[0] (kenya).api_key_file: The API key file ${join(directory, 'nope')} does not exist.`,
    );
    const empty = join(directory, 'empty');
    writeFileSync(empty, '\n');
    expect(message(() => readApiKey(team({ file: empty }), {}))).toBe(
      `teams[0] (kenya).api_key_file: ${empty} is empty`,
    );
    expect(message(() => readApiKey(team({ file: directory }), {}))).toBe(
      `teams[0] (kenya).api_key_file: The API key file ${directory} is a directory.`,
    );
  });
});

describe('team names and shards', () => {
  it('takes lowercase letters, digits, - and _, starting with a letter, up to 40, not all', () => {
    for (const name of ['kenya', 'south-sudan', 'team_2', 'a', 'a'.repeat(40)]) {
      expect(isTeamName(name), name).toBe(true);
    }
    for (const name of ['Kenya', '2kenya', '-a', 'a b', 'a.b', 'all', 'a'.repeat(41), '', 'é']) {
      expect(isTeamName(name), name).toBe(false);
    }
  });

  it('parses I/N and says what is wrong otherwise', () => {
    expect(parseShard('1/3')).toEqual({ index: 1, count: 3 });
    expect(parseShard(' 0 / 1 ')).toEqual({ index: 0, count: 1 });
    expect(parseShard('3/3')).toEqual({ problem: 'numbers shards from 0 to 2; got 3' });
    for (const text of ['1', '1/0', 'a/b', '-1/2', '1/2/3', '0/1001']) {
      expect(parseShard(text), text).toHaveProperty('problem');
    }
  });

  it('puts a team in a shard by its name and the number of shards only, the same in every version', () => {
    // Pinned: a change here would move teams between running daemons.
    const names = ['kenya', 'malawi', 'uganda', 'tanzania', 'zambia', 'rwanda'];
    expect(Object.fromEntries(names.map((name) => [name, shardOfTeam(name, 3)]))).toEqual({
      kenya: 1,
      malawi: 1,
      uganda: 2,
      tanzania: 0,
      zambia: 0,
      rwanda: 1,
    });
    for (const name of names) expect(shardOfTeam(name, 1)).toBe(0);
  });

  it('spreads teams evenly, and moves only those the new shard takes when one is added', () => {
    const names = Array.from({ length: 2000 }, (_, index) => `team-${index}`);
    for (const count of [2, 3, 5, 8]) {
      const sizes = new Array<number>(count).fill(0);
      for (const name of names) sizes[shardOfTeam(name, count)]! += 1;
      for (const size of sizes)
        expect(Math.abs(size - 2000 / count)).toBeLessThan(2000 / count / 4);
      for (const name of names) {
        const before = shardOfTeam(name, count);
        const after = shardOfTeam(name, count + 1);
        expect(after === before || after === count, name).toBe(true);
      }
    }
  });
});
