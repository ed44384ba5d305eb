import { setMaxListeners } from 'node:events';
import { ExitCode, describeError } from '../errors.js';
import { readApiKey, type Fleet, type TeamSetup } from '../config/fleet.js';
import { ALL_TEAMS } from '../config/teams.js';
import { Slots, type Slot } from '../daemon/slots.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import {
  FULL_REFRESH_ALL,
  recordFailedRun,
  runSync,
  syncRunKind,
  type FullRefresh,
  type SecretsSettings,
  type SyncEvents,
  type SyncReport,
} from '../sync/engine.js';
import type { CommandContext } from './context.js';
import type { KeptWarehouse } from './kept-warehouse.js';
import { formatSyncSummary } from './output.js';
import { createProgressEvents } from './progress.js';
import type { SyncRunMetrics } from './run-metrics.js';
import { combineEvents } from '../sync/run-types.js';
import { stopOnSignals } from './stop-signals.js';
import {
  inFleet,
  bucketsOfSync,
  createFiles,
  createObjectStore,
  probeBuckets,
  type Env,
  createSecrets,
  createSigner,
  createSource,
  createWarehouse,
  startAudit,
  syncOptionsFromConfig,
  threadPlanOf,
  warnIfSecretsReadableByOthers,
} from './wiring.js';
import { writeCheckpoint, type CheckpointTarget } from '../audit/checkpoints.js';
import { isBucketText } from '../storage/location.js';
import { privateModes } from '../private-files.js';
import type { CheckpointSigner } from '../interfaces.js';

export interface SyncCommandOptions {
  /** `--full-refresh` alone (true), or with the resources to walk from the start. */
  fullRefresh?: boolean | string[];
  acceptSchemaChange?: boolean;
  resources?: string;
  json?: boolean;
}

/** `--full-refresh [resources...]` as the run takes it: every resource, or the ones named. */
export function fullRefreshOf(option: boolean | string[] | undefined): FullRefresh | undefined {
  if (option === undefined || option === false) return undefined;
  return option === true || option.length === 0
    ? FULL_REFRESH_ALL
    : { kind: 'some', resources: option };
}

export async function runSyncCommand(
  context: CommandContext,
  options: SyncCommandOptions,
): Promise<number> {
  const flags = options.resources
    ? {
        resources: options.resources
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean),
      }
    : {};
  if (context.globals.team === ALL_TEAMS) {
    const { setup } = context.setup({ server: true }, flags);
    if (setup.kind === 'fleet') return syncEveryTeam(context, setup.fleet, options);
  }
  const config = context.config({ server: true }, flags);
  const logger = context.logger(config);
  // SIGTERM/SIGINT: the page in flight commits or rolls back, the lock is released, and the next
  // run resumes there.
  const stop = context.environment.signal
    ? undefined
    : stopOnSignals(logger, 'Stopping after the page in flight');
  try {
    // A fleet's team, chosen with --team NAME, is labelled with its name.
    const metrics = await runMetricsOf(config, logger, context.chosenTeam ?? config.metrics.team);
    const report = await syncAndSendMetrics(metrics, (measured) =>
      syncOnce(config, logger, {
        fullRefresh: fullRefreshOf(options.fullRefresh),
        acceptSchemaChange: options.acceptSchemaChange,
        signal: context.environment.signal ?? stop?.signal,
        env: context.environment.env,
        events: combineEvents(createProgressEvents(logger, context.liveArea()), measured?.events),
        onAttempt: measured?.onAttempt,
      }),
    );
    context.output.out(
      options.json ? JSON.stringify(report, jsonReplacer, 2) : formatSyncSummary(report),
    );
    return exitCodeFor(report);
  } finally {
    stop?.dispose();
  }
}

/** How a team's run ended in `sync --team all`. */
interface TeamOutcome {
  team: TeamSetup;
  report?: SyncReport;
  /** Why it could not run (or was interrupted before a slot was free). */
  error?: unknown;
}

/**
 * `sync --team all`: every team of a `teams:` configuration, at most `teams_at_once` at a time
 * (in the order of the list), each with its own logger, source, lock and warehouse; a team that
 * cannot run never stops another. One summary per team, then one line for all. The exit code is
 * the worst: 130 when stopped by a signal, else 1 when a team could not run, else 3 when a run
 * was partial, else 0.
 */
