/**
 * The team's chatbot choice (REFERENCE.md, "The next server version"): a team admin may choose
 * which chatbots the export serves. Pure rules only: what the server says about it, the selection
 * key it checks, and how each resource is classed under a choice (walk-plan.ts plans the walks).
 */
import { WHOLE_TEAM_KEY, compareCodePoints, selectionKey } from '../export-api/selection.js';
import type { ChatbotChoiceRecord, ManifestEntry } from '../interfaces.js';
import { printable } from '../printable.js';

export { WHOLE_TEAM_KEY, selectionKey };
/**
 * The key recorded for walks of a server that classifies its resources (manifest `scope`) but
 * does not say which chatbots it serves: never sent, never equal to a real key.
 */
export const UNKNOWN_CHOICE_KEY = 'unknown';

/** What the sync records and `status` says of a resource the choice leaves out. */
export const EXCLUDED_BY_CHOICE = "excluded by the team's chatbot choice";

/**
 * `key`: `all`, or the first 32 hex digits of the SHA-256 of the sorted public ids joined by
 * `\n`; `chatbots`: the chosen ones, empty for the whole team.
 */
export type ChatbotChoice = ChatbotChoiceRecord;
type ChosenChatbot = ChatbotChoice['chatbots'][number];

/**
 * What a server says about its chatbot choice:
 * - `unscoped`: today's servers; nothing sent, absence after a complete walk means deletion.
 * - `choice`: the scoped protocol (`exportable_chatbots` in `team/`); every page request carries
 *   `selection`; the key is `all` when nothing is chosen.
 * - `unknown`: the manifest classifies resources but `team/` does not say what is chosen: nothing
 *   is sent, every resource is re-read, and absence is never taken for deletion.
 */
export type ServerScope =
  | { kind: 'unscoped' }
  | { kind: 'choice'; choice: ChatbotChoice }
  | { kind: 'unknown'; reason: string };

/** Reads the choice from `team/` and the manifest; never from configuration. */
export function readServerScope(
  team: Record<string, unknown>,
  entries: readonly ManifestEntry[],
): ServerScope {
  const listed = team.exportable_chatbots;
  const classified = entries.some((entry) => entry.scope !== undefined);
  if (listed === undefined || listed === null) {
    return classified
      ? {
          kind: 'unknown',
          reason:
            'the manifest classifies resources by chatbot but team/ has no exportable_chatbots',
        }
      : { kind: 'unscoped' };
  }
  if (!Array.isArray(listed)) {
    return { kind: 'unknown', reason: 'team/ exportable_chatbots is not a list' };
  }
  const chatbots: ChosenChatbot[] = [];
  for (const item of listed) {
    const publicId = isRecord(item) ? item.public_id : undefined;
    if (typeof publicId !== 'string' || publicId === '') {
      return { kind: 'unknown', reason: 'an entry of team/ exportable_chatbots has no public_id' };
    }
    // The server keys its choice as a set: a chatbot listed twice counts once.
    if (chatbots.some((chatbot) => chatbot.publicId === publicId)) continue;
    chatbots.push({ publicId, name: typeof item.name === 'string' ? item.name : '' });
  }
  chatbots.sort((left, right) => compareCodePoints(left.publicId, right.publicId));
  return {
    kind: 'choice',
    choice: { key: selectionKey(chatbots.map((chatbot) => chatbot.publicId)), chatbots },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The key walks of this server are recorded under (rows, cursors, runs). */
export function walkKey(scope: ServerScope): string {
  if (scope.kind === 'choice') return scope.choice.key;
  return scope.kind === 'unknown' ? UNKNOWN_CHOICE_KEY : WHOLE_TEAM_KEY;
}

/** The `selection` parameter every resource request carries, or undefined for none. */
export function selectionParameter(scope: ServerScope): string | undefined {
  return scope.kind === 'choice' ? scope.choice.key : undefined;
}

/** True when some rows of the team may not be served (a choice, or one we cannot see). */
export function servesPartOfTeam(scope: ServerScope): boolean {
  return (
    scope.kind === 'unknown' || (scope.kind === 'choice' && scope.choice.key !== WHOLE_TEAM_KEY)
  );
}

/**
 * How a resource is treated under a choice. `owned` rows belong to one chatbot by foreign keys
 * fixed when they are created; everything else (referenced, team-wide, a missing or unknown
 * `scope`) may enter or leave the choice without changing.
 */
export type ScopeClass = 'owned' | 'shared' | 'excluded';

export function scopeClassOf(entry: ManifestEntry): ScopeClass {
  // A participant joins the choice by talking to a chosen chatbot, without their row changing,
  // whatever class the server gives it.
  if (entry.resource === 'participants' || entry.model === 'experiments.participant') {
    return 'shared';
  }
  if (entry.scope === 'owned') return 'owned';
  if (entry.scope === 'excluded') return 'excluded';
  return 'shared';
}

/** "Support bot, Sales bot (key 3184818c…)" / "the whole team (key all)". */
export function describeChoice(choice: ChatbotChoice | undefined): string {
  if (!choice) return 'not chosen by this server';
  if (choice.key === WHOLE_TEAM_KEY) return 'the whole team (key all)';
  if (choice.key === UNKNOWN_CHOICE_KEY) return 'not said by the server (unknown)';
  // Names are the server's text, kept as given: shown escaped (line breaks too), and cut.
  const names = choice.chatbots.map((chatbot) =>
    printable(chatbot.name || chatbot.publicId, { max: 80 }),
  );
  return `${names.join(', ')} (key ${choice.key})`;
}
