/**
 * `npm run bench -- teams`: a fleet of teams (issue 37, point 5).
 *
 * One fake export server per team (all in one child process, teams-servers-process.ts), each with
 * its own sample team, its own API budget and faults at `--fault-rate`: team i of n has
 * (i + 1) / n of `--rows` chat messages (chats, sessions and participants a tenth of that, the
 * other resources 20), so the last team is the largest and the slowest. For each warehouse kind
 * (20 SQLite files; one PostgreSQL database, a schema per team, when a URL is given):
 *
 * - `ocs-sync sync --team all` in a fresh process, `--teams-at-once` teams at a time: its wall time
 *   and peak RSS, each team's run time;
 * - the slowest team alone (`sync --team NAME`, a fresh warehouse): the bound the fleet cannot
 *   beat, and the fleet's wall time against it;
 * - every team's warehouse against its server: every row of every resource, by id and updated_at.
 *
 * Goals: peak RSS < 256 MB + 20 MB × teams at once; every warehouse exact.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { silentLogger } from '../src/log.js';
import { BenchUsageError, positiveInteger, type BenchOutput } from './bench.js';
import { DEFAULT_BENCH_SEED } from './bench-dataset.js';
import { parseModeFlags, runBenchMode } from './bench-mode.js';
import { ask, exited, startBenchChild } from './child-process.js';
import type { CliRequest, CliResult } from './cli-process.js';
import { formatInteger, table } from './report.js';
import { dropPostgresSchema } from './stages.js';
import { smallTeamsMain } from './teams-small.js';
import type {
  TeamServerSpec,
  TeamServersRequest,
  TeamServersStarted,
} from './teams-servers-process.js';

export interface TeamsOptions {
  teams: number;
  /** Chat messages of the largest team. */
  rows: number;
  teamsAtOnce: number;
  latencyMs: number;
  faultRate: number;
  /** Each team's budget, requests per 5 minutes. */
  budget: number;
  pageSize: number;
  /** Every team's `page_threads`. */
  pageThreads: 'auto' | 'true' | 'false';
  postgresUrl?: string;
  seed: number;
  json: boolean;
}

interface FleetRun {
  seconds: number;
  peakRssMb: number;
  exitCode: number;
  /** Each team's run time in the fleet, seconds. */
  teamSeconds: Record<string, number>;
  requests: number;
}

export interface TeamsDialectResults {
  dialect: 'sqlite' | 'postgres';
  fleet: FleetRun;
  slowest: { team: string; seconds: number; peakRssMb: number; requests: number };
  /** Teams whose warehouse holds exactly what their server serves. */
  exact: string[];
  /** What differs, per team that is not exact. */
  differences: Record<string, string[]>;
  checks: {
    wallRatio: number;
    rssGoalMb: number;
    rssMet: boolean;
    exactMet: boolean;
  };
}

export interface TeamsResults {
  settings: TeamsOptions & { node: string; cores: number; loadAverage: number[] };
  rowsPerTeam: Record<string, number>;
  byDialect: TeamsDialectResults[];
}

const USAGE = `Usage: npm run bench -- teams [options]
  --teams N            teams, each its own fake server (default 20)
  --rows N             chat messages of the largest team (default 20000); team i of n has
                       (i + 1) / n of it, chats, sessions and participants a tenth, the rest 20
  --teams-at-once N    teams syncing together (default 4)
  --latency MS         each server's latency per page (default 20)
  --fault-rate P       share of each server's requests answered with a fault (default 0.05)
  --budget N           each team's API budget, requests per 5 minutes (default 2000)
  --page-size N        page size of the syncs (default 1000)
  --page-threads V     every team's page_threads: auto (default), true or false
  --postgres URL       also one PostgreSQL database, a schema per team (default:
                       OCS_BENCH_POSTGRES_URL or OCS_TEST_POSTGRES_URL; '' for none)
  --seed N             seed of the teams and their faults (default ${DEFAULT_BENCH_SEED})
  --json               print the results as JSON

npm run bench -- teams --small 100 --help: many small teams in one daemon, a tick's CPU and wall time`;

