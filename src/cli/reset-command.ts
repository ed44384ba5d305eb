/**
 * `ocs-sync reset RESOURCE...`: forget cursors so the next sync walks those resources from the
 * start; `--drop-table` also drops their tables (rebuilt by the next sync). Takes the writer
 * lock without waiting, so it never runs under a sync; recorded as a run of kind `reset`.
 */
import { unknownNameAdvice } from '../did-you-mean.js';
import { ExitCode, UsageError } from '../errors.js';
import type { CommandContext } from './context.js';
import { createWarehouse } from './wiring.js';

export async function runResetCommand(
  context: CommandContext,
  options: { dropTable?: boolean; yes?: boolean },
  resources: string[],
): Promise<number> {
  const names = [...new Set(resources)];
  const config = context.config({ server: false });
  const logger = context.logger(config);
  const warehouse = await createWarehouse(config, logger, { mustExist: true });
  try {
    const known = (await warehouse.status()).map((status) => status.resource);
    const unknown = names.filter((name) => !known.includes(name));
    if (unknown.length > 0) {
      throw new UsageError(
        unknown
          .map(
            (name) =>
              `${JSON.stringify(name)} is not a resource of this warehouse; ${unknownNameAdvice(name, known)}`,
          )
          .join('\n'),
      );
    }
    const what = options.dropTable
      ? `forget the cursor of ${names.join(', ')} and DROP ${names.length === 1 ? 'its table' : 'their tables'} (rows and history)`
      : `forget the cursor of ${names.join(', ')}`;
    if (!options.yes) {
      const confirm = context.environment.confirm;
      if (!confirm) {
        throw new UsageError(
          `reset would ${what}; add --yes to do it without a terminal to ask on.`,
        );
      }
      if (!(await confirm(`Reset will ${what}. Go on?`))) {
        context.output.err('Nothing was changed.');
        return ExitCode.failed;
      }
    }
    // No waiting: a reset under a running sync would be undone by its next page.
    const lock = await warehouse.acquireLock(0);
    let runId: number;
    try {
      for (const name of names) {
        await warehouse.bookkeeping.resetCursor(name);
        if (options.dropTable) await warehouse.tools.dropTable(name);
      }
      runId = await warehouse.bookkeeping.recordReset(
        names,
        options.dropTable ? 'cursor forgotten, table dropped' : 'cursor forgotten',
      );
    } finally {
      await lock.release();
    }
    logger.info({ runId, resources: names, dropTable: options.dropTable === true }, 'Reset');
    context.output.out(
      `Reset ${names.join(', ')} (run ${runId}): the next sync walks ${names.length === 1 ? 'it' : 'them'} from the start${options.dropTable ? ' into a new table' : ''}.`,
    );
    return ExitCode.ok;
  } finally {
    await warehouse.close();
  }
}
