/**
 * Pure planning of history versions for one page: which rows get a new version, and whether
 * an open version must be closed first. No version is written twice for the same content, except
 * that a row served again after leaving the chatbot choice always gets a `scope_return` version.
 */
import type { AuditOperation, VersionKind } from '../interfaces.js';

export interface VersionPlan {
  /** Index of the row in the page. */
  index: number;
  /** True when the row has an open version to close before the new one opens. */
  closeOpen: boolean;
  /** `served`, or `scope_return` when the open version is a scope exit. */
  kind: VersionKind;
}

/**
 * @param keys row ids as decimal text, in page order (an id may repeat within a page)
 * @param hashes content hash of each row, in page order
 * @param openHashes content hash of each id's open version, from the history table
 * @param openScopeExits ids whose open version is a `scope_exit`
 */
export function planHistoryVersions(
  keys: readonly string[],
  hashes: readonly string[],
  openHashes: ReadonlyMap<string, string>,
  openScopeExits: ReadonlySet<string> = new Set(),
): VersionPlan[] {
  const current = new Map(openHashes);
  const exited = new Set(openScopeExits);
  const plan: VersionPlan[] = [];
  keys.forEach((key, index) => {
    const hash = hashes[index]!;
    const open = current.get(key);
    const returning = exited.delete(key);
    if (open === hash && !returning) return;
    plan.push({
      index,
      closeOpen: open !== undefined,
      kind: returning ? 'scope_return' : 'served',
    });
    current.set(key, hash);
  });
  return plan;
}

/** The chain's operation for a planned version (audit-chain.ts): a return, a change, a creation. */
export function openingOperation(version: VersionPlan): AuditOperation {
  if (version.kind === 'scope_return') return 'scope_return';
  return version.closeOpen ? 'change' : 'create';
}
