/**
 * Whether the daemon is healthy, and why (pure). Healthy means the warehouse is being kept fresh:
 *
 * - no run in progress: the last run succeeded (ok or partial) and that success is younger than
 *   `health.max_age_seconds`;
 * - a run in progress: the last success is younger than the max age, or, when it is not (the
 *   first, long initial sync; a run after a long outage), the run in progress has moved (started,
 *   or made a step of any stage: a page, a file downloaded, deleted rows marked) within the max
 *   age, so a slow but moving sync is not reported dead while a stuck one is. The latest step is
 *   named ("downloading file contents: 1,240 of 23,900 files").
 */
import type { RunStatus, StageProgress } from '../interfaces.js';

export interface HealthInput {
  now: number;
  maxAgeSeconds: number;
  running: boolean;
  /** When the run in progress started or last moved. */
  lastProgressAt: number | null;
  /** The last step the run in progress made, if any yet. */
  progress: StageProgress | null;
  lastSuccessAt: number | null;
  lastRunStatus: Exclude<RunStatus, 'running'> | null;
  lastError: string | null;
  consecutiveFailures: number;
}

export interface HealthReport {
  status: 'ok' | 'unhealthy';
  /** HTTP status for /healthz: 200 or 503. */
  httpStatus: 200 | 503;
  lastSuccessAt: string | null;
  lastRunStatus: Exclude<RunStatus, 'running'> | null;
  consecutiveFailures: number;
  running: boolean;
  /** While a run is in progress: its last step, e.g. "syncing chat_messages: 12,000 rows". */
  stage: string | null;
  reason: string;
}

/** "downloading file contents: 1,240 of 23,900 files"; the stage alone before its first step. */
export function describeProgress(progress: StageProgress): string {
  const count = (value: number) => value.toLocaleString('en-US');
  if (progress.total !== undefined) {
    return `${progress.stage}: ${count(progress.done)} of ${count(progress.total)} ${progress.unit}`;
  }
  return progress.done > 0
    ? `${progress.stage}: ${count(progress.done)} ${progress.unit}`
    : progress.stage;
}

export function evaluateHealth(input: HealthInput): HealthReport {
  const maxAgeMs = input.maxAgeSeconds * 1000;
  const ageOf = (at: number | null) => (at === null ? null : Math.max(0, input.now - at));
  const successAge = ageOf(input.lastSuccessAt);
  const fresh = successAge !== null && successAge <= maxAgeMs;
  const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
  const successText =
    successAge === null
      ? 'no run has succeeded yet'
      : `the last success was ${seconds(successAge)} ago`;

  let healthy: boolean;
  let reason: string;
  const stage = input.running && input.progress ? describeProgress(input.progress) : null;
  if (input.running) {
    const progressAge = ageOf(input.lastProgressAt);
    const at = stage === null ? '' : ` (${stage})`;
    if (fresh) {
      healthy = true;
      reason = `A run is in progress${at}; ${successText}.`;
    } else if (progressAge !== null && progressAge <= maxAgeMs) {
      healthy = true;
      reason = `A run is in progress and moved ${seconds(progressAge)} ago${at}; ${successText}.`;
    } else {
      healthy = false;
      reason =
        `A run is in progress but nothing has moved for ${progressAge === null ? 'its whole time' : seconds(progressAge)}` +
        `${stage === null ? '' : ` (stuck at ${stage})`}, and ${successText} (max age ${input.maxAgeSeconds} s).`;
    }
  } else if (input.lastRunStatus === null) {
    healthy = false;
    reason = 'No run has finished yet.';
  } else if (input.lastRunStatus === 'ok' || input.lastRunStatus === 'partial') {
    healthy = fresh;
    const partial =
      input.lastRunStatus === 'partial'
        ? ` The last run was partial${input.lastError ? `: ${input.lastError}` : ''}.`
        : '';
    reason = fresh
      ? `The last run succeeded; ${successText}.${partial}`
      : `The last run succeeded but ${seconds(successAge ?? 0)} ago, longer than max age ${input.maxAgeSeconds} s; is the schedule running?${partial}`;
  } else {
    healthy = false;
    reason =
      `The last run ${input.lastRunStatus === 'interrupted' ? 'was interrupted' : 'failed'}` +
      `${input.lastError ? `: ${input.lastError}` : ''} ` +
      `(${input.consecutiveFailures} failure${input.consecutiveFailures === 1 ? '' : 's'} in a row); ${successText}.`;
  }
  return {
    status: healthy ? 'ok' : 'unhealthy',
    httpStatus: healthy ? 200 : 503,
    lastSuccessAt:
      input.lastSuccessAt === null ? null : new Date(input.lastSuccessAt).toISOString(),
    lastRunStatus: input.lastRunStatus,
    consecutiveFailures: input.consecutiveFailures,
    running: input.running,
    stage,
    reason,
  };
}
