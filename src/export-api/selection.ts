/**
 * The export API's chatbot choice on the wire (REFERENCE.md, "The next server version"), shared by
 * the client and the two servers ocs-sync runs: the selection key every page request carries, and
 * the 409 the server answers when it no longer matches the team's choice.
 */
import { createHash } from 'node:crypto';

/** The key of the whole team (no chatbot chosen). */
export const WHOLE_TEAM_KEY = 'all';

/** The server's 409 detail when the choice changed under a walk. */
export const SELECTION_CHANGED_DETAIL = "The team's chatbot selection changed during the sync.";

/** Python's `sorted()` of str: by code point (JavaScript's sort compares UTF-16 units). */
export function compareCodePoints(left: string, right: string): number {
  const a = Array.from(left);
  const b = Array.from(right);
  for (let index = 0; index < Math.min(a.length, b.length); index += 1) {
    const difference = a[index]!.codePointAt(0)! - b[index]!.codePointAt(0)!;
    if (difference !== 0) return difference;
  }
  return a.length - b.length;
}

/**
 * The server's selection key (upstream `translation.selection_key`): `all` for no chatbot, else
 * the first 32 hex digits of the SHA-256 of the public ids, sorted and joined with `\n` (UTF-8).
 */
export function selectionKey(publicIds: readonly string[]): string {
  if (publicIds.length === 0) return WHOLE_TEAM_KEY;
  const joined = [...publicIds].sort(compareCodePoints).join('\n');
  return createHash('sha256').update(joined, 'utf8').digest('hex').slice(0, 32);
}
