/**
 * `ocs-sync daemon`: the long-running service (see src/daemon/daemon.ts), or with a `teams:`
 * configuration the fleet's (src/daemon/fleet.ts): every team, those of `--teams a,b`, or those of
 * `--shard i/n`. Configuration problems stop it at start (exit 1); once running, failed syncs
 * never stop it; SIGTERM/SIGINT (or the environment's abort signal in tests) shut it down cleanly
 * with exit 0. In a fleet a team whose key cannot be used is reported at start and fails its runs
 * (its /healthz says why) while the others run.
 */
import { readApiKey, type Fleet, type TeamSetup } from '../config/fleet.js';
import type { Config } from '../config/schema.js';
import { ALL_TEAMS, parseShard, shardOfTeam, type TeamChoice } from '../config/teams.js';
import { ExitCode, UsageError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { CleanupStack } from '../daemon/cleanup-stack.js';
import { runDaemon, type DaemonStopResult, type DaemonSyncRequest } from '../daemon/daemon.js';
import { startFleet } from '../daemon/fleet.js';
import type { TeamJobs } from '../daemon/team-runner.js';
import type { CommandContext } from './context.js';
import { syncOnce } from './sync-command.js';
import { KeptWarehouse } from './kept-warehouse.js';
import { scheduleSnapshots } from './snapshot-schedule.js';
import { FULL_REFRESH_ALL } from '../sync/engine.js';
import { openWarehouseReader } from '../warehouse/open.js';
import type { WarehouseReader } from '../warehouse/reader.js';
import { createExporter, createSecrets, inFleet } from './wiring.js';
import { readWarehouseFacts } from '../daemon/warehouse-facts.js';
import { pickTeam } from '../config/load.js';

export interface DaemonCommandOptions {
  /** Comma-separated team names. */
  teams?: string;
  /** `i/n`. */
  shard?: string;
}

/** Exit this long after shutdown if something (a hung request, a lock wait) still holds the process. */
const FORCED_EXIT_AFTER_MS = 500;

export async function runDaemonCommand(
  context: CommandContext,
  options: DaemonCommandOptions = {},
): Promise<number> {
  const { setup, filePath } = context.setup({ server: true, teams: teamsChosen(options) });
  if (setup.kind === 'fleet') return runFleetDaemon(context, setup.fleet, options, filePath);
  if (options.teams !== undefined || options.shard !== undefined) {
    throw new UsageError(
      `${options.teams !== undefined ? '--teams' : '--shard'} chooses teams of a configuration with a teams: list; this one has none (give it with --config FILE or OCS_CONFIG).`,
    );
  }
  const config = context.config({ server: true });
  const logger = context.logger(config);
  // Key files are read at every run; a bad one should stop the daemon now (exit 1), not make
  // every run fail while it looks alive.
  createSecrets(config, logger);
  const cleanup = new CleanupStack();
  const fromProcess = context.environment.signal === undefined;
  const signal = context.environment.signal ?? processSignal(logger, cleanup);

  scheduleSnapshots(config, context.environment.env, logger, cleanup);
  const kept = keptWarehouse(cleanup, logger);
  const result = await runDaemon({
    schedule: config.schedule,
    fullRefreshSchedule: config.fullRefreshSchedule,
    timezone: config.timezone,
    health: config.health,
    logger,
    signal,
    cleanup,
    sync: ({ kind, signal: runSignal, events, onAttempt }) =>
      syncOnce(config, logger, {
        fullRefresh: kind === 'full_refresh' ? FULL_REFRESH_ALL : undefined,
        signal: runSignal,
        env: context.environment.env,
        events,
        onAttempt,
        kept,
      }),
    ...warehouseReads(config),
    team: config.metrics.team,
    exporter: createExporter(config, logger),
  });

  return stopped(result, logger, fromProcess);
}

/** Exit 0 once stopped, and surely (`fromProcess`: the real process) soon after. */
function stopped(result: DaemonStopResult, logger: Logger, fromProcess: boolean): number {
  if (fromProcess) {
    // Everything is closed, so the process normally exits at once; this only fires if some
    // handle (a request or lock wait the run did not give up) would keep it alive.
    setTimeout(() => process.exit(process.exitCode ?? ExitCode.ok), FORCED_EXIT_AFTER_MS).unref();
    if (result.abandonedRun) logger.warn('Exiting with a run still in progress');
  }
  return ExitCode.ok;
}

/** The fleet's daemon: the teams chosen, each its own schedules, runs and health. */
async function runFleetDaemon(
  context: CommandContext,
  fleet: Fleet,
  options: DaemonCommandOptions,
  filePath: string | undefined,
): Promise<number> {
  const chosen = chooseTeams(fleet, { ...options, team: context.globals.team }, filePath);
  // The process's settings (log level, health listener) are every team's.
  const shared = fleet.teams[0]!.config;
  const logger = context.logger(shared);
  const env = context.environment.env;
  const cleanup = new CleanupStack();
  const fromProcess = context.environment.signal === undefined;
  const signal = context.environment.signal ?? processSignal(logger, cleanup);
  if (chosen.length === 0) {
    logger.warn(
      { shard: options.shard, teams: fleet.teams.map((team) => team.name) },
      'No team falls in this shard; the daemon runs none (its /healthz answers 200)',
    );
  }
  const teamsAtOnce = Math.min(fleet.teamsAtOnce, chosen.length);
  const teams = chosen.map((team) => {
    const teamLogger = logger.child({ team: team.name });
    const config = inFleet(team.config, teamsAtOnce);
    const warn = (message: string) => teamLogger.warn(message);
    // Key problems are reported now; the team's runs fail with them (each run reads its keys
    // afresh, so a key put right is used at the next run) while the other teams run.
    try {
      createSecrets({ ...config, apiKey: readApiKey(team, env, warn) }, teamLogger);
    } catch (error) {
      teamLogger.error(
        { error: describeError(error) },
        'This team cannot sync until its key is put right; the other teams run',
      );
    }
    scheduleSnapshots(config, env, teamLogger, cleanup);
    const kept = keptWarehouse(cleanup, teamLogger);
    return {
      name: team.name,
      schedule: config.schedule,
      fullRefreshSchedule: config.fullRefreshSchedule,
      timezone: config.timezone,
      maxAgeSeconds: config.health.maxAgeSeconds,
      logger: teamLogger,
      sync: ({ kind, signal: runSignal, events, onAttempt }: DaemonSyncRequest) =>
        syncOnce(config, teamLogger, {
          teamsAtOnce,
          fullRefresh: kind === 'full_refresh' ? FULL_REFRESH_ALL : undefined,
          signal: runSignal,
          env: context.environment.env,
          events,
          onAttempt,
          readApiKey: () => readApiKey(team, env, warn),
          kept,
        }),
      ...warehouseReads(config),
      exporter: createExporter(config, teamLogger, team.name),
    };
  });
  const running = await startFleet({
    teams,
    teamsAtOnce: fleet.teamsAtOnce,
    listen: shared.health.listen,
    logger,
    signal,
    cleanup,
  });
  return stopped(await running.stopped, logger, fromProcess);
}

/** The warehouse a team's runs keep open between them, closed when the daemon stops. */
function keptWarehouse(cleanup: CleanupStack, logger: Logger): KeptWarehouse {
  const kept = new KeptWarehouse(logger);
  cleanup.add('the warehouse kept between runs', () => kept.close());
  return kept;
}

/** The teams --teams or --shard name, for the configuration (chooseTeams checks the flags). */
function teamsChosen(options: DaemonCommandOptions): TeamChoice | undefined {
  if (options.teams !== undefined) {
    return { names: options.teams.split(',').map((name) => name.trim()) };
  }
  const shard = options.shard === undefined ? undefined : parseShard(options.shard);
  return shard === undefined || 'problem' in shard ? undefined : { shard };
}

/** The teams a fleet's daemon runs: --team NAME, --teams a,b, --shard i/n, or every one. */
export function chooseTeams(
  fleet: Fleet,
  options: DaemonCommandOptions & { team?: string },
  filePath: string | undefined,
): TeamSetup[] {
  const given = [
    options.team !== undefined && options.team !== ALL_TEAMS ? '--team' : undefined,
    options.teams !== undefined ? '--teams' : undefined,
    options.shard !== undefined ? '--shard' : undefined,
  ].filter((flag) => flag !== undefined);
  if (given.length > 1) {
    throw new UsageError(`${given.join(' and ')} each choose the teams to run; give one of them.`);
  }
  if (options.team !== undefined && options.team !== ALL_TEAMS) {
    return [pickTeam(fleet, options.team, filePath)];
  }
  if (options.teams !== undefined) {
    const names = [
      ...new Set(
        options.teams
          .split(',')
          .map((name) => name.trim())
          .filter((name) => name !== ''),
      ),
    ];
    if (names.length === 0)
      throw new UsageError('--teams needs team names, e.g. --teams kenya,malawi.');
    return names.map((name) => pickTeam(fleet, name, filePath));
  }
  if (options.shard !== undefined) {
    const shard = parseShard(options.shard);
    if ('problem' in shard) throw new UsageError(`--shard ${shard.problem}.`);
    return fleet.teams.filter((team) => shardOfTeam(team.name, shard.count) === shard.index);
  }
  return fleet.teams;
}

/** What a team's daemon reads of its warehouse (TeamJobs), opened for each read. */
function warehouseReads(config: Config): Pick<TeamJobs, 'readFacts' | 'readUnfinishedFullRefresh'> {
  return {
    readFacts: () => readWarehouse(config, readWarehouseFacts),
    readUnfinishedFullRefresh: () =>
      readWarehouse(config, async (reader) => {
        // A dead process's run reads as interrupted once nobody holds the lock.
        const [last] = await reader.runs({ limit: 1, kinds: ['full_refresh'] });
        return last && last.status !== 'ok' && last.status !== 'partial'
          ? { runId: last.id, status: last.status }
          : undefined;
      }),
  };
}

/** `read` on the warehouse, opened to read only; undefined when there is none yet. */
async function readWarehouse<T>(
  config: Config,
  read: (reader: WarehouseReader) => Promise<T | undefined>,
): Promise<T | undefined> {
  // A warehouse the first run has yet to create has nothing to tell.
  const reader = await openWarehouseReader({
    url: config.warehouse.url,
    schema: config.warehouse.schema,
  }).catch(() => undefined);
  if (!reader) return undefined;
  try {
    return await read(reader);
  } finally {
    await reader.close();
  }
}

/** An AbortSignal for SIGTERM and SIGINT; a second signal exits at once. */
export function processSignal(logger: Logger, cleanup: CleanupStack): AbortSignal {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      logger.warn({ signal: name }, 'Second signal: exiting now');
      process.exit(128 + (name === 'SIGINT' ? 2 : 15));
    }
    logger.info({ signal: name }, 'Signal received');
    controller.abort(new Error(`${name} received`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  cleanup.add('signal handlers', () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  });
  return controller.signal;
}
