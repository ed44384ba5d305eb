import { ExitCode } from '../errors.js';
import type { CommandContext } from './main.js';
import { MANIFEST_ORDER_STATE_KEY } from '../sync/engine.js';
import { formatStatusTable, inManifestOrder } from './output.js';
import { jsonReplacer } from './sync-command.js';
import { createWarehouse } from './wiring.js';
import { formatFileTotals } from './files-output.js';

export async function runStatusCommand(
  context: CommandContext,
  options: { json?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const warehouse = await createWarehouse(config, context.logger(config), { mustExist: true });
  try {
    const statuses = inManifestOrder(
      await warehouse.status(),
      await warehouse.getState(MANIFEST_ORDER_STATE_KEY),
    );
    context.output.out(
      options.json ? JSON.stringify(statuses, jsonReplacer, 2) : formatStatusTable(statuses),
    );
    if (!options.json) {
      const files = await warehouse.fileLedger().totals();
      context.output.out(`\n${formatFileTotals(files, config.files.dir)}`);
    }
    return ExitCode.ok;
  } finally {
    await warehouse.close();
  }
}