export function parseTeamsArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): TeamsOptions {
  const values = parseModeFlags(
    argv,
    [
      'teams',
      'rows',
      'teams-at-once',
      'latency',
      'fault-rate',
      'budget',
      'page-size',
      'page-threads',
      'postgres',
      'seed',
    ],
    USAGE,
    (message) => new BenchUsageError(message),
  );
  const faultRate = Number(values['fault-rate'] ?? '0.05');
  if (!(faultRate >= 0 && faultRate < 1)) {
    throw new BenchUsageError(
      `--fault-rate must be from 0 to below 1, not ${values['fault-rate']}.\n${USAGE}`,
    );
  }
  const pageThreads = values['page-threads'] ?? 'auto';
  if (pageThreads !== 'auto' && pageThreads !== 'true' && pageThreads !== 'false') {
    throw new BenchUsageError(
      `--page-threads must be auto, true or false, not ${pageThreads}.\n${USAGE}`,
    );
  }
  const postgresUrl = values.postgres ?? env.OCS_BENCH_POSTGRES_URL ?? env.OCS_TEST_POSTGRES_URL;
  const teamsAtOnce = positiveInteger(values['teams-at-once'], '--teams-at-once', 4);
  if (teamsAtOnce > 64) throw new BenchUsageError('--teams-at-once goes from 1 to 64.');
  return {
    teams: positiveInteger(values.teams, '--teams', 20),
    rows: positiveInteger(values.rows, '--rows', 20_000),
    teamsAtOnce,
    latencyMs: positiveInteger(values.latency, '--latency', 20, true),
    faultRate,
    budget: positiveInteger(values.budget, '--budget', 2000),
    pageSize: Math.min(1000, positiveInteger(values['page-size'], '--page-size', 1000)),
    pageThreads,
    postgresUrl: postgresUrl === '' ? undefined : postgresUrl,
    seed: positiveInteger(values.seed, '--seed', DEFAULT_BENCH_SEED, true),
    json: values.json,
  };
}

const teamName = (index: number) => `team-${String(index + 1).padStart(2, '0')}`;

/** The teams' sizes: the last is the largest. */
function teamSpecs(options: TeamsOptions): TeamServerSpec[] {
  return Array.from({ length: options.teams }, (_, index) => {
    const messages = Math.max(1, Math.round((options.rows * (index + 1)) / options.teams));
    const tenth = Math.max(1, Math.round(messages / 10));
    return {
      name: teamName(index),
      seed: options.seed + index,
      rowCounts: { chat_messages: messages, chats: tenth, sessions: tenth, participants: tenth },
    };
  });
}

async function runCli(request: CliRequest): Promise<CliResult> {
  const child = startBenchChild('cli-process');
  try {
    return await ask<CliResult>(child, request);
  } finally {
    child.disconnect();
    await exited(child);
  }
}

