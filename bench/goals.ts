/**
 * Pure: the goals of issue 36 (which tightened issue 23's), from one round's stages, start-up
 * included (each stage's process from its start to its result, and all the CPU it used), each
 * shown beside what the issue measured on main 08b0136 before the page pipeline:
 *
 * - slow pages (a fixed latency a page): full sync / the fetch-and-parse loop at that latency;
 * - 0 ms: full sync / the limit max(fetch-only, write-only, CPU floor), where the CPU floor is
 *   all the CPU the server, the fetch and the write need, spread over the machine's cores;
 * - client CPU: the sync's / (fetch-only's + write-only's);
 * - PostgreSQL: full sync / its write-only floor (which writes by COPY as the sync does);
 * - peak RSS of the sync (and its growth from one size to another, bench.ts);
 * - audit on / audit off (history on), SQLite at 0 ms;
 * - sealed values opened per second by a sync at 0 ms, over cores × one core's private-key rate.
 */
import type { Check, MeasuredStage } from './report.js';

export const GOALS = {
  slowOverFetch: 0.8,
  /** Issue 47: the sync at most this over the cursor-chasing loop, slow pages. */
  slowOverChase: 1.05,
  syncOverLimit: 1.1,
  clientCpu: 1.0,
  postgresOverWrite: 1.1,
  peakRssMb: 256,
  rssGrowth: 1.2,
  auditOverHistory: 1.1,
  sealedShare: 0.85,
} as const;

/** What issue 36 measured on main 08b0136 (200,000 rows), shown beside each goal. */
export const ISSUE_FIGURES = {
  slowOverFetch: '1.21',
  slowOverChase: 'not measured before issue 47',
  syncOverLimit: '1.5-1.9',
  clientCpu: '1.39',
  postgresOverWrite: '1.28-1.47',
  peakRssMb: '184-200 MB',
  auditOverHistory: '1.10-1.17',
  sealedShare: '0.70',
} as const;

