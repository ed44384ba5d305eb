/**
 * Progress for people watching: on a terminal, one live status line (resource i/n, rows, rows/s)
 * at the bottom of the LiveArea, which log lines pass above; off a terminal, a JSON log line
 * every so often (a container's log should not fill with carriage returns).
 */
import { describeProgress } from '../daemon/health.js';
import type { ProgressListener } from '../interfaces.js';
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

/**
 * Progress of a command's stages (`audit verify`), told through a ProgressListener: on a terminal
 * a live line, redrawn at most every 200 ms; off a terminal a log line every 15 s. `end()` clears
 * the line.
 */
export function createStageProgress(
  logger: Logger,
  area: Pick<LiveArea, 'live' | 'show' | 'clear'>,
  now: () => number = () => performance.now(),
): { listener: ProgressListener; end: () => void } {
  let lastShown = area.live ? -Infinity : now();
  let lastStage = '';
  return {
    listener: (progress) => {
      const at = now();
      const wait = area.live ? REDRAW_EVERY_MS : LOG_EVERY_MS;
      // A new stage is drawn at once on a terminal: it says what the command turned to.
      if (at - lastShown < wait && !(area.live && progress.stage !== lastStage)) return;
      lastShown = at;
      lastStage = progress.stage;
      const text = describeProgress(progress);
      if (area.live) area.show(text);
      else logger.info({ stage: progress.stage, done: progress.done }, `Progress: ${text}`);
    },
    end: () => {
      if (area.live) area.clear();
    },
  };
}
