/**
 * Shutdown bookkeeping in the graphile-worker style: every part that needs undoing registers its
 * cleanup right after it is set up, and shutdown runs them in reverse order. A cleanup that fails
 * is logged and the rest still run, so one stuck part never leaves the others open.
 */
import type { Logger } from '../log.js';

export type Cleanup = () => void | Promise<void>;

export class CleanupStack {
  private readonly entries: Array<{ name: string; cleanup: Cleanup }> = [];
  private running: Promise<void> | undefined;

  /** Register `cleanup` under a name that logs can show. */
  add(name: string, cleanup: Cleanup): void {
    if (this.running) {
      // Registered after shutdown began (a part finished starting late): undo it at once.
      void Promise.resolve()
        .then(cleanup)
        .catch(() => undefined);
      return;
    }
    this.entries.push({ name, cleanup });
  }

  get size(): number {
    return this.entries.length;
  }

  /** Run every cleanup, last registered first. Safe to call more than once; runs them once. */
  runAll(logger: Logger): Promise<void> {
    this.running ??= (async () => {
      while (this.entries.length > 0) {
        const { name, cleanup } = this.entries.pop()!;
        try {
          await cleanup();
          logger.debug({ part: name }, 'Stopped');
        } catch (error) {
          logger.error(
            { part: name, error: error instanceof Error ? error.message : String(error) },
            'A part failed to stop cleanly; going on with the rest of the shutdown',
          );
        }
      }
    })();
    return this.running;
  }
}