async function syncEveryTeam(
  context: CommandContext,
  fleet: Fleet,
  options: SyncCommandOptions,
): Promise<number> {
  const logger = context.logger(fleet.teams[0]!.config);
  const stop = context.environment.signal
    ? undefined
    : stopOnSignals(logger, 'Stopping after the page in flight');
  const signal = context.environment.signal ?? stop!.signal;
  const slots = new Slots(fleet.teamsAtOnce);
  const teamsAtOnce = Math.min(fleet.teamsAtOnce, fleet.teams.length);
  // Each team hangs one listener on the signal (its run's, or its wait for a slot's): no leak.
  setMaxListeners(Math.max(10, 2 * fleet.teams.length + 10), signal);
  try {
    const outcomes = await Promise.all(
      fleet.teams.map(async (team): Promise<TeamOutcome> => {
        const teamLogger = logger.child({ team: team.name });
        let slot: Slot;
        try {
          slot = await slots.acquire(signal);
        } catch (error) {
          return { team, error };
        }
        try {
          const config = inFleet(team.config, teamsAtOnce);
          const metrics = await runMetricsOf(config, teamLogger, team.name);
          const report = await syncAndSendMetrics(metrics, (measured) =>
            syncOnce(config, teamLogger, {
              teamsAtOnce,
              fullRefresh: fullRefreshOf(options.fullRefresh),
              acceptSchemaChange: options.acceptSchemaChange,
              signal,
              env: context.environment.env,
              readApiKey: () =>
                readApiKey(team, context.environment.env, (message) => teamLogger.warn(message)),
              events: measured?.events,
              onAttempt: measured?.onAttempt,
            }),
          );
          return { team, report };
        } catch (error) {
          teamLogger.error({ error: describeError(error) }, 'The team could not be synced');
          return { team, error };
        } finally {
          slot.release();
        }
      }),
    );
    const exitCode = signal.aborted
      ? ExitCode.interrupted
      : outcomes.some((outcome) => outcome.report === undefined)
        ? ExitCode.failed
        : outcomes.some((outcome) => exitCodeFor(outcome.report!) !== ExitCode.ok)
          ? ExitCode.partial
          : ExitCode.ok;
    if (options.json) {
      context.output.out(
        JSON.stringify(
          {
            teams: outcomes.map(({ team, report, error }) =>
              report
                ? { team: team.name, ...report }
                : { team: team.name, status: 'failed', error: describeError(error) },
            ),
            exit_code: exitCode,
          },
          jsonReplacer,
          2,
        ),
      );
      return exitCode;
    }
    for (const { team, report, error } of outcomes) {
      const text = report ? formatSyncSummary(report) : `could not run: ${describeError(error)}`;
      context.output.out(`${team.name}: ${text.replace(/\n/g, '\n  ')}`);
    }
    const count = (status: string) =>
      outcomes.filter((outcome) => (outcome.report?.status ?? 'failed') === status);
    const failed = count('failed').map((outcome) => outcome.team.name);
    const partial = count('partial').map((outcome) => outcome.team.name);
    context.output.out(
      `Teams: ${count('ok').length} ok` +
        (partial.length > 0 ? `, ${partial.length} partial (${partial.join(', ')})` : '') +
        (failed.length > 0 ? `, ${failed.length} could not run (${failed.join(', ')})` : '') +
        '.',
    );
    return exitCode;
  } finally {
    stop?.dispose();
  }
}

/** A `sync` whose metrics are sent once it has ended, however it ended (when configured). */
async function syncAndSendMetrics(
  metrics: SyncRunMetrics | undefined,
  sync: (measured: ReturnType<SyncRunMetrics['started']> | undefined) => Promise<SyncReport>,
): Promise<SyncReport> {
  const measured = metrics?.started();
  let report: SyncReport;
  try {
    report = await sync(measured);
  } catch (error) {
    await metrics?.finished({ error });
    throw error;
  }
  await metrics?.finished({ report });
  return report;
}

/** One sync pass with the real parts; the daemon and `demo` use it too. */
/**
 * A run's metrics when the configuration sends them anywhere, else undefined. Loaded only then:
 * they bring prom-client, more to load than a small team's whole unchanged run (issue 47).
 */
