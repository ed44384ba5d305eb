import { ExitCode, UsageError } from '../errors.js';
import { exportParquet } from '../export/parquet.js';
import type { CommandContext } from './context.js';
import { warehouseTables } from './schema-report.js';
import { createWarehouse } from './wiring.js';
import { privateModes } from '../private-files.js';
import { stopOnSignals } from './stop-signals.js';

export async function runExportParquetCommand(
  context: CommandContext,
  directory: string,
  options: { resources?: string; live?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const logger = context.logger(config);
  const warehouse = await createWarehouse(config, logger, { mustExist: true });
  const stop = context.environment.signal
    ? undefined
    : stopOnSignals(logger, 'Stopping the export; removing what is not complete');
  try {
    const present = [...(await warehouseTables(warehouse)).keys()];
    const requested = options.resources
      ?.split(',')
      .map((name) => name.trim())
      .filter((name) => name !== '');
    if (requested) {
      const unknown = requested.filter((name) => !present.includes(name));
      if (unknown.length > 0) {
        throw new UsageError(
          `--resources names ${unknown.join(', ')}, which ${unknown.length === 1 ? 'is' : 'are'} not a table of this warehouse; its tables are: ${present.join(', ') || '(none: run a sync first)'}.`,
        );
      }
    }
    const tables = requested ?? present;
    await exportParquet(warehouse, {
      directory,
      tables,
      live: options.live ?? false,
      modes: privateModes(config.dataFileMode),
      signal: context.environment.signal ?? stop?.signal,
      onTable: (file) => context.output.out(`${file.file}  ${file.rows} rows`),
      onLeftoversRemoved: (paths) =>
        logger.warn(
          { paths },
          `Removed ${paths.length} folder(s) an export that was killed left behind`,
        ),
    });
    return ExitCode.ok;
  } finally {
    stop?.dispose();
    await warehouse.close();
  }
}
