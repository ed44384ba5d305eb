/**
 * The daemon of a fleet: one TeamRunner per team (its own schedules, runs, metrics and health),
 * at most `teams_at_once` of them syncing together (slots.ts), one health server for all. A
 * team's runs never wait for another's except for a slot, and a slot is never held by a run
 * that has stopped moving (team-runner.ts). SIGTERM stops every team as it stops the daemon of
 * one: the schedules stop, each run in progress commits or rolls back its page, cleanups run in
 * reverse.
 *
 * `/healthz` is 200 when every team is healthy and 503 naming those that are not, with every
 * team's report; `/healthz?team=NAME` is one team's (404 for a name the fleet does not run);
 * `/livez` is 503 only when a stopped run cannot end, which only a restart mends; `/metrics` has
 * every team's series, each labelled `team`, and the process's own.
 */
import { setMaxListeners } from 'node:events';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { ListenAddress } from '../listen-address.js';
import type { Logger } from '../log.js';
import { CleanupStack } from './cleanup-stack.js';
import {
  DEFAULT_SHUTDOWN_GRACE_MS,
  livenessAnswer,
  notFound,
  serveHealth,
  stopOnSignal,
  warnIfMaxAgeTooShort,
  type DaemonStopResult,
} from './daemon.js';
import type { HealthAnswer, HealthServer } from './health-server.js';
import { SyncMetrics, renderMetrics } from './metrics.js';
import type { BackoffPolicy, ScheduleFunction, SchedulerClock } from './scheduler.js';
import { Slots } from './slots.js';
import { TeamRunner, type TeamJobs } from './team-runner.js';

export interface FleetTeam extends TeamJobs {
  name: string;
  maxAgeSeconds: number;
  /** The team's logger: every line carries its name. */
  logger: Logger;
}

export interface FleetOptions {
  teams: readonly FleetTeam[];
  teamsAtOnce: number;
  listen: ListenAddress | null;
  logger: Logger;
  /** Aborting it stops every team. */
  signal: AbortSignal;
  scheduleFunction?: ScheduleFunction;
  clock?: SchedulerClock;
  backoff?: Partial<BackoffPolicy>;
  /** How long shutdown waits for the runs in progress; also how long a stopped run may take. */
  shutdownGraceMs?: number;
  /** Cleanups registered by the caller before the fleet starts (they run last). */
  cleanup?: CleanupStack;
}

export interface RunningFleet {
  readonly teams: ReadonlyMap<string, TeamRunner>;
  readonly slots: Slots;
  readonly healthServer: HealthServer | undefined;
  /** What /healthz answers (`team`: what /healthz?team=NAME answers). */
  health(team?: string | null): HealthAnswer;
  readonly stopped: Promise<DaemonStopResult>;
}

export async function startFleet(options: FleetOptions): Promise<RunningFleet> {
  const { logger, signal } = options;
  const clock = options.clock ?? { now: () => Date.now() };
  const cleanup = options.cleanup ?? new CleanupStack();
  const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  const slots = new Slots(options.teamsAtOnce);
  // Each team hangs one listener on the signal (its run's, or its wait for a slot's): no leak.
  setMaxListeners(Math.max(10, 2 * options.teams.length + 10), signal);
  const teams = new Map<string, TeamRunner>();
  for (const team of options.teams) {
    const runner = await TeamRunner.create({
      ...team,
      signal,
      clock,
      scheduleFunction: options.scheduleFunction,
      backoff: options.backoff,
      metrics: new SyncMetrics({ clock, team: team.name, fleet: true }),
      slots,
      stopStalledRuns: true,
      graceMs,
    });
    teams.set(team.name, runner);
  }
  const processRegistry = new Registry();
  collectDefaultMetrics({ register: processRegistry });

  const health = (name?: string | null): HealthAnswer => {
    if (name !== undefined && name !== null) {
      const runner = teams.get(name);
      if (runner === undefined) {
        return notFound(
          `no team ${JSON.stringify(name.slice(0, 80))} runs here; this daemon runs ${[...teams.keys()].join(', ')}`,
        );
      }
      const { httpStatus, ...report } = runner.health();
      return { httpStatus, body: { team: name, ...report } };
    }
    const reports = new Map([...teams].map(([team, runner]) => [team, runner.health()]));
    const unhealthy = [...reports].filter(([, report]) => report.httpStatus !== 200);
    return {
      httpStatus: unhealthy.length === 0 ? 200 : 503,
      body: {
        status: unhealthy.length === 0 ? 'ok' : 'unhealthy',
        reason:
          unhealthy.length === 0
            ? `Every team is healthy (${teams.size}).`
            : `${unhealthy.length} of ${teams.size} teams unhealthy: ${unhealthy
                .map(([team, report]) => `${team} (${report.reason})`)
                .join('; ')}`,
        unhealthy: unhealthy.map(([team]) => team),
        teams: Object.fromEntries(
          [...reports].map(([team, { httpStatus: _status, ...report }]) => [team, report]),
        ),
      },
    };
  };

  const healthServer = await serveHealth({
    listen: options.listen,
    logger,
    cleanup,
    health,
    live: () =>
      livenessAnswer([...teams].map(([name, runner]) => ({ name, liveness: runner.liveness() }))),
    metrics: () =>
      renderMetrics([
        ...[...teams.values()].map((runner) => runner.metrics.registry),
        processRegistry,
      ]),
  });

  const stopped = stopOnSignal({
    signal,
    cleanup,
    logger,
    graceMs,
    schedulers: [...teams.values()].map((runner) => runner.scheduler),
  });

  if (!signal.aborted) {
    for (const runner of teams.values()) runner.start();
    logger.info(
      {
        teams: [...teams.keys()],
        teamsAtOnce: options.teamsAtOnce,
        health: healthServer?.url ?? 'off',
      },
      `Daemon started for ${teams.size} teams, at most ${options.teamsAtOnce} syncing at once`,
    );
    for (const team of options.teams) {
      warnIfMaxAgeTooShort(teams.get(team.name)!.scheduler, team.maxAgeSeconds, team.logger);
    }
  }

  return { teams, slots, healthServer, health, stopped };
}
