/**
 * The layer rules (.dependency-cruiser.mjs, run by `npm run lint`): the real src/ keeps them, and
 * each rule fails a small graph that breaks it, so a rule that stopped matching would be seen.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import { ESLint } from 'eslint';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterEach, describe, expect, it } from 'vitest';
import { temporaryDirectory } from './support.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const depcruise = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const config = join(root, '.dependency-cruiser.mjs');

const sorted = (rules: string[]) => [...new Set(rules)].sort();

/** Runs `npm run lint:layers`'s command in `cwd`: its exit status and the rules broken, sorted. */
function brokenRules(cwd: string): { status: number | null; rules: string[] } {
  const run = spawnSync(process.execPath, [depcruise, 'src', '--config', config], {
    cwd,
    encoding: 'utf8',
  });
  if (!/dependencies cruised/.test(run.stdout)) throw new Error(`depcruise failed: ${run.stderr}`);
  const rules = [...run.stdout.matchAll(/^\s*error (\S+):/gm)].map((match) => match[1]!);
  return { status: run.status, rules: sorted(rules) };
}

/**
 * The same rules over the tree at `cwd`, through dependency-cruiser's API in this process (a
 * process of its own costs about two seconds): the errors found and the rules broken, sorted.
 */
async function brokenRulesInProcess(cwd: string): Promise<{ errors: number; rules: string[] }> {
  const options = await extractDepcruiseOptions(config);
  const tsConfig = extractTSConfig(join(cwd, 'tsconfig.json'));
  const result: ICruiseResult = (
    await cruise(['src'], { ...options, baseDir: cwd }, {}, { tsConfig })
  ).output as ICruiseResult;
  const { error, violations } = result.summary;
  return { errors: error, rules: sorted(violations.map((violation) => violation.rule.name)) };
}

const directories: Array<{ remove(): void }> = [];
afterEach(() => directories.splice(0).forEach((directory) => directory.remove()));

/** A tree of TypeScript files importing each other, as src/ would. */
function tree(files: Record<string, string>): string {
  const directory = temporaryDirectory();
  directories.push(directory);
  const all: Record<string, string> = {
    'tsconfig.json': JSON.stringify({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
      include: ['src'],
    }),
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(dirname(join(directory.path, path)), { recursive: true });
    writeFileSync(join(directory.path, path), text);
  }
  return directory.path;
}

const uses = (...specifiers: string[]) =>
  specifiers.map((specifier) => `import '${specifier}';\n`).join('') + 'export {};\n';

/** The CLI, which may import anything, uses every file so none is an orphan. */
const cli = (...paths: string[]) => ({
  'src/cli/main.ts': uses(...paths.map((path) => `../${path.replace(/\.ts$/, '.js')}`)),
});

describe('layer rules (npm run lint:layers)', () => {
  it('hold for the real src/', () => {
    const { status, rules } = brokenRules(root);
    expect(rules).toEqual([]);
    expect(status).toBe(0);
  });

  it('pass a graph that keeps them: imports down, the opener picks a dialect', async () => {
    const { errors, rules } = await brokenRulesInProcess(
      tree({
        ...cli('sync/engine.ts'),
        'src/names.ts': uses(),
        'src/sync/engine.ts': uses('../warehouse/open.js', '../names.js'),
        'src/warehouse/open.ts': uses('./sqlite/warehouse.js', './postgres/warehouse.js'),
        'src/warehouse/sqlite/warehouse.ts': uses('../values.js'),
        'src/warehouse/postgres/warehouse.ts': uses('../values.js'),
        'src/warehouse/values.ts': uses('../names.js'),
      }),
    );
    expect(rules).toEqual([]);
    expect(errors).toBe(0);
  });

  const broken: Array<[string, Record<string, string>, string[]]> = [
    [
      'an import up a layer',
      {
        ...cli('warehouse/values.ts'),
        'src/warehouse/values.ts': uses('../sync/plan.js'),
        'src/sync/plan.ts': uses(),
      },
      ['layer-warehouse'],
    ],
    [
      'an import across one layer',
      {
        ...cli('source/http.ts'),
        'src/source/http.ts': uses('../sealing/open.js'),
        'src/sealing/open.ts': uses(),
      },
      ['layer-source'],
    ],
    [
      'a shared file importing a folder',
      { ...cli('names.ts'), 'src/names.ts': uses('./sync/plan.js'), 'src/sync/plan.ts': uses() },
      ['layer-shared'],
    ],
    [
      'a circle',
      {
        ...cli('sync/a.ts'),
        'src/sync/a.ts': uses('./b.js'),
        'src/sync/b.ts': uses('./a.js'),
      },
      ['no-circular'],
    ],
    [
      'a dialect importing the other',
      {
        ...cli('warehouse/open.ts'),
        'src/warehouse/open.ts': uses('./sqlite/values.js', './postgres/values.js'),
        'src/warehouse/sqlite/values.ts': uses('../postgres/values.js'),
        'src/warehouse/postgres/values.ts': uses(),
      },
      ['dialects-apart'],
    ],
    [
      'a dialect folder imported past the opener',
      {
        ...cli('warehouse/reader.ts'),
        'src/warehouse/reader.ts': uses('./sqlite/reader.js'),
        'src/warehouse/sqlite/reader.ts': uses(),
      },
      ['dialects-behind-open'],
    ],
    [
      'a folder outside the layers',
      { ...cli('utils/text.ts'), 'src/utils/text.ts': uses() },
      ['layer-unknown-folder'],
    ],
    ['a file nothing imports', { ...cli(), 'src/sync/unused.ts': uses() }, ['no-orphans']],
    [
      'the program importing its tests',
      { ...cli(), 'src/cli/main.ts': uses('../../test/support.js'), 'test/support.ts': uses() },
      ['src-stands-alone'],
    ],
  ];

  it.each(broken)('fail on %s', async (_, files, expected) => {
    const { errors, rules } = await brokenRulesInProcess(tree(files));
    expect(rules).toEqual(expected);
    expect(errors).toBeGreaterThan(0);
  });

  it('fail the command as well: a broken graph exits non-zero', () => {
    const { status, rules } = brokenRules(tree(broken[0]![1]));
    expect(rules).toEqual(broken[0]![2]);
    expect(status).not.toBe(0);
  });
});

