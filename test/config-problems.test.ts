/**
 * A configuration problem is data from where it is found (its place: a key and line of the file,
 * a key of a team's entry, a variable, a flag, or a setting) and is worded once, when reported:
 * the line and the team a message names come from that data, and the order (the file's problems
 * first, by line) does too, never from reading the text back.
 */
import { describe, expect, it } from 'vitest';
import { parseConfigText, resolveSetup, type ConfigInputs } from '../src/config/load.js';
import {
  ConfigProblemsError,
  problemText,
  type Place,
  type Problem,
} from '../src/config/problems.js';

/** The YAML text through the real parser (with its lines), as a file named at.yaml. */
function inputs(text: string, env: Record<string, string> = {}): ConfigInputs {
  const { file, fileLines } = parseConfigText(text, 'at.yaml');
  return { file, fileLines, filePath: 'at.yaml', env };
}

/** The error `run` throws (fails the test if it throws none, or another kind). */
function errorOf(run: () => unknown): ConfigProblemsError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigProblemsError);
    return error as ConfigProblemsError;
  }
  throw new Error('expected a ConfigProblemsError, but none was thrown');
}

function resolved(text: string, env: Record<string, string> = {}, server = false) {
  return errorOf(() => resolveSetup(inputs(text, env), { server }));
}

describe('a problem of one configuration', () => {
  it('carries the line of a bad value deep in the file, and the message names that line', () => {
    const text = [
      'base_url: https://chat.example.org',
      '# a comment, so that lines and keys do not line up',
      'http:',
      '  request_timeout_seconds: 30',
      '',
      '  max_attempts: 0',
      'resources:',
      '  - chat_messages',
      '  - 7',
    ].join('\n');
    const error = resolved(text);
    expect(error.found).toEqual([
      {
        place: { in: 'file', file: 'at.yaml', line: 6, path: ['http', 'max_attempts'] },
        message: 'must be an integer from 1 to 20; got 0',
      },
      {
        place: { in: 'file', file: 'at.yaml', line: 9, path: ['resources', 1] },
        message: 'must be a list of resource names (lowercase letters, digits and _); got 7',
      },
    ]);
    expect(error.problems).toEqual([
      'at.yaml:6: http.max_attempts must be an integer from 1 to 20; got 0',
      'at.yaml:9: resources[1] must be a list of resource names (lowercase letters, digits and _); got 7',
    ]);
  });

  it('carries the line of a YAML syntax error', () => {
    const error = errorOf(() => parseConfigText('a: 1\nb: 2\nb: 3\n', 'dup.yaml'));
    expect(error.found).toEqual([
      {
        place: { in: 'file', file: 'dup.yaml', line: 3, path: [] },
        message: 'YAML syntax error: Map keys must be unique',
      },
    ]);
    expect(error.problems).toEqual(['dup.yaml:3: YAML syntax error: Map keys must be unique']);
  });

  it('names the variable or the flag a bad value came from, as data', () => {
    const error = errorOf(() =>
      resolveSetup(
        { env: { OCS_PAGE_SIZE: 'lots' }, flags: { concurrency: 99 } },
        { server: false },
      ),
    );
    expect(error.found.map((problem) => problem.place)).toEqual([
      { in: 'env', variable: 'OCS_PAGE_SIZE', path: ['page_size'] },
      { in: 'flag', path: ['concurrency'] },
    ]);
    expect(error.problems).toEqual([
      'OCS_PAGE_SIZE (page_size) must be an integer from 1 to 1000; got "lots"',
      'concurrency (command-line flag) must be an integer from 1 to 8; got 99',
    ]);
  });
});

describe('a problem of a team of a teams: list', () => {
  const FLEET = [
    'http:',
    '  max_attempts: 0',
    'teams:',
    '  - name: kenya',
    '    warehouse: { url: ./kenya.db }',
    '  - name: malawi',
    '    warehouse:',
    '      url: ./malawi.db',
    '      pool_size: 0',
  ].join('\n');

  it("keeps its team and the line in the team's entry", () => {
    const error = resolved(FLEET);
    const inEntry = error.found.find((problem) => problem.place?.in === 'team');
    expect(inEntry).toEqual({
      place: {
        in: 'team',
        file: 'at.yaml',
        line: 9,
        team: { index: 1, name: 'malawi' },
        path: ['warehouse', 'pool_size'],
      },
      message: 'must be an integer from 1 to 100; got 0',
    });
    expect(error.problems).toContain(
      'at.yaml:9: teams[1] (malawi).warehouse.pool_size must be an integer from 1 to 100; got 0',
    );
  });

  it("reports a shared value's problem once, at its line, without a team", () => {
    const error = resolved(FLEET);
    const shared = error.found.filter((problem) => problem.place?.in === 'file');
    expect(shared).toEqual([
      {
        place: { in: 'file', file: 'at.yaml', line: 2, path: ['http', 'max_attempts'] },
        message: 'must be an integer from 1 to 20; got 0',
      },
    ]);
    expect(error.problems[0]).toBe(
      'at.yaml:2: http.max_attempts must be an integer from 1 to 20; got 0',
    );
  });

  it('names the team of a problem whose place is a setting given nowhere', () => {
    const error = resolved(
      'teams:\n  - name: kenya\n    api_key_env: K\n    warehouse: { url: ./k.db }\n',
      {},
      true,
    );
    expect(error.found).toEqual([
      {
        place: { in: 'setting', path: ['base_url'] },
        message: expect.stringMatching(/^is required for this command/),
        team: { index: 0, name: 'kenya' },
      },
    ]);
    expect(error.problems[0]).toMatch(/^teams\[0\] \(kenya\): base_url is required /);
  });

  it("orders a team's problem at a line of the shared settings by that line", () => {
    const text = ['teams:', '  - name: a', '  - name: b', 'files:', '  dir: /shared-files'].join(
      '\n',
    );
    const error = resolved(text);
    // Both teams share the default warehouse file and the file's files.dir: the one at a line of
    // the file comes first, though its text starts with the team.
    expect(error.found.map((problem) => problem.place)).toEqual([
      { in: 'file', file: 'at.yaml', line: 5, path: ['files', 'dir'] },
      { in: 'setting', path: ['warehouse', 'url'] },
    ]);
    expect(error.problems).toEqual([
      "teams[1] (b): at.yaml:5: files.dir: the blob store /shared-files is teams[0] (a)'s too; give each team a folder or bucket prefix of its own (files: { dir: … }): a run clears the unfinished downloads and uploads there when it starts",
      "teams[1] (b): warehouse.url: the SQLite file ./ocs-sync.db is teams[0] (a)'s too; give each team a file of its own (warehouse: { url: ./NAME.db })",
    ]);
  });
});

