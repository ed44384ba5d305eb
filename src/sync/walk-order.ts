/**
 * The order walks start in when several run at once (`concurrency` > 1). A walk cannot be split
 * (each page needs the cursor of the page before), so a run takes at least as long as its longest
 * walk; starting the longest walks first lets the short ones fill the other lanes beside them,
 * instead of a long walk starting last and running alone. How long a walk takes is known from the
 * last run that walked the resource the same way (from the start, or from its cursor), kept in
 * the warehouse; a resource never walked that way goes first, in manifest order (it may be large,
 * and a small one costs little wherever it goes).
 *
 * Correctness does not depend on the order: every page is an upsert by id, references between
 * tables are found after all the walks (relationships.ts), and `serve` gives rows back in manifest
 * order whatever order they were stored in. With concurrency 1 the manifest order is kept. Pure.
 */
import type { ManifestEntry } from '../interfaces.js';

/** Milliseconds the last complete walk of each resource took, by how it walked. */
export interface WalkDurations {
  /** Walks from the first page: first syncs, full refreshes, walks started over. */
  fromStart: Record<string, number>;
  /** Walks from a stored cursor: incremental runs. */
  resumed: Record<string, number>;
}

export function parseWalkDurations(text: string | undefined): WalkDurations {
  const empty: WalkDurations = { fromStart: {}, resumed: {} };
  if (text === undefined) return empty;
  try {
    const parsed = JSON.parse(text) as Partial<Record<keyof WalkDurations, unknown>>;
    return { fromStart: durationsOf(parsed.fromStart), resumed: durationsOf(parsed.resumed) };
  } catch {
    return empty;
  }
}

function durationsOf(value: unknown): Record<string, number> {
  const durations: Record<string, number> = {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return durations;
  for (const [resource, ms] of Object.entries(value)) {
    if (typeof ms === 'number' && Number.isFinite(ms) && ms >= 0) durations[resource] = ms;
  }
  return durations;
}

/** How long a resource's walk is expected to take in this run; undefined when not known. */
export function expectedWalkMs(
  durations: WalkDurations,
  resource: string,
  fromStart: boolean,
): number | undefined {
  const { fromStart: first, resumed } = durations;
  if (fromStart) return Object.hasOwn(first, resource) ? first[resource] : undefined;
  if (Object.hasOwn(resumed, resource)) return resumed[resource];
  // Walked only from the start so far (the run after a first sync): still the best guess.
  return Object.hasOwn(first, resource) ? first[resource] : undefined;
}

/**
 * The walks in the order they start: manifest order with one lane; otherwise the walks of unknown
 * length first (manifest order among them), then the rest longest first (ties in manifest order).
 */
export function orderWalks<T extends Pick<ManifestEntry, 'resource'>>(
  entries: readonly T[],
  expectedMs: (entry: T) => number | undefined,
  concurrency: number,
): T[] {
  if (concurrency <= 1) return [...entries];
  const ranked = entries.map((entry, index) => ({ entry, index, ms: expectedMs(entry) }));
  ranked.sort((a, b) => {
    if (a.ms === undefined || b.ms === undefined) {
      if (a.ms !== b.ms) return a.ms === undefined ? -1 : 1;
      return a.index - b.index;
    }
    return b.ms - a.ms || a.index - b.index;
  });
  return ranked.map(({ entry }) => entry);
}

/** The durations kept after a run: each walk that ended `ok` replaces its resource's figure. */
export function recordWalkDurations(
  durations: WalkDurations,
  walks: ReadonlyArray<{ resource: string; durationMs: number; fromStart: boolean }>,
): WalkDurations {
  const next: WalkDurations = {
    fromStart: { ...durations.fromStart },
    resumed: { ...durations.resumed },
  };
  for (const walk of walks) {
    next[walk.fromStart ? 'fromStart' : 'resumed'][walk.resource] = walk.durationMs;
  }
  return next;
}