/**
 * Dialect tests live in the dialect folders (eslint.config.js, run by `npm run lint`): a name test
 * anywhere else in src/ fails, in the URL's parser (which reads which dialect a URL names) it does
 * not.
 */
describe('dialect tests only in src/warehouse/<dialect>/ (npm run lint)', () => {
  const eslint = new ESLint({ cwd: root });
  const DIALECT_RULE = 'no-restricted-syntax';

  /** The dialect-test errors ESLint finds in `code` as the file at `path` of src/. */
  async function dialectTests(path: string, code: string): Promise<number[]> {
    const [result] = await eslint.lintText(code, { filePath: join(root, path) });
    return result!.messages
      .filter((message) => message.ruleId === DIALECT_RULE)
      .map((message) => message.line);
  }

  const tests = [
    "export const a = (d: string) => d === 'postgres';",
    "export const b = (d: string) => 'sqlite' !== d;",
    "export const c = (d: string) => d == 'sqlite';",
    "export function e(d: string) {\n  switch (d) {\n    case 'postgres':\n      return 1;\n  }\n  return 0;\n}",
  ];

  it('hold for the real src/', async () => {
    const files = (readdirSync(join(root, 'src'), { recursive: true }) as string[])
      .filter((path) => path.endsWith('.ts'))
      .map((path) => join(root, 'src', path))
      .filter((path) => /'(sqlite|postgres)'/.test(readFileSync(path, 'utf8')));
    expect(files.length).toBeGreaterThan(10);
    const results = await eslint.lintFiles(files);
    const found = results.flatMap((result) =>
      result.messages
        .filter((message) => message.ruleId === DIALECT_RULE)
        .map((message) => `${result.filePath}:${message.line}`),
    );
    expect(found).toEqual([]);
  });

  it.each([
    'src/warehouse/reader.ts',
    'src/sync/engine.ts',
    'src/cli/new-command.ts',
    'src/config/fleet.ts',
  ])('fail on a dialect test in %s', async (path) => {
    for (const code of tests) expect(await dialectTests(path, code)).toHaveLength(1);
  });

  it.each([
    'src/warehouse/sqlite/reader.ts',
    'src/warehouse/postgres/new.ts',
    'src/warehouse/url.ts',
  ])('pass a dialect test in %s', async (path) => {
    for (const code of tests) expect(await dialectTests(path, code)).toEqual([]);
  });

  it('pass comparisons with other names, and the name used as a key', async () => {
    const code = [
      "export const a = (d: string) => d === 'mysql' || d === 'sqlite3';",
      "export const b = { sqlite: 1, postgres: 2 }['sqlite'];",
    ].join('\n');
    expect(await dialectTests('src/sync/engine.ts', code)).toEqual([]);
  });
});
