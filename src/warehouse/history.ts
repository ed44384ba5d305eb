/**
 * Pure planning of history versions for one page: which rows get a new version, and whether
 * an open version must be closed first. No version is written twice for the same content.
 */
export interface VersionPlan {
  /** Index of the row in the page. */
  index: number;
  /** True when the row has an open version to close before the new one opens. */
  closeOpen: boolean;
}

/**
 * @param keys row ids as decimal text, in page order (an id may repeat within a page)
 * @param hashes content hash of each row, in page order
 * @param openHashes content hash of each id's open version, from the history table
 */
export function planHistoryVersions(
  keys: readonly string[],
  hashes: readonly string[],
  openHashes: ReadonlyMap<string, string>,
): VersionPlan[] {
  const current = new Map(openHashes);
  const plan: VersionPlan[] = [];
  keys.forEach((key, index) => {
    const hash = hashes[index]!;
    const open = current.get(key);
    if (open === hash) return;
    plan.push({ index, closeOpen: open !== undefined });
    current.set(key, hash);
  });
  return plan;
}
