/**
 * Whether a sync's pages leave its thread: decided here, once, and obeyed everywhere else (the
 * warehouse starts a writer thread or not, the page pipeline a page thread or not). With threads,
 * a page thread parses, prepares and writes each page, and SQLite commits on a writer thread of
 * its own connection; without, the sync's thread does it all and SQLite commits on the
 * warehouse's connection (docs/performance.md, "The page pipeline" and "Many teams").
 */

/** `page_threads`: `auto` (threads unless other teams sync at the same time), or yes or no. */
export type PageThreadsSetting = 'auto' | boolean;

export interface PageThreadPlan {
  /** Pages go to a page thread (else they are parsed, prepared and written on the sync's). */
  pageThread: boolean;
  /** SQLite commits on a writer thread (else on the warehouse's own connection). */
  writerThread: boolean;
}

export function planPageThreads(input: {
  setting: PageThreadsSetting;
  /**
   * Other teams of a fleet sync at the same time (`teams_at_once` above 1): they keep the cores
   * busy between them, and each team's threads would only add memory (about 40 MB a team).
   */
  othersAtOnce: boolean;
  /** The warehouse can be written from another thread: not SQLite's `:memory:`, one connection's. */
  writableElsewhere: boolean;
}): PageThreadPlan {
  const wanted = input.setting === 'auto' ? !input.othersAtOnce : input.setting;
  // The page thread writes through the writer thread (SQLite): both, or neither.
  const threads = wanted && input.writableElsewhere;
  return { pageThread: threads, writerThread: threads };
}