/** One round's stages: those at the base latency, and the others when measured. */
export interface GoalRound {
  fetch: MeasuredStage;
  write: MeasuredStage;
  sync: MeasuredStage;
  slowFetch?: MeasuredStage;
  /** The cursor-chasing loop at the slow latency (cursor-chase.ts): the limit of a walk. */
  slowChase?: MeasuredStage;
  slowSync?: MeasuredStage;
  postgres?: { sync: MeasuredStage; write: MeasuredStage };
  /** Syncs with history on and with the audit chain on. */
  audit?: { history: MeasuredStage; audit: MeasuredStage };
  /** A sealed resource's walk: values opened a second, and one core's private-key rate. */
  sealed?: { valuesPerSecond: number; singleCoreRate: number; values: number; seconds: number };
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

function atMost(
  name: string,
  value: number,
  goal: number,
  was: string,
  detail: string,
  shown = value.toFixed(2),
): Check {
  return {
    name,
    value,
    shown,
    target: `<= ${goal}`,
    met: value <= goal,
    detail: `was ${was}; ${detail}`,
  };
}

/** Every goal this round measured, as checks. */
export function goalChecks(round: GoalRound, cores: number, slowLatencyMs: number): Check[] {
  const figures = goalFigures(round, cores);
  const { fetch, write, sync } = round;
  const checks: Check[] = [];
  if (figures.slowRatio !== undefined) {
    checks.push(
      atMost(
        `sync / fetch-and-parse loop at ${slowLatencyMs} ms a page`,
        figures.slowRatio,
        GOALS.slowOverFetch,
        ISSUE_FIGURES.slowOverFetch,
        `start-up included; sync ${seconds(round.slowSync!.processSeconds)} / loop ${seconds(round.slowFetch!.processSeconds)}`,
      ),
    );
  }
  if (round.slowChase && round.slowSync) {
    checks.push(
      atMost(
        `sync / cursor-chasing loop at ${slowLatencyMs} ms a page`,
        round.slowSync.processSeconds / round.slowChase.processSeconds,
        GOALS.slowOverChase,
        ISSUE_FIGURES.slowOverChase,
        `start-up included; sync ${seconds(round.slowSync.processSeconds)} / loop ${seconds(round.slowChase.processSeconds)}`,
      ),
    );
  }
  checks.push(
    atMost(
      'sync / limit at 0 ms, SQLite',
      figures.syncOverLimit,
      GOALS.syncOverLimit,
      ISSUE_FIGURES.syncOverLimit,
      `start-up included; sync ${seconds(sync.processSeconds)} / max(fetch-only ${seconds(fetch.processSeconds)}, ` +
        `write-only ${seconds(write.processSeconds)}, CPU floor ${seconds(figures.cpuFloorSeconds)} = ` +
        `(server ${(fetch.serverCpuSeconds ?? 0).toFixed(2)} + fetch ${fetch.processCpuSeconds.toFixed(2)} + ` +
        `write ${write.processCpuSeconds.toFixed(2)} CPU-s) / ${cores} cores)`,
    ),
    atMost(
      'client CPU / (fetch-only + write-only CPU)',
      figures.clientCpuRatio,
      GOALS.clientCpu,
      ISSUE_FIGURES.clientCpu,
      `sync ${sync.processCpuSeconds.toFixed(2)} CPU-s / (fetch-only ${fetch.processCpuSeconds.toFixed(2)} + write-only ${write.processCpuSeconds.toFixed(2)} CPU-s)`,
    ),
  );
  if (round.postgres) {
    const { sync: pgSync, write: pgWrite } = round.postgres;
    checks.push(
      atMost(
        'sync / write-only floor (COPY), PostgreSQL',
        pgSync.processSeconds / pgWrite.processSeconds,
        GOALS.postgresOverWrite,
        ISSUE_FIGURES.postgresOverWrite,
        `start-up included; sync ${seconds(pgSync.processSeconds)} / write-only ${seconds(pgWrite.processSeconds)}`,
      ),
    );
  }
  checks.push({
    name: 'peak RSS of the sync',
    value: sync.peakRssMb,
    shown: `${sync.peakRssMb.toFixed(1)} MB`,
    target: `< ${GOALS.peakRssMb} MB`,
    met: sync.peakRssMb < GOALS.peakRssMb,
    detail: `was ${ISSUE_FIGURES.peakRssMb}; whole syncing process, maxRSS, ${sync.rows.toLocaleString('en-US')} rows`,
  });
  if (round.audit) {
    const { history, audit } = round.audit;
    checks.push(
      atMost(
        'audit on / audit off (history on), SQLite at 0 ms',
        audit.processSeconds / history.processSeconds,
        GOALS.auditOverHistory,
        ISSUE_FIGURES.auditOverHistory,
        `start-up included; audit on ${seconds(audit.processSeconds)} / history on ${seconds(history.processSeconds)}`,
      ),
    );
  }
  if (round.sealed) {
    const { valuesPerSecond, singleCoreRate, values } = round.sealed;
    const share = valuesPerSecond / (cores * singleCoreRate);
    checks.push({
      name: 'sealed values a second / (cores x one core)',
      value: share,
      shown: share.toFixed(2),
      target: `>= ${GOALS.sealedShare}`,
      met: share >= GOALS.sealedShare,
      detail: `was ${ISSUE_FIGURES.sealedShare}; ${Math.round(valuesPerSecond)} values/s (${values.toLocaleString('en-US')} in ${seconds(round.sealed.seconds)}) / (${cores} x ${Math.round(singleCoreRate)} private-key operations/s)`,
    });
  }
  return checks;
}

/** A round's goals, one line each. */
export function describeGoalRound(
  round: GoalRound,
  cores: number,
  slowLatencyMs: number,
): string[] {
  return goalChecks(round, cores, slowLatencyMs).map(
    (check) =>
      `${check.name}: ${check.shown} (goal ${check.target}, ${check.met ? 'met' : 'NOT MET'}; ${check.detail})`,
  );
}