async function runMetricsOf(
  config: Config,
  logger: Logger,
  team: string | undefined,
): Promise<SyncRunMetrics | undefined> {
  if (config.metrics.pushUrl === undefined && config.metrics.textfile === undefined)
    return undefined;
  const { SyncRunMetrics } = await import('./run-metrics.js');
  return SyncRunMetrics.of(config, logger, team);
}

export async function syncOnce(
  config: Config,
  logger: Logger,
  extra: {
    /** Teams of a fleet syncing at the same time, this one included (default 1: alone). */
    teamsAtOnce?: number;
    fullRefresh?: FullRefresh;
    acceptSchemaChange?: boolean;
    signal?: AbortSignal;
    events?: SyncEvents;
    onAttempt?: Parameters<typeof createSource>[2];
    /** Reads the API key for this run (a team's, from its file or variable, afresh each run). */
    readApiKey?: () => string;
    /** The command's environment (where the AWS credential chain starts); process.env if not given. */
    env?: Env;
    /** A daemon's warehouse, open between its runs (else opened for this run and closed). */
    kept?: KeptWarehouse;
  } = {},
): Promise<SyncReport> {
  const env = extra.env ?? process.env;
  const threads = threadPlanOf(config, extra.teamsAtOnce);
  const open = () => createWarehouse(config, logger, { threads });
  const { kept } = extra;
  const warehouse = kept ? await kept.take(open) : await open();
  let ended = false;
  try {
    await startAudit(config, warehouse, logger);
    let secrets: SecretsSettings;
    let source: ReturnType<typeof createSource>;
    let signer: CheckpointSigner | undefined;
    try {
      if (extra.readApiKey) config = { ...config, apiKey: extra.readApiKey() };
      secrets = createSecrets(config, logger);
      signer = createSigner(config, logger);
      source = createSource(config, logger, extra.onAttempt);
      // A bucket that cannot be used stops the run before anything is fetched.
      if (bucketsOfSync(config).length > 0) await probeBuckets(config, env);
    } catch (error) {
      // A key or setting that cannot be used: recorded as a failed run, so monitoring sees it.
      await recordFailedRun(
        warehouse,
        await syncRunKind(warehouse.bookkeeping, extra.fullRefresh),
        error,
      ).catch((recordError: unknown) =>
        logger.warn({ error: describeError(recordError) }, 'Could not record the failed run'),
      );
      throw error;
    }
    let report: SyncReport | undefined;
    try {
      report = await runSync({
        ...syncOptionsFromConfig(config, { source, warehouse, logger, secrets }, threads),
        fullRefresh: extra.fullRefresh,
        acceptSchemaChange: extra.acceptSchemaChange,
        signal: extra.signal,
        events: extra.events,
        files: createFiles(config, { source, warehouse, logger, env }),
      });
    } finally {
      await source.close();
      await warnIfSecretsReadableByOthers(config, warehouse, logger).catch(() => undefined);
      // Every run ends with a checkpoint, a failed or interrupted one too: a step of its own.
      const signing = { stage: 'signing the audit checkpoint', unit: 'checkpoints', total: 1 };
      if (signer) extra.events?.onProgress?.({ ...signing, done: 0 });
      const audit = signer
        ? await writeCheckpointTo(config, env, (target) =>
            writeCheckpoint(warehouse.audit, signer!, target, logger),
          )
        : undefined;
      if (audit) extra.events?.onProgress?.({ ...signing, done: 1 });
      if (report && audit) report = { ...report, audit };
    }
    ended = true;
    return report!;
  } finally {
    if (kept) await kept.give(warehouse, ended);
    else await warehouse.close();
  }
}

/** The checkpoint file, or its bucket (with its Object Lock retention), for `write`. */
async function writeCheckpointTo<T>(
  config: Config,
  env: Env,
  write: (target: CheckpointTarget) => Promise<T>,
): Promise<T> {
  const location = config.audit.checkpointFile!;
  if (!isBucketText(location)) {
    return write({ kind: 'file', file: location, modes: privateModes(config.dataFileMode) });
  }
  const store = createObjectStore(config, env, location);
  try {
    return await write({ kind: 'bucket', store, retention: config.audit.checkpointRetention });
  } finally {
    store.close();
  }
}

export function exitCodeFor(report: SyncReport): number {
  return report.status === 'ok' && report.audit?.error === undefined
    ? ExitCode.ok
    : ExitCode.partial;
}

/** JSON.stringify that writes bigint ids as their digits. */
export function jsonReplacer(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}
