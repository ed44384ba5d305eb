/**
 * Progress for people watching: a live status line on a terminal; periodic log lines otherwise
 * (a container's log should not fill with carriage returns).
 */
import type { Logger } from '../log.js';
import type { SyncEvents } from '../sync/engine.js';

const LOG_EVERY_MS = 15_000;
const REDRAW_EVERY_MS = 200;

export function createProgressEvents(
  logger: Logger,
  stream: NodeJS.WritableStream & { isTTY?: boolean; columns?: number },
  now: () => number = () => performance.now(),
): SyncEvents {
  const live = stream.isTTY === true;
  let resource = '';
  let index = 0;
  let total = 0;
  let rows = 0;
  let resourceRows = 0;
  let started = now();
  let lastShown = 0;

  const line = () => {
    const seconds = Math.max((now() - started) / 1000, 0.001);
    return `[${index + 1}/${total}] ${resource}: ${resourceRows} rows | total ${rows} rows, ${Math.round(rows / seconds)} rows/s`;
  };
  const show = (force = false) => {
    const at = now();
    if (live) {
      if (!force && at - lastShown < REDRAW_EVERY_MS) return;
      const width = Math.max(20, (stream.columns ?? 100) - 1);
      stream.write(`\r${line().slice(0, width).padEnd(width)}`);
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
      resource = info.resource;
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
      if (live && index + 1 >= total)
        stream.write(`\r${' '.repeat(Math.max(20, (stream.columns ?? 100) - 1))}\r`);
    },
  };
}
