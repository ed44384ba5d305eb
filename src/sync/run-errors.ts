/**
 * How a run names itself and what stopped a resource or the run itself: the kind it is recorded
 * as, a resource this configuration or server cannot sync (skipped), a chatbot choice that changed
 * under the walk, an interruption, what each error means for the resource and the run
 * (classifyResourceError), and a run that failed before it could start.
 */
import {
  AuthError,
  HttpStatusError,
  InterruptedError,
  OcsSyncError,
  ServerUnavailableError,
  describeError,
} from '../errors.js';
import type { BookkeepingStore, RunKind, Warehouse } from '../interfaces.js';
import type { FullRefresh } from './run-types.js';

/**
 * What a sync run is recorded as: a full refresh when asked; otherwise `initial` until a run has
 * loaded the warehouse (ended ok or partial), then `incremental`.
 */
export async function syncRunKind(
  bookkeeping: Pick<BookkeepingStore, 'hasLoaded'>,
  fullRefresh: FullRefresh | undefined,
): Promise<RunKind> {
  if (fullRefresh !== undefined) return 'full_refresh';
  return (await bookkeeping.hasLoaded()) ? 'incremental' : 'initial';
}

/** A resource that cannot be synced in this configuration; the rest of the run goes on. */
export class SkipResource extends OcsSyncError {}

/** The team's chatbot choice changed under the run (the server's 409 to a `selection`). */
export class SelectionChangedError extends OcsSyncError {
  constructor(readonly detail: string) {
    super(`HTTP 409: "${detail}"`);
  }
}

export function interrupted(): InterruptedError {
  return new InterruptedError(
    'The run was interrupted; every committed page is kept and the next run resumes from there.',
  );
}

/** 404 (not on this server) and the sealed-without-public-key 400 skip the resource; the rest fail it. */
export function asSkip(error: unknown, resource: string): SkipResource | undefined {
  if (!(error instanceof HttpStatusError)) return undefined;
  if (error.status === 404) {
    return new SkipResource(
      `${resource} skipped: the server does not export it (HTTP 404: ${error.detail})`,
      {
        hint: 'Remove it from `resources`, or upgrade the server.',
      },
    );
  }
  // 400 as REFERENCE.md says; newer servers document a 409 for the same refusal.
  if ((error.status === 400 || error.status === 409) && /public key/i.test(error.detail)) {
    return new SkipResource(`${resource} skipped: the server says "${error.detail}"`, {
      hint: 'Register the team public key printed by `ocs-sync keygen` on the team, then sync again.',
    });
  }
  return undefined;
}

/**
 * A 409 to a request that carried `selection`, but not the sealed-without-public-key refusal
 * some servers answer with a 409 too: the choice changed, whatever the detail's words.
 */
export function asSelectionChange(
  error: unknown,
  selection: string | undefined,
): SelectionChangedError | undefined {
  if (selection === undefined || !(error instanceof HttpStatusError)) return undefined;
  if (error.status !== 409 || /public key/i.test(error.detail)) return undefined;
  return new SelectionChangedError(error.detail);
}

/**
 * What an error that stopped a resource's walk means:
 * - `selection changed`: the team's chatbot choice changed under the run; not the resource's
 *   outcome: the run walks again under the new choice;
 * - `stops the run`: recorded as the resource's failure, then the run ends with it (the key was
 *   refused, the server is gone, the run was interrupted);
 * - `skipped`: this configuration or server cannot sync the resource (a warning);
 * - `failed`: the resource failed, the others go on;
 * - `not ours`: a bug, thrown as it is.
 * `interrupted`: the run's signal was aborted, so whatever failed is the interruption.
 */
export type ResourceErrorClass =
  | { kind: 'selection changed'; error: SelectionChangedError }
  | { kind: 'stops the run'; error: OcsSyncError }
  | { kind: 'skipped'; error: SkipResource }
  | { kind: 'failed'; error: OcsSyncError }
  | { kind: 'not ours'; error: unknown };

export function classifyResourceError(
  caught: unknown,
  walk: { resource: string; selection: string | undefined; interrupted: boolean },
): ResourceErrorClass {
  const change = asSelectionChange(caught, walk.selection);
  if (change) return { kind: 'selection changed', error: change };
  const error = walk.interrupted ? interrupted() : (asSkip(caught, walk.resource) ?? caught);
  if (
    error instanceof AuthError ||
    error instanceof ServerUnavailableError ||
    error instanceof InterruptedError
  ) {
    return { kind: 'stops the run', error };
  }
  if (error instanceof SkipResource) return { kind: 'skipped', error };
  if (error instanceof OcsSyncError) return { kind: 'failed', error };
  return { kind: 'not ours', error };
}

/**
 * Records a run that failed before it could start (the manifest could not be read, the
 * configuration or a key could not be used), so `status` and `runs` show it like any other.
 */
export async function recordFailedRun(
  warehouse: Warehouse,
  kind: RunKind,
  error: unknown,
  requests = 0,
): Promise<void> {
  const runId = await warehouse.bookkeeping.startRun(kind, null);
  await warehouse.bookkeeping.finishRun(runId, {
    status: error instanceof InterruptedError ? 'interrupted' : 'failed',
    rows: 0,
    pages: 0,
    requests,
    error: describeError(error),
  });
}
