/**
 * How a run ends, decided from what it did (engine.ts records it): its status, and whether the
 * schema checksum it read is kept as the warehouse's, so that the next run reads the schema again
 * when some table may not have followed it yet.
 */
import { InterruptedError, SchemaChangeStoppedError } from '../errors.js';
import type { RunStatus } from '../interfaces.js';
import type { FilesReport } from '../files/sync-files.js';
import type { ResourceReport } from './run-types.js';

type Outcome = Pick<ResourceReport, 'status' | 'warnings'>;

/**
 * A run that walked to its end: `ok`, or `partial` when anything was left out or went wrong on
 * the way (a problem of the run, a resource not `ok` — one the chatbot choice excludes is fine —,
 * a warning, a file not fetched).
 */
export function finishedRunStatus(run: {
  problems: readonly string[];
  resources: readonly Outcome[];
  files?: Pick<FilesReport, 'failed' | 'error'>;
}): 'ok' | 'partial' {
  const partial =
    run.problems.length > 0 ||
    run.resources.some(
      (report) =>
        (report.status !== 'ok' && report.status !== 'excluded') || report.warnings.length > 0,
    ) ||
    (run.files !== undefined && (run.files.failed > 0 || run.files.error !== undefined));
  return partial ? 'partial' : 'ok';
}

/** A run an error ended: interrupted, stopped by a schema change (`partial`), or failed. */
export function stoppedRunStatus(error: unknown): RunStatus {
  if (error instanceof InterruptedError) return 'interrupted';
  if (error instanceof SchemaChangeStoppedError) return 'partial';
  return 'failed';
}

/**
 * Whether the run keeps the schema checksum it read: only when every resource's table followed
 * the schema (each walked `ok`, or excluded by the chatbot choice) and the run did not give up
 * walking (a chatbot choice that changed twice under it).
 */
export function keepsSchemaChecksum(run: {
  resources: readonly Pick<ResourceReport, 'status'>[];
  gaveUp: boolean;
}): boolean {
  return (
    !run.gaveUp &&
    run.resources.every((report) => report.status === 'ok' || report.status === 'excluded')
  );
}
