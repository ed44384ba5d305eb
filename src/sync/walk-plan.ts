/**
 * How one resource is walked in this run, all of it, decided before the walk: whether it is
 * requested, where it starts and why not where it stopped, what a complete walk says about the
 * rows it did not see, and which cursor a full refresh leaves. Pure: the walk
 * (pipeline/walk.ts) follows the plan as it is.
 */
import type { CursorKind, ManifestEntry, ResourceState } from '../interfaces.js';
import {
  UNKNOWN_CHOICE_KEY,
  WHOLE_TEAM_KEY,
  scopeClassOf,
  servesPartOfTeam,
  walkKey,
  type ServerScope,
} from './chatbot-choice.js';

export interface ResourceWalkInput {
  entry: ManifestEntry;
  scope: ServerScope;
  /** What the warehouse holds of the resource's walks: its cursor, their kind and choice. */
  stored: Pick<ResourceState, 'cursor' | 'cursorKind' | 'cursorSelection'> | undefined;
  fullRefresh: boolean;
  /** The chatbots a key stood for, when it was recorded. */
  chatbotsOf(key: string): readonly string[] | undefined;
}

export interface ResourceWalkPlan {
  /** Not requested: the server serves it empty under this choice. */
  excluded: boolean;
  /** Where the walk starts (null: from the start). */
  cursor: string | null;
  /** Why a stored cursor is not used, for the log. */
  restartReason?: string;
  /** The stored cursor is of another kind than the server's now: said as a warning. */
  cursorKindChanged: boolean;
  /**
   * What a complete walk from the start says about rows it did not see:
   * `delete` (the whole team was walked: the server no longer has them), `out_of_scope` (a
   * choice: they are not served; see provesDeletions), or `none` (not looked at).
   */
  missing: 'none' | 'delete' | 'out_of_scope';
  /**
   * With `out_of_scope`, on a full refresh under a choice: the missing rows are settled once
   * every walk of the run is done, when the rows served can show which are gone from the server
   * (choice-reach.ts): those last served under this same choice that the served rows still
   * reach are deleted, whatever the resource's scope; the rest are marked out of scope.
   */
  provesDeletions: boolean;
  /**
   * A full refresh: its pages leave the stored cursor alone, and the walk saves one when it has
   * walked everything, where it ended.
   */
  fullRefresh: boolean;
  /**
   * On a full refresh, the cursor saved when the walk stored no page to end at: the stored one,
   * if it was committed under this same choice (another choice's never resumes this one).
   */
  keptCursor: string | null;
}

/** True when every row served under `to` was also served under `from`. */
export function isNarrowing(
  from: string,
  to: string,
  chatbotsOf: (key: string) => readonly string[] | undefined,
): boolean {
  if (from === to) return true;
  if (to === WHOLE_TEAM_KEY || to === UNKNOWN_CHOICE_KEY || from === UNKNOWN_CHOICE_KEY) {
    return false;
  }
  if (from === WHOLE_TEAM_KEY) return true;
  const wider = chatbotsOf(from);
  const narrower = chatbotsOf(to);
  if (!wider || !narrower || narrower.length === 0) return false;
  const set = new Set(wider);
  return narrower.every((publicId) => set.has(publicId));
}

/**
 * How one resource is walked in this run. Without a choice (the whole team) this is today's
 * rule: resume from the cursor, a full refresh walks from the start and deletes what is missing.
 * Under a choice: excluded resources are not requested; shared resources are re-read from the
 * start every run (a row may enter the choice without a new `updated_at`); owned resources resume
 * only when the choice is provably a narrowing of the one their cursor was committed under.
 * Whatever the choice, a cursor of another kind than the server's now (`pk`, `updated_at_id`)
 * means nothing to it: the walk starts again, and, not being a full refresh, proves no deletion.
 */
export function planResourceWalk(input: ResourceWalkInput): ResourceWalkPlan {
  const { entry, scope, fullRefresh, stored } = input;
  const key = walkKey(scope);
  const partOfTeam = servesPartOfTeam(scope);
  const scopeClass = scopeClassOf(entry);
  const cursorKey = stored?.cursorSelection ?? WHOLE_TEAM_KEY;
  const keptCursor = fullRefresh && cursorKey === key ? (stored?.cursor ?? null) : null;
  if (scope.kind === 'choice' && partOfTeam && scopeClass === 'excluded') {
    return {
      excluded: true,
      cursor: null,
      cursorKindChanged: false,
      missing: 'none',
      provesDeletions: false,
      fullRefresh,
      keptCursor,
    };
  }
  const storedCursor = stored?.cursor ?? null;
  const cursorKindChanged =
    !fullRefresh && Boolean(stored?.cursorKind) && stored?.cursorKind !== entry.cursor;
  let restartReason: string | undefined;
  if (storedCursor !== null && !fullRefresh) {
    if (scope.kind === 'unknown') {
      restartReason = 'the server does not say which chatbots it serves';
    } else if (partOfTeam && scopeClass === 'shared') {
      restartReason = 'shared rows can enter the chatbot choice unchanged';
    } else if (!isNarrowing(cursorKey, key, input.chatbotsOf)) {
      restartReason = `the chatbot choice changed (${cursorKey} -> ${key}) and is not a narrowing`;
    } else if (cursorKindChanged) {
      restartReason = cursorKindChange(stored!.cursorKind!, entry.cursor);
    }
  }
  const cursor = fullRefresh || restartReason !== undefined ? null : storedCursor;
  let missing: ResourceWalkPlan['missing'] = 'none';
  if (partOfTeam) {
    if (cursor === null) missing = 'out_of_scope';
  } else if (fullRefresh) {
    missing = 'delete';
  }
  return {
    excluded: false,
    cursor,
    ...(restartReason !== undefined ? { restartReason } : {}),
    cursorKindChanged,
    missing,
    provesDeletions: missing === 'out_of_scope' && fullRefresh && scope.kind === 'choice',
    fullRefresh,
    keptCursor,
  };
}

function cursorKindChange(from: CursorKind, to: CursorKind): string {
  return `the cursor kind changed on the server (${from} -> ${to})`;
}
