/**
 * Progress for people watching: on a terminal, one live status line (resource i/n, rows, rows/s)
 * at the bottom of the LiveArea, which log lines pass above; off a terminal, a JSON log line
 * every so often (a container's log should not fill with carriage returns).
 */
import type { Logger } from '../log.js';
import type { SyncEvents } from '../sync/engine.js';
import type { LiveArea } from './live-area.js';
import { printable } from '../printable.js';

const LOG_EVERY_MS = 15_000;
const REDRAW_EVERY_MS = 200;

export function createProgressEvents(
  logger: Logger,
  area: Pick<LiveArea, 'live' | 'show' | 'clear'>,
  now: () => number = () => performance.now(),
): SyncEvents {
  const live = area.live;
  let resource = '';
  let index = 0;
  let total = 0;
  let rows = 0;
  let resourceRows = 0;
  let resourcesDone = 0;
  let started = now();
  let lastShown = 0;

  const line = () => {
    const seconds = Math.max((now() - started) / 1000, 0.001);
    return `[${index + 1}/${total}] ${resource}: ${resourceRows} rows | total ${rows} rows, ${Math.round(rows / seconds)} rows/s, ${resourcesDone}/${total} done`;
  };
  const show = (force = false) => {
    const at = now();
    if (live) {
      if (!force && at - lastShown < REDRAW_EVERY_MS) return;
      area.show(line());
    } else {
      if (!force && at - lastShown < LOG_EVERY_MS) return;
      logger.info({ resource, index: index + 1, total, rows }, `Progress: ${line()}`);
    }
    lastShown = at;
  };

  return {
    onRunStart: (info) => {
      total = info.resources;
      started = now();
      lastShown = live ? 0 : started;
    },
    onResourceStart: (info) => {
      // The manifest's name as given: a refused one may hold anything.
      resource = printable(info.resource, { max: 60 });
      index = info.index;
      total = info.total;
      resourceRows = 0;
      if (live) show(true);
    },
    onPageWritten: (info) => {
      rows += info.rows;
      resourceRows += info.rows;
      show();
    },
    onResourceDone: () => {
      resourcesDone += 1;
      if (live && resourcesDone >= total) area.clear();
    },
  };
}
