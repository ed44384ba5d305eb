/**
 * The README and docs/ are run, not trusted: every ```sh block runs as a reader would type it, and
 * every ```sql block runs on a synced warehouse of every dialect. A block that cannot run in a test
 * (docker, the server's importer, benchmarks, the suite itself) is named in ALLOWED with the
 * reason; a command in neither place fails, and so does an ALLOWED entry no page uses any more.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { Writable } from 'node:stream';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { projectRoot } from '../src/package-info.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import {
  ADMIN_KEY,
  createTestWarehouse,
  docsSqlBlocks,
  documentationPages,
  runCli,
  syncEnv,
  teamKeys,
  testDialects,
  type TestWarehouse,
} from './support.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3Server, type S3TestServer } from './s3-server.js';

/** Commands (by their first words) that no test can run here, and why. */
const ALLOWED: Record<string, string> = {
  'npm ci': 'installs the checkout the suite already runs in',
  'npm test': 'the suite itself',
  'npm run test:long': 'the long suites, which CI runs after the suite',
  'npm run check': 'typecheck, lint and format check, then the suite itself',
  'npm run bench -- soak --chaos':
    'ten minutes of the daemon killed and restarted; chaos-soak.long.test.ts runs it small',
  'npm run bench':
    'minutes of benchmark at its default size; bench-smoke.long.test.ts runs it small',
  'bash .ci/run': 'CI itself: installs PostgreSQL and runs the suite in a container',
  'bash .ci/node22.sh': 'the suite again on Node 22, which CI runs after the suite',
  'source .ci/postgres.sh': 'starts a PostgreSQL cluster; the suite is given one instead',
  'npx vite-node bench/postgres-upsert.ts': 'a benchmark of PostgreSQL page writes',
  'docker build': 'needs a Docker daemon; .ci/run builds the image',
  'docker run': 'needs a Docker daemon; the suite is given a PostgreSQL database instead',
  'kubectl kustomize':
    'renders the manifests: kubernetes.test.ts renders them and checks every object',
  'kubectl apply': 'needs a cluster; kubernetes.test.ts checks what it would apply, and runs it',
  'promtool check rules':
    "Debian's promtool on the shipped rules: prometheus.test.ts runs it (skipped without promtool)",
  'promtool test rules':
    "the shipped rules' unit tests: prometheus.test.ts runs them (skipped without promtool)",
  'duckdb -c': 'the DuckDB shell is not installed; export-parquet tests read the files back',
  'python -c': 'pandas is not installed; export-parquet tests read the files back',
  pg_dump:
    "PostgreSQL's client tools, for a PostgreSQL warehouse; snapshot.long.test.ts checks ocs-sync snapshot points at it",
  'aws s3api':
    'the AWS CLI is not installed; test/s3-server.ts makes the bucket (and answers for its Object Lock) in s3rver',
  'python manage.py sync_team':
    "the server's importer; serve-roundtrip.long.test.ts imports the served team as it does",
};

/** SQL blocks (by their first line) run by a test of their own, and why not here. */
const SQL_RUN_ELSEWHERE: Record<string, string> = {
  'DO $$':
    'the PostgreSQL grants need a role of their own: sealed-sync.test.ts runs them as written ' +
    '("the docs\' PostgreSQL grants keep tables with sealed fields from analysts")',
  "-- A team's schema and roles: ocs-sync writes it as ocs_kenya; kenya's analysts read it.":
    'roles of their own, in a database of their own: teams.test.ts runs them as written ' +
    "(\"the docs' PostgreSQL permissions keep one team's schema from another's roles\")",
};

interface Block {
  page: string;
  line: number;
  language: string;
  text: string;
  /** The `<!-- docs-test: file NAME -->` marker just before it, if any. */
  fileName?: string;
}