describe('reporting problems', () => {
  const inFile = (line: number, path: string[]): Place => ({
    in: 'file',
    file: 'x.yaml',
    line,
    path,
  });

  it('orders by the line in the data, not by text that looks like a place', () => {
    const error = new ConfigProblemsError([
      { message: 'x.yaml:1: looks like a place, but is a message of no place' },
      { place: inFile(7, ['b']), message: 'is seventh' },
      { place: inFile(3, ['a']), message: 'is third' },
      { place: { in: 'file', file: 'x.yaml', path: [] }, message: 'has no known line' },
    ]);
    expect(error.problems).toEqual([
      'x.yaml: has no known line',
      'x.yaml:3: a is third',
      'x.yaml:7: b is seventh',
      'x.yaml:1: looks like a place, but is a message of no place',
    ]);
    expect(error.found.map(({ place }) => (place?.in === 'file' ? place.line : undefined))).toEqual(
      [undefined, 3, 7, undefined],
    );
  });

  it('reports a problem found twice once, and no secret in the text or the data', () => {
    const apiKey = 'sk-live-0123456789';
    const leaky: Problem = { place: inFile(2, ['api_key']), message: `is odd: ${apiKey}` };
    const error = new ConfigProblemsError([leaky, { ...leaky }], { api_key: apiKey });
    expect(error.problems).toEqual(['x.yaml:2: api_key is odd: [redacted]']);
    expect(error.found).toEqual([{ ...leaky, message: 'is odd: [redacted]' }]);
    expect(error.message).not.toContain(apiKey);
  });

  it('words each kind of place', () => {
    const team = { index: 1, name: 'malawi' };
    const cases: Array<[Problem, string]> = [
      [{ message: 'a rule of two keys' }, 'a rule of two keys'],
      [
        { place: inFile(4, ['http', 'max_attempts']), message: 'must be' },
        'x.yaml:4: http.max_attempts must be',
      ],
      [
        {
          place: { in: 'file', file: 'x.yaml', line: 4, path: [] },
          message: 'YAML syntax error: e',
        },
        'x.yaml:4: YAML syntax error: e',
      ],
      [
        {
          place: {
            in: 'team',
            file: 't.yaml',
            line: 9,
            team,
            path: ['warehouse', 'url'],
            via: 'M_URL',
          },
          message: 'uses',
        },
        't.yaml:9: teams[1] (malawi).warehouse.url (from M_URL) uses',
      ],
      [
        {
          place: {
            in: 'team',
            file: 't.yaml',
            line: 8,
            team: { index: 2, name: undefined },
            path: [],
          },
          message: 'has no name',
        },
        't.yaml:8: teams[2] has no name',
      ],
      [
        {
          place: { in: 'env', variable: 'OCS_PAGE_SIZE', path: ['page_size'] },
          message: 'must be',
        },
        'OCS_PAGE_SIZE (page_size) must be',
      ],
      [
        { place: { in: 'env', variable: 'OCS_API_KEYS', path: [] }, message: 'is not a variable' },
        'OCS_API_KEYS is not a variable',
      ],
      [
        { place: { in: 'flag', path: ['page_size'] }, message: 'must be' },
        'page_size (command-line flag) must be',
      ],
      [
        { place: { in: 'setting', path: ['base_url'] }, message: 'is required' },
        'base_url is required',
      ],
      [
        {
          place: { in: 'team', file: 't.yaml', line: 3, team, path: ['teams'] },
          standalone: true,
          message: 'no teams here',
        },
        't.yaml:3: teams[1] (malawi).teams: no teams here',
      ],
      [
        {
          place: { in: 'setting', path: ['files', 'dir'] },
          standalone: true,
          message: 'shared',
          team,
        },
        'teams[1] (malawi): files.dir: shared',
      ],
      [
        {
          place: { in: 'team', file: 't.yaml', line: 3, team, path: ['files', 'dir'] },
          message: 'is shared',
          team,
        },
        't.yaml:3: teams[1] (malawi).files.dir is shared',
      ],
    ];
    for (const [problem, text] of cases) expect(problemText(problem)).toBe(text);
  });
});
