/**
 * A daemon's warehouse, kept open from one run to the next where its dialect says so
 * (DialectRules.keptBetweenRuns: SQLite's): opening and closing one (the file and its checks,
 * the checkpoint on close) costs an unchanged run of a small team more CPU than its requests do.
 * Each run after the first catches up with what other processes did meanwhile
 * (Warehouse.refresh: their migrations, the audit chain, the tables' shapes, a file put in its
 * place); a run that throws closes it, and the next one opens it afresh. Each run still takes the
 * writer lock and lets it go, as a run of its own would.
 */
import { describeError } from '../errors.js';
import type { Warehouse } from '../interfaces.js';
import type { Logger } from '../log.js';
import { dialectRules } from '../warehouse/open.js';

export class KeptWarehouse {
  private kept?: Warehouse;
  private closed = false;

  constructor(private readonly logger: Logger) {}

  /** The warehouse for a run: the one kept, caught up, or else `open()`'s. */
  async take(open: () => Promise<Warehouse>): Promise<Warehouse> {
    const kept = this.kept;
    this.kept = undefined;
    if (kept) {
      try {
        await kept.refresh();
        return kept;
      } catch (error) {
        // Opening it afresh says what is wrong, if anything still is.
        this.logger.info(
          { error: describeError(error) },
          'Opening the warehouse afresh: the one kept since the last run cannot be used',
        );
        await kept.close().catch(() => undefined);
      }
    }
    const opened = await open();
    this.logger.debug({ warehouse: opened.description }, 'Opened the warehouse');
    return opened;
  }

  /** Back from a run: kept for the next when the run did not throw (and it may be), else closed. */
  async give(warehouse: Warehouse, keep: boolean): Promise<void> {
    if (keep && !this.closed && dialectRules(warehouse.dialect).keptBetweenRuns) {
      this.kept = warehouse;
      return;
    }
    await warehouse.close();
  }

  /** Closes the warehouse kept; one still in a run is closed when it comes back. */
  async close(): Promise<void> {
    this.closed = true;
    const kept = this.kept;
    this.kept = undefined;
    await kept?.close();
  }
}