function blocksOf(page: string, text: string): Block[] {
  const blocks: Block[] = [];
  const fence = /^( *)```(\w*)\n([\s\S]*?)^\1```/gm;
  for (const match of text.matchAll(fence)) {
    const before = text.slice(0, match.index);
    const marker = /<!-- docs-test: file (\S+) -->\s*$/.exec(before);
    const indent = match[1]!.length;
    blocks.push({
      page,
      line: before.split('\n').length,
      language: match[2]!,
      text: match[3]!
        .split('\n')
        .map((line) => line.slice(Math.min(indent, line.length - line.trimStart().length)))
        .join('\n'),
      ...(marker ? { fileName: marker[1] } : {}),
    });
  }
  return blocks;
}

const pages = documentationPages();
const blocks = pages.flatMap(({ path, text }) => blocksOf(path, text));

/** A block's commands: continuations joined, comments and blank lines gone, `&&` split. */
function commandsOf(block: Block): string[] {
  return block.text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => stripComment(line).trim())
    .filter((line) => line !== '')
    .flatMap((line) => line.split(/\s+&&\s+/));
}

function stripComment(line: string): string {
  let quote: string | undefined;
  for (let index = 0; index < line.length; index += 1) {
    const char = line[index]!;
    if (quote !== undefined) {
      if (char === quote) quote = undefined;
    } else if (char === "'" || char === '"') quote = char;
    else if (char === '#' && (index === 0 || /\s/.test(line[index - 1]!))) {
      return line.slice(0, index);
    }
  }
  return line;
}

/** Shell words: quotes removed, `$NAME` and `$(…)` expanded by `expand`. */
function words(command: string, expand: (text: string) => string): string[] {
  const result: string[] = [];
  for (const match of command.matchAll(/'([^']*)'|"([^"]*)"|((?:\$\([^)]*\)|[^\s'"])+)/g)) {
    if (match[1] !== undefined) result.push(match[1]);
    else result.push(expand(match[2] ?? match[3]!));
  }
  return result;
}

