/**
 * Output is for people: many events of one kind in one run say one thing. Each event is logged at
 * debug level as it happens; one line at the kind's own level then says how many there were, with
 * the first few ids, when the step that made them ends (`flush`) or WINDOW_MS after the first,
 * whichever comes first, so a long step is never silent for long. A kind seen once in a window is
 * logged as it always was, as one event.
 *
 * One tally per logger: every part of a run (source, engine, files step) logs through the run's
 * logger, so whichever part ends a step flushes what all of them counted.
 */
import type { Logger } from './log.js';

export interface RepeatedKind {
  level: 'info' | 'warn' | 'error';
  /** The line for one event, unless the event brings its own. */
  message: string;
  /** The summary's message for `count` events, before the ids (e.g. `…(404) for 22 files`). */
  summary: (count: number, group: string | undefined) => string;
}

export interface RepeatedEvent {
  /** What tells the events apart (a file id, a table, a reason); the summary names the first few. */
  id: string;
  /** Events of one kind are summed per group (the resource a retry was for). */
  group?: string;
  /** This event's own line, when it differs from the kind's. */
  message?: string;
  fields?: Record<string, unknown>;
}

const WINDOW_MS = 15_000;
const IDS_SHOWN = 5;

interface Tally {
  kind: RepeatedKind;
  group: string | undefined;
  first: RepeatedEvent;
  count: number;
  /** The first IDS_SHOWN distinct ids, each with how often it came. */
  ids: Map<string, number>;
}

export class RepeatedEvents {
  private readonly tallies = new Map<string, Tally>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly logger: Logger) {}

  add(kind: RepeatedKind, event: RepeatedEvent): void {
    this.logger.debug(event.fields ?? {}, event.message ?? kind.message);
    const key = `${kind.level}\u0000${kind.message}\u0000${event.group ?? ''}`;
    let tally = this.tallies.get(key);
    if (tally === undefined) {
      tally = { kind, group: event.group, first: event, count: 0, ids: new Map() };
      this.tallies.set(key, tally);
    }
    tally.count += 1;
    const seen = tally.ids.get(event.id);
    if (seen !== undefined) tally.ids.set(event.id, seen + 1);
    else if (tally.ids.size < IDS_SHOWN) tally.ids.set(event.id, 1);
    this.timer ??= setTimeout(() => this.flush(), WINDOW_MS).unref();
  }

  /** One line per kind (and group) counted since the last flush. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const { kind, group, first, count, ids } of this.tallies.values()) {
      if (count === 1) {
        this.logger[kind.level](first.fields ?? {}, first.message ?? kind.message);
        continue;
      }
      const shown = [...ids].map(([id, times]) => (times > 1 ? `${id} ×${times}` : id));
      const unshown = count - [...ids.values()].reduce((sum, times) => sum + times, 0);
      const list = unshown > 0 ? `${shown.join(', ')} and ${unshown} more` : shown.join(', ');
      this.logger[kind.level](
        {
          ...(group === undefined ? {} : { group }),
          count,
          ids: [...ids.keys()],
          ...(first.fields === undefined ? {} : { first: first.fields }),
        },
        `${kind.summary(count, group)} (${list})`,
      );
    }
    this.tallies.clear();
  }
}

const byLogger = new WeakMap<Logger, RepeatedEvents>();

/** The tally of events logged through `logger`. */
export function repeatedEvents(logger: Logger): RepeatedEvents {
  let events = byLogger.get(logger);
  if (events === undefined) {
    events = new RepeatedEvents(logger);
    byLogger.set(logger, events);
  }
  return events;
}