export async function runTeamsBench(
  options: TeamsOptions,
  output: Pick<BenchOutput, 'progress'>,
): Promise<TeamsResults> {
  const keys = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const specs = teamSpecs(options);
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-bench-teams-'));
  const keyFile = join(directory, 'private.pem');
  writeFileSync(keyFile, keys.privateKey, { mode: 0o600 });
  const servers = startBenchChild('teams-servers-process');
  const request = <T>(message: TeamServersRequest) => ask<T>(servers, message);
  const schemaPrefix = `ocs_bench_teams_${process.pid}_${Date.now().toString(36)}`;
  try {
    output.progress(`starting ${options.teams} fake servers ...`);
    const started = await request<TeamServersStarted>({
      type: 'start',
      teams: specs,
      budget: { limit: options.budget, windowSeconds: 300 },
      faultRate: options.faultRate,
      pageLatencyMs: options.latencyMs,
      teamPublicKeyPem: keys.publicKey,
    });
    const env = (): Record<string, string> => ({
      OCS_LOG_LEVEL: 'warn',
      OCS_BENCH_TEAMS_KEY: started.apiKey,
    });
    const byDialect: TeamsDialectResults[] = [];
    const dialects: Array<'sqlite' | 'postgres'> = options.postgresUrl
      ? ['sqlite', 'postgres']
      : ['sqlite'];
    for (const dialect of dialects) {
      const place = (label: string) => {
        const folder = join(directory, `${dialect}-${label}`);
        mkdirSync(folder, { recursive: true });
        return {
          folder,
          warehouse: (team: string) =>
            dialect === 'sqlite'
              ? { url: join(folder, `${team}.db`), schema: 'ocs' }
              : {
                  url: options.postgresUrl!,
                  schema: `${schemaPrefix}_${label}_${team.replace('-', '_')}`,
                },
        };
      };
      const writeConfig = (where: ReturnType<typeof place>) => {
        const file = join(where.folder, 'teams.yaml');
        const entries = specs.map((spec) => {
          const warehouse = where.warehouse(spec.name);
          return [
            `  - name: ${spec.name}`,
            `    base_url: ${started.urls[spec.name]}`,
            '    api_key_env: OCS_BENCH_TEAMS_KEY',
            `    warehouse: { url: '${warehouse.url}', schema: ${warehouse.schema} }`,
            `    files: { dir: '${join(where.folder, `${spec.name}-files`)}' }`,
          ].join('\n');
        });
        writeFileSync(
          file,
          [
            `teams_at_once: ${options.teamsAtOnce}`,
            `page_size: ${options.pageSize}`,
            `page_threads: ${options.pageThreads}`,
            `private_key_file: ${keyFile}`,
            // A fault is retried at once (a real run waits longer; here it would only add sleep).
            'http: { min_retry_delay_ms: 50, max_retry_delay_seconds: 2 }',
            'teams:',
            ...entries,
          ].join('\n'),
        );
        return file;
      };
      const fleetPlace = place('fleet');
      const aloneplace = place('alone');
      const dropSchemas = async (where: ReturnType<typeof place>) => {
        if (dialect !== 'postgres') return;
        for (const spec of specs) {
          await dropPostgresSchema(options.postgresUrl!, where.warehouse(spec.name).schema);
        }
      };
      try {
        output.progress(
          `${dialect}: sync --team all (${options.teams} teams, ${options.teamsAtOnce} at once) ...`,
        );
        await request({ type: 'requests' });
        const fleetRun = await runCli({
          argv: ['--config', writeConfig(fleetPlace), 'sync', '--team', 'all', '--json'],
          env: env(),
        });
        const fleetRequests = Object.values(
          await request<Record<string, number>>({ type: 'requests' }),
        ).reduce((sum, count) => sum + count, 0);
        if (fleetRun.code !== 0 && fleetRun.code !== 3) {
          throw new Error(
            `sync --team all exited ${fleetRun.code}: ${fleetRun.stderr}${fleetRun.stdout.slice(0, 2000)}`,
          );
        }
        const report = JSON.parse(fleetRun.stdout) as {
          teams: Array<{ team: string; durationMs?: number }>;
        };
        const teamSeconds = Object.fromEntries(
          report.teams.map((team) => [team.team, (team.durationMs ?? NaN) / 1000]),
        );
        output.progress(
          `  ${fleetRun.seconds.toFixed(1)} s, peak RSS ${fleetRun.peakRssMb.toFixed(0)} MB, ${fleetRequests} requests`,
        );
        output.progress(`${dialect}: checking every team's warehouse against its server ...`);
        const differences: Record<string, string[]> = {};
        for (const spec of specs) {
          const found = await differencesOf(spec, fleetPlace.warehouse(spec.name));
          if (found.length > 0) differences[spec.name] = found;
        }
        const slowest = specs.at(-1)!;
        output.progress(`${dialect}: ${slowest.name} (the largest) alone ...`);
        const aloneRun = await runCli({
          argv: ['--config', writeConfig(aloneplace), 'sync', '--team', slowest.name],
          env: env(),
        });
        const aloneRequests = (await request<Record<string, number>>({ type: 'requests' }))[
          slowest.name
        ]!;
        if (aloneRun.code !== 0 && aloneRun.code !== 3) {
          throw new Error(
            `sync --team ${slowest.name} exited ${aloneRun.code}: ${aloneRun.stderr}`,
          );
        }
        output.progress(
          `  ${aloneRun.seconds.toFixed(1)} s, peak RSS ${aloneRun.peakRssMb.toFixed(0)} MB`,
        );
        const rssGoalMb = 256 + 20 * options.teamsAtOnce;
        byDialect.push({
          dialect,
          fleet: {
            seconds: fleetRun.seconds,
            peakRssMb: fleetRun.peakRssMb,
            exitCode: fleetRun.code,
            teamSeconds,
            requests: fleetRequests,
          },
          slowest: {
            team: slowest.name,
            seconds: aloneRun.seconds,
            peakRssMb: aloneRun.peakRssMb,
            requests: aloneRequests,
          },
          exact: specs.map((spec) => spec.name).filter((name) => !differences[name]),
          differences,
          checks: {
            wallRatio: fleetRun.seconds / aloneRun.seconds,
            rssGoalMb,
            rssMet: fleetRun.peakRssMb < rssGoalMb,
            exactMet: Object.keys(differences).length === 0,
          },
        });
      } finally {
        await dropSchemas(fleetPlace);
        await dropSchemas(aloneplace);
      }
    }
    return {
      settings: { ...options, node: process.version, cores: cpus().length, loadAverage: loadavg() },
      rowsPerTeam: started.rows,
      byDialect,
    };
  } finally {
    await request({ type: 'close' }).catch(() => undefined);
    servers.disconnect();
    await exited(servers);
    rmSync(directory, { recursive: true, force: true });
  }
}

/**
 * What differs between a team's warehouse and its server: for every resource, the rows by id and
 * updated_at (the sample team's rows never change during the run, so equal ids and times are
 * equal rows; a fault either fails a request or is retried, never alters a row).
 */
