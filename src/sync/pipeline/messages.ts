/**
 * What the sync's thread and the page thread say to each other, over one bridge
 * (src/thread-bridge.ts): the page thread serves the page stages (page-stages.ts, PageStagesApi)
 * and asks the run the questions of prepare.ts's PageHost, each walk's of its own walk (RunApi).
 * A walk's rules cross once, each page's bytes are moved (not copied), and which parsed page to
 * commit with which cursor.
 */
import { OcsSyncError } from '../../errors.js';
import type { ColumnSpec, CursorKind, PageSinkSetup, PageWriteResult } from '../../interfaces.js';
import type { SealingKeys, SecretPolicy } from '../../sealing/policy.js';
import type { Caller } from '../../thread-bridge.js';
import type { PageHost } from './prepare.js';

/** What stays the same for every page of one walk. */
export interface WalkSetup {
  /** `<run id>/<resource>`: unique in the warehouse (PageWrite.walk). */
  walk: string;
  runId: number;
  resource: string;
  cursorKind: CursorKind;
  /** The page size asked for (a bare array as long has more after it). */
  limit: number;
  /** The table's columns as the walk starts. */
  columns: ColumnSpec[];
  excludedFields: readonly string[];
  sealed: { marked: ReadonlySet<string>; all: ReadonlySet<string> };
  policy: SecretPolicy;
  /** History versions are kept for the resource. */
  history: boolean;
  /** The chatbot choice's key the pages are served under (PageWrite.selection). */
  selection?: string;
}

/** What the sync's thread learns of a parsed page; its rows stay on the page thread. */
export interface PageSummary {
  /** Which parsed page of the walk this is (to commit it by). */
  seq: number;
  rowCount: number;
  /** The server's `cursor` ('' as null) and `has_more`; `bare` for a bare array. */
  cursor: string | null;
  hasMore: boolean;
  bare: boolean;
  /** The cursor after the last row, as the server would build it: asked for when it gave none. */
  lastRowCursor?: { cursor: string } | { error: string };
}

/** A committed page: what the warehouse wrote, and the fields refused for their names. */
export interface CommitResult extends PageWriteResult {
  refusedFields: string[];
}

/** The page thread's start: where it writes, and what it needs to apply secrets policies. */
export interface PageThreadSetup {
  sink: PageSinkSetup;
  keys: SealingKeys;
}

/** `T`'s methods, each taking first the walk it is asked for. */
export type ByWalk<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => infer R
    ? (walk: string, ...args: A) => R
    : never;
};

/** What the run answers the page thread: every question of PageHost, for the walk that asks. */
export type RunApi = ByWalk<PageHost>;

/**
 * The page thread's PageHost for one walk: each question goes to the run as it was asked, with
 * the walk's name first. Generic over PageHost: a new question needs nothing here.
 */
export function askRun(walk: string, run: Caller<RunApi>): PageHost {
  return new Proxy({} as PageHost, {
    get: (_, method) =>
      typeof method !== 'string' || method === 'then'
        ? undefined
        : (...args: unknown[]) =>
            run.call(method as keyof RunApi & string, [walk, ...args] as never),
  });
}

/** The run's answers: each question to the PageHost of the walk that asked it. */
export function answerByWalk(hosts: ReadonlyMap<string, PageHost>): RunApi {
  return new Proxy({} as RunApi, {
    get: (_, method) =>
      typeof method !== 'string' || method === 'then'
        ? undefined
        : (walk: string, ...args: unknown[]) => {
            const host = hosts.get(walk) as Record<string, unknown> | undefined;
            if (!host) throw new OcsSyncError(`${walk} is not a walk of this run.`);
            const answer = host[method];
            if (typeof answer !== 'function' || method in Object.prototype) {
              throw new Error(`The run has no answer to ${method}.`);
            }
            return (answer as (...args: unknown[]) => unknown).apply(host, args);
          },
  });
}
