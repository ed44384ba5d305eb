/**
 * Pure: the throughput goals of issue 23, from one round's stages, start-up included (each
 * stage's process from its start to its result, and all the CPU it used):
 *
 * - slow pages (a fixed latency a page): full sync / the fetch-and-parse loop at that latency;
 * - 0 ms: full sync / the limit max(fetch-only, write-only, CPU floor), where the CPU floor is
 *   all the CPU the server, the fetch and the write need, spread over the machine's cores;
 * - client CPU: the sync's / (fetch-only's + write-only's);
 * - PostgreSQL: full sync / its write-only floor.
 */
import type { Check, MeasuredStage } from './report.js';

export const GOAL_SLOW_OVER_FETCH = 0.85;
export const GOAL_SYNC_OVER_LIMIT = 1.1;
export const GOAL_CLIENT_CPU = 1.05;
export const GOAL_POSTGRES_OVER_WRITE = 1.1;

/** One round's stages: the three at the base latency, and the two at the slow one if measured. */
export interface GoalRound {
  fetch: MeasuredStage;
  write: MeasuredStage;
  sync: MeasuredStage;
  slowFetch?: MeasuredStage;
  slowSync?: MeasuredStage;
}

export interface GoalFigures {
  /** Slow sync / slow fetch-and-parse loop (undefined without the slow stages). */
  slowRatio?: number;
  /** (server CPU during fetch-only + fetch-only CPU + write-only CPU) / cores, seconds. */
  cpuFloorSeconds: number;
  limitSeconds: number;
  syncOverLimit: number;
  /** Sync CPU / (fetch-only CPU + write-only CPU). */
  clientCpuRatio: number;
}

export function goalFigures(round: GoalRound, cores: number): GoalFigures {
  const { fetch, write, sync, slowFetch, slowSync } = round;
  const cpuFloorSeconds =
    ((fetch.serverCpuSeconds ?? 0) + fetch.processCpuSeconds + write.processCpuSeconds) /
    Math.max(1, cores);
  const limitSeconds = Math.max(fetch.processSeconds, write.processSeconds, cpuFloorSeconds);
  return {
    ...(slowFetch && slowSync
      ? { slowRatio: slowSync.processSeconds / slowFetch.processSeconds }
      : {}),
    cpuFloorSeconds,
    limitSeconds,
    syncOverLimit: sync.processSeconds / limitSeconds,
    clientCpuRatio: sync.processCpuSeconds / (fetch.processCpuSeconds + write.processCpuSeconds),
  };
}

const seconds = (value: number) => `${value.toFixed(2)} s`;

/** What the slow ratio compares. */
function slowDetail(round: GoalRound, slowLatencyMs: number): string {
  return `${slowLatencyMs} ms a page: sync ${seconds(round.slowSync!.processSeconds)} / fetch-and-parse loop ${seconds(round.slowFetch!.processSeconds)}`;
}

/** What the limit is made of: the two floors and the CPU floor with each stage's CPU seconds. */
function limitDetail(round: GoalRound, figures: GoalFigures, cores: number): string {
  const { fetch, write, sync } = round;
  return (
    `sync ${seconds(sync.processSeconds)} / max(fetch-only ${seconds(fetch.processSeconds)}, ` +
    `write-only ${seconds(write.processSeconds)}, CPU floor ${seconds(figures.cpuFloorSeconds)} = ` +
    `(server ${(fetch.serverCpuSeconds ?? 0).toFixed(2)} + fetch ${fetch.processCpuSeconds.toFixed(2)} + ` +
    `write ${write.processCpuSeconds.toFixed(2)} CPU-s) / ${cores} cores)`
  );
}

function cpuDetail(round: GoalRound): string {
  const { fetch, write, sync } = round;
  return `sync ${sync.processCpuSeconds.toFixed(2)} CPU-s / (fetch-only ${fetch.processCpuSeconds.toFixed(2)} + write-only ${write.processCpuSeconds.toFixed(2)} CPU-s)`;
}

/** One line per round: every goal's ratio in that round, and what it is made of. */
export function describeGoalRound(round: GoalRound, cores: number, slowLatencyMs: number): string {
  const figures = goalFigures(round, cores);
  const parts = [];
  if (figures.slowRatio !== undefined) {
    parts.push(
      `${slowLatencyMs} ms a page ${figures.slowRatio.toFixed(2)} (goal <= ${GOAL_SLOW_OVER_FETCH}; ${slowDetail(round, slowLatencyMs)})`,
    );
  }
  parts.push(
    `0 ms sync / limit ${figures.syncOverLimit.toFixed(2)} (goal <= ${GOAL_SYNC_OVER_LIMIT}; ${limitDetail(round, figures, cores)})`,
    `client CPU ${figures.clientCpuRatio.toFixed(2)} (goal <= ${GOAL_CLIENT_CPU}; ${cpuDetail(round)})`,
  );
  return parts.join('; ');
}

function check(name: string, value: number, goal: number, detail: string): Check {
  return {
    name,
    value,
    shown: value.toFixed(2),
    target: `<= ${goal}`,
    met: value <= goal,
    detail,
  };
}

/** The goals as checks, from the median round's stages (and PostgreSQL's two, when measured). */
export function goalChecks(
  round: GoalRound,
  cores: number,
  slowLatencyMs: number,
  postgres?: { sync: MeasuredStage; write: MeasuredStage },
): Check[] {
  const figures = goalFigures(round, cores);
  const checks: Check[] = [];
  if (figures.slowRatio !== undefined) {
    checks.push(
      check(
        `sync / fetch-and-parse loop at ${slowLatencyMs} ms a page`,
        figures.slowRatio,
        GOAL_SLOW_OVER_FETCH,
        `start-up included; ${slowDetail(round, slowLatencyMs)}`,
      ),
    );
  }
  checks.push(
    check(
      'sync / limit at 0 ms, SQLite',
      figures.syncOverLimit,
      GOAL_SYNC_OVER_LIMIT,
      `start-up included; ${limitDetail(round, figures, cores)}`,
    ),
    check(
      'client CPU / (fetch-only + write-only CPU)',
      figures.clientCpuRatio,
      GOAL_CLIENT_CPU,
      cpuDetail(round),
    ),
  );
  if (postgres) {
    checks.push(
      check(
        'sync / write-only floor, PostgreSQL',
        postgres.sync.processSeconds / postgres.write.processSeconds,
        GOAL_POSTGRES_OVER_WRITE,
        `start-up included; sync ${seconds(postgres.sync.processSeconds)} / write-only ${seconds(postgres.write.processSeconds)}`,
      ),
    );
  }
  return checks;
}