/** The ALLOWED entry a command falls under, if any. */
function allowedEntry(command: string): string | undefined {
  return Object.keys(ALLOWED).find(
    (prefix) => command === prefix || command.startsWith(`${prefix} `),
  );
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address();
  await new Promise<void>((done) => server.close(() => done()));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

async function waitFor(
  check: () => Promise<boolean> | boolean,
  what: string,
  failed: () => string | undefined = () => undefined,
): Promise<void> {
  for (let tries = 0; tries < 600; tries += 1) {
    const failure = failed();
    if (failure !== undefined) throw new Error(failure);
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return;
    await new Promise((done) => setTimeout(done, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The commands a page's reader types, run in order in one folder with one environment. */
class Reader {
  env: Record<string, string>;
  readonly ran: string[] = [];
  readonly skipped: string[] = [];
  private readonly background: Array<{ stop: AbortController; done: Promise<number> }> = [];
  private postgres: TestWarehouse | undefined;
  /** A page that points ocs-sync at a bucket (OCS_S3_ENDPOINT) gets s3rver, with its bucket. */
  private s3: S3TestServer | undefined;

  constructor(
    private readonly server: FakeServer,
    private readonly folder: string,
  ) {
    const { OCS_WAREHOUSE_URL: _unused, ...env } = syncEnv(server.url, {});
    this.env = env;
  }

  /** A value the page leaves to the reader, filled in the same way every time. */
  private fill(name: string, value: string): string {
    if (value === '…' && /^OCS_[A-Z0-9_]*API_KEY$/.test(name)) return ADMIN_KEY;
    if (value === '…' && name === 'AWS_ACCESS_KEY_ID') return S3_ACCESS_KEY;
    if (value === '…' && name === 'AWS_SECRET_ACCESS_KEY') return S3_SECRET_KEY;
    if (name === 'OCS_S3_ENDPOINT') return this.s3!.endpoint;
    if (value.startsWith('https://chat.example.org')) return this.server.url;
    return value;
  }

  private expand = (text: string): string =>
    text
      .replace(
        /\$\(openssl rand -hex 32\)/g,
        () => 'a'.repeat(8) + Date.now().toString(16).padStart(56, '0'),
      )
      .replace(/\$\(cat ([^)]+)\)/g, (_all, file: string) =>
        readFileSync(resolve(this.folder, file), 'utf8').trim(),
      )
      .replace(/\$\{?([A-Z_]+)\}?/g, (_all, name: string) => this.env[name] ?? '');

  async run(command: string, block: Block): Promise<void> {
    const where = `${block.page}:${block.line}: ${command}`;
    if (allowedEntry(command) !== undefined) return;
    const unset = /^unset((?: [A-Z_][A-Z0-9_]*)+)$/.exec(command);
    if (unset) {
      for (const name of unset[1]!.trim().split(' ')) delete this.env[name];
      return;
    }
    const exported = /^export ([A-Z_][A-Z0-9_]*)=(.*)$/.exec(command);
    if (exported) {
      const [value = ''] = words(exported[2]!, this.expand);
      if (exported[1] === 'OCS_WAREHOUSE_URL' && value.startsWith('postgres://')) {
        if (!testDialects.includes('postgres')) {
          this.skipped.push(`${where} (no OCS_TEST_POSTGRES_URL)`);
          this.env.OCS_SKIP = 'postgres';
          return;
        }
        this.postgres = await createTestWarehouse('postgres');
        Object.assign(this.env, this.postgres.env);
        return;
      }
      if (exported[1] === 'OCS_S3_ENDPOINT' && this.s3 === undefined) {
        this.s3 = await startS3Server({ buckets: ['ocs-archive'] });
        this.s3.objectLock.set('ocs-archive', 'enabled');
      }
      this.env[exported[1]!] = this.fill(exported[1]!, value);
      return;
    }
    if (this.env.OCS_SKIP !== undefined) {
      this.skipped.push(`${where} (no OCS_TEST_POSTGRES_URL)`);
      return;
    }
    const [, assignments = '', rest = ''] =
      /^((?:[A-Z_]+=(?:'[^']*'|\S+)\s+)*)(.*)$/.exec(command) ?? [];
    const env = { ...this.env };
    for (const [, name, value] of assignments.matchAll(/([A-Z_]+)=('[^']*'|\S+)/g)) {
      env[name!] = words(value!, this.expand)[0]!;
    }
    const argv = words(rest, this.expand);
    if (argv[0] === 'npx') argv.shift();
    expect(argv[0], `${where}: neither run by test/docs.test.ts nor in its ALLOWED list`).toBe(
      'ocs-sync',
    );
    argv.shift();
    this.ran.push(where);
    if (argv[0] === 'fake-server') return this.fakeServer(argv, env, where);
    if (argv[0] === 'daemon') return this.daemon(argv, env, where);
    if (argv[0] === 'serve') return this.serve(argv, env, where);
    const result = await runCli(argv, env);
    expect(result.code, `${where}\n${result.stdout}\n${result.stderr}\n${result.logs}`).toBe(0);
  }

  /**
   * A command that runs until stopped (`stop` on its handle, or the page's end); its exit before
   * that fails the test, with its output.
   */
  private start(
    argv: string[],
    env: Record<string, string>,
    where: string,
    onLine: (line: string) => void = () => undefined,
  ) {
    const stop = new AbortController();
    const output: string[] = [];
    const print = (line: string) => {
      output.push(line);
      onLine(line);
    };
    const done = main(argv, {
      env: { OCS_LOG_LEVEL: 'warn', ...env },
      output: { out: print, err: print },
      logStream: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
      signal: stop.signal,
    });
    void done.then((code) => {
      if (!stop.signal.aborted) this.exited = `${where} exited ${code}:\n${output.join('\n')}`;
    });
    const handle = { stop, done };
    this.background.push(handle);
    return handle;
  }

  /** Set when a background command ends before it is stopped. */
  private exited: string | undefined;

  private async waitFor(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
    await waitFor(check, what, () => this.exited);
  }

  /** The fake server prints the exports a reader pastes into the other shell: so are they. */
  private async fakeServer(argv: string[], env: Record<string, string>, where: string) {
    const exports: Record<string, string> = {};
    this.start([...argv, '--port', '0'], env, where, (line) => {
      const match = /^\s*export (OCS_[A-Z_]+)=(\S+)$/.exec(line);
      if (match) exports[match[1]!] = match[2]!;
    });
    await this.waitFor(() => Object.keys(exports).length === 3, `${where} to print its exports`);
    delete this.env.OCS_PRIVATE_KEY;
    Object.assign(this.env, exports);
  }

  private async daemon(argv: string[], env: Record<string, string>, where: string) {
    const listen = `127.0.0.1:${await freePort()}`;
    const daemon = this.start(argv, { ...env, OCS_HEALTH_LISTEN: listen }, where);
    await this.waitFor(
      async () => (await fetch(`http://${listen}/healthz`)).status === 200,
      `${where}: /healthz to answer 200`,
    );
    expect((await fetch(`http://${listen}/metrics`)).status).toBe(200);
    expect((await fetch(`http://${listen}/livez`)).status).toBe(200);
    await this.stopBackground(daemon);
  }

  private async serve(argv: string[], env: Record<string, string>, where: string) {
    const listen = `127.0.0.1:${await freePort()}`;
    const index = argv.indexOf('--listen');
    if (index >= 0) argv[index + 1] = listen;
    else argv.push('--listen', listen);
    const serve = this.start(argv, env, where);
    await this.waitFor(async () => {
      const response = await fetch(`http://${listen}/api/export/manifest/`, {
        headers: { authorization: `Bearer ${env.OCS_SERVE_API_KEY}` },
      });
      return response.status === 200;
    }, `${where}: the manifest to be served`);
    await this.stopBackground(serve);
  }

  /** Stops one background command, or (none named) every one. */
  private async stopBackground(only?: { stop: AbortController; done: Promise<number> }) {
    const stopping = only ? [only] : this.background.splice(0);
    if (only) this.background.splice(this.background.indexOf(only), 1);
    for (const { stop, done } of stopping) {
      stop.abort();
      expect([0, 130]).toContain(await done);
    }
  }

  async close(): Promise<void> {
    await this.stopBackground();
    await this.postgres?.dispose();
    await this.s3?.close();
  }
}

describe('the docs', () => {
  it('keep the README within 250 lines', () => {
    const readme = pages.find(({ path }) => path === 'README.md')!;
    expect(readme.text.split('\n').length).toBeLessThanOrEqual(250);
  });

  it('name only commands a test runs or ALLOWED lists, and ALLOWED only what they name', () => {
    const used = new Set<string>();
    for (const block of blocks.filter(({ language }) => language === 'sh')) {
      for (const command of commandsOf(block)) {
        const entry = allowedEntry(command);
        if (entry !== undefined) used.add(entry);
      }
    }
    expect(Object.keys(ALLOWED).filter((key) => !used.has(key))).toEqual([]);
    const firstLines = new Set(
      blocks.filter(({ language }) => language === 'sql').map(({ text }) => text.split('\n')[0]),
    );
    expect(Object.keys(SQL_RUN_ELSEWHERE).filter((key) => !firstLines.has(key))).toEqual([]);
  });

  it('link to pages and headings that exist', () => {
    const slug = (heading: string) =>
      heading
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-');
    const anchors = new Map(
      pages.map(({ path, text }) => [
        path,
        new Set([...text.matchAll(/^#+ (.+)$/gm)].map((match) => slug(match[1]!))),
      ]),
    );
    const broken: string[] = [];
    for (const { path, text } of pages) {
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [file, anchor] = target!.split('#');
        const resolved = file === '' ? path : join(dirname(path), file!).replace(/\\/g, '/');
        if (file !== '' && !existsInProject(resolved)) broken.push(`${path}: ${target}`);
        else if (anchor !== undefined && !anchors.get(resolved)?.has(anchor)) {
          broken.push(`${path}: ${target}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

function existsInProject(path: string): boolean {
  try {
    readFileSync(resolve(projectRoot(), path));
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EISDIR';
  }
}

describe('the docs’ commands', () => {
  const byPage = new Map<string, Block[]>();
  for (const block of blocks) {
    if (block.language !== 'sh' && block.fileName === undefined) continue;
    byPage.set(block.page, [...(byPage.get(block.page) ?? []), block]);
  }
  let server: FakeServer;
  const home = process.cwd();

  beforeAll(async () => {
    const dataset = createSampleDataset({ rowsPerResource: 8, seed: 5 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
  });
  afterAll(async () => {
    process.chdir(home);
    await server.close();
  });

  it.each([...byPage.keys()])(
    '%s: every sh block runs as written, in order',
    async (page) => {
      const folder = mkdtempSync(join(tmpdir(), 'ocs-docs-'));
      const reader = new Reader(server, folder);
      process.chdir(folder);
      try {
        // Where a reader stands after the README: a first sync into the default warehouse.
        const first = await runCli(['sync'], reader.env);
        expect(first.code, first.stderr).toBe(0);
        for (const block of byPage.get(page)!) {
          if (block.fileName !== undefined) {
            writeFileSync(join(folder, block.fileName), block.text);
            continue;
          }
          for (const command of commandsOf(block)) await reader.run(command, block);
        }
        if (reader.skipped.length > 0) console.log(`Skipped:\n${reader.skipped.join('\n')}`);
      } finally {
        await reader.close();
        process.chdir(home);
        rmSync(folder, { recursive: true, force: true });
      }
    },
    300_000,
  );
});

// ---------------------------------------------------------------------------------- the queries

const sqlBlocks = blocks.filter(({ language }) => language === 'sql');

describe('the docs’ queries', () => {
  it('are there to run, the analysts’ queries among them', () => {
    expect(docsSqlBlocks('analysts-queries').length).toBeGreaterThanOrEqual(4);
    expect(sqlBlocks.length).toBeGreaterThanOrEqual(10);
  });
});

describe.each(testDialects)('the docs’ queries (%s)', (dialect) => {
  let server: FakeServer;
  let warehouse: TestWarehouse;

  beforeAll(async () => {
    const dataset = createSampleDataset({ rowsPerResource: 12, seed: 17 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    warehouse = await createTestWarehouse(dialect);
    const env = syncEnv(server.url, warehouse.env, { OCS_HISTORY: 'true', OCS_AUDIT: 'true' });
    expect((await runCli(['sync'], env)).code).not.toBe(1);
    dataset.remove('chats', [dataset.ids('chats')[0]!]);
    expect((await runCli(['sync', '--full-refresh', 'chats'], env)).code).not.toBe(1);
  }, 120_000);
  afterAll(async () => {
    await server.close();
    await warehouse.dispose();
  });

  const analysts = new Set(docsSqlBlocks('analysts-queries'));
  it.each(sqlBlocks.map((block) => [`${block.page}:${block.line}`, block] as const))(
    '%s runs as written',
    async (_where, block) => {
      const firstLine = block.text.split('\n')[0]!;
      if (SQL_RUN_ELSEWHERE[firstLine] !== undefined) return;
      const rows = await warehouse.query(block.text);
      if (analysts.has(block.text.trim())) expect(rows.length).toBeGreaterThan(0);
    },
  );

  it('counts what the views promise', async () => {
    const [deleted] = await warehouse.query(
      'SELECT count(*) AS n FROM chats WHERE _deleted_at IS NOT NULL',
    );
    const [all] = await warehouse.query('SELECT count(*) AS n FROM chats');
    const [live] = await warehouse.query('SELECT count(*) AS n FROM chats__live');
    expect(Number(deleted!.n)).toBe(1);
    expect(Number(live!.n)).toBe(Number(all!.n) - 1);
  });
});
