/**
 * Resource names of the manifest that cannot be tables. Each is skipped and said at debug level,
 * and a run says them all in one line: a hostile manifest may list thousands, new ones every run.
 */
import { UnsafeNameError } from '../errors.js';
import type { Logger } from '../log.js';
import { repeatedEvents, type RepeatedKind } from '../repeated-events.js';

const RULE = 'names must match ^[a-z][a-z0-9_]{0,62}$';

/** What a skipped resource reports; its name is beside it wherever it is shown. */
export const UNSAFE_RESOURCE_ERROR = `not a name a table may have (${RULE}): skipped, nothing stored under it`;

const UNSAFE_RESOURCE_NAME: RepeatedKind = {
  level: 'error',
  message: 'A resource name of the manifest cannot be a table',
  summary: (count) =>
    `The manifest lists ${count} resource names that cannot be tables (${RULE}); each was skipped and nothing was stored under it`,
};

/** One refused name, for the run's one line about them (the name cut: it is the server's). */
export function noteUnsafeResourceName(name: string, logger: Logger): void {
  const shown = name.slice(0, 80);
  repeatedEvents(logger).add(UNSAFE_RESOURCE_NAME, {
    id: shown,
    message: new UnsafeNameError('resource', name, 'the manifest').message,
    fields: { resource: shown },
  });
}

/** Names for one line: the first `max`, then how many more. */
export function namesShown(names: readonly string[], max = 10): string[] {
  return names.length <= max
    ? [...names]
    : [...names.slice(0, max), `and ${names.length - max} more`];
}