async function differencesOf(
  spec: TeamServerSpec,
  where: { url: string; schema: string },
): Promise<string[]> {
  const dataset = createSampleDataset({ seed: spec.seed, rowCounts: spec.rowCounts });
  const warehouse = await openWarehouse({
    url: where.url,
    schema: where.schema,
    mustExist: true,
    logger: silentLogger(),
  });
  const found: string[] = [];
  try {
    const tables = new Set((await warehouse.status()).map((status) => status.resource));
    for (const resource of dataset.resources()) {
      const expected = dataset
        .rows(resource)
        .map((row) => `${String(row.id)} ${String(row.updated_at ?? '')}`)
        .sort();
      if (!tables.has(resource)) {
        found.push(`${resource}: no table`);
        continue;
      }
      const timed = dataset.rows(resource).some((row) => 'updated_at' in row);
      const stored: string[] = [];
      let after: string | null = null;
      for (;;) {
        const batch: Array<{ id: string; value: unknown }> = timed
          ? await warehouse.tools.readColumn(resource, 'updated_at', after, 5000)
          : (
              await warehouse.reads.readRows({
                table: resource,
                columns: [],
                afterId: after,
                limit: 5000,
                live: false,
              })
            ).map((row) => ({ id: String(row.id), value: '' }));
        for (const { id, value } of batch) stored.push(`${id} ${String(value ?? '')}`);
        if (batch.length < 5000) break;
        after = batch.at(-1)!.id;
      }
      stored.sort();
      if (
        stored.length !== expected.length ||
        stored.some((row, index) => row !== expected[index])
      ) {
        found.push(`${resource}: ${stored.length} rows stored, ${expected.length} served`);
      }
    }
  } finally {
    await warehouse.close();
  }
  return found;
}

export function formatTeamsReport(results: TeamsResults): string {
  const { settings } = results;
  const lines = [
    `A fleet: ${settings.teams} teams, each its own fake server (budget ${settings.budget} requests / 5 min, ${settings.faultRate * 100}% faults, ${settings.latencyMs} ms a page); the largest has ${formatInteger(settings.rows)} chat messages, team i of n (i + 1) / n of it; ${formatInteger(Object.values(results.rowsPerTeam).reduce((a, b) => a + b, 0))} rows in all.`,
    `sync --team all, ${settings.teamsAtOnce} teams at once, page size ${settings.pageSize}, page_threads: ${settings.pageThreads}; Node ${settings.node}, ${settings.cores} cores, load average ${settings.loadAverage.map((value) => value.toFixed(2)).join(' ')} at the end.`,
    '',
  ];
  for (const entry of results.byDialect) {
    const times = Object.values(entry.fleet.teamSeconds);
    const sum = times.reduce((a, b) => a + b, 0);
    lines.push(
      ...table(
        ['', 'seconds', 'peak RSS MB', 'requests'],
        [
          [
            `${entry.dialect}: sync --team all`,
            entry.fleet.seconds.toFixed(1),
            entry.fleet.peakRssMb.toFixed(0),
            formatInteger(entry.fleet.requests),
          ],
          [
            `${entry.dialect}: ${entry.slowest.team} alone`,
            entry.slowest.seconds.toFixed(1),
            entry.slowest.peakRssMb.toFixed(0),
            formatInteger(entry.slowest.requests),
          ],
        ],
        [false, true, true, true],
      ),
      `  fleet wall / slowest team alone  ${entry.checks.wallRatio.toFixed(2)}  (the teams' run times add up to ${sum.toFixed(1)} s; / ${settings.teamsAtOnce} at once = ${(sum / settings.teamsAtOnce).toFixed(1)} s)`,
      `  peak RSS ${entry.fleet.peakRssMb.toFixed(0)} MB  goal < ${entry.checks.rssGoalMb} MB (256 + 20 × ${settings.teamsAtOnce})  ${entry.checks.rssMet ? 'met' : 'NOT MET'}`,
      `  warehouses equal to their servers: ${entry.exact.length} of ${settings.teams}  ${entry.checks.exactMet ? 'met' : 'NOT MET'}`,
      ...Object.entries(entry.differences).map(
        ([team, found]) => `    ${team}: ${found.join('; ')}`,
      ),
      '',
    );
  }
  return lines.join('\n').trimEnd();
}

export function teamsMain(
  argv: string[],
  output: Pick<BenchOutput, 'out' | 'progress' | 'smallTeams'> & {
    teams?(results: TeamsResults): void;
  },
): Promise<number> {
  // Many small teams in one daemon: a mode of its own (teams-small.ts).
  if (argv.includes('--small')) {
    return smallTeamsMain(argv, { ...output, small: output.smallTeams });
  }
  return runBenchMode(
    {
      name: 'teams benchmark',
      parse: (args) => parseTeamsArgs(args),
      usageError: BenchUsageError,
      run: (options) => runTeamsBench(options, output),
      format: formatTeamsReport,
    },
    argv,
    { out: output.out, progress: output.progress, results: output.teams },
  );
}
