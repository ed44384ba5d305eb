/**
 * SIGTERM and SIGINT for a command that stops at its next safe point (`sync` after the page in
 * flight, `export parquet` at the next batch): the first signal aborts the returned signal and the
 * command ends cleanly, saying so; a second one exits at once (128 + the signal's number).
 */
import type { Logger } from '../log.js';

export function stopOnSignals(
  logger: Logger,
  stopping: string,
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) process.exit(128 + (name === 'SIGINT' ? 2 : 15));
    logger.warn({ signal: name }, stopping);
    controller.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    },
  };
}
