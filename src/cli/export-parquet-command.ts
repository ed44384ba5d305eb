import { unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { ExitCode, UsageError } from '../errors.js';
import { exportParquet, type ParquetFile } from '../export/parquet.js';
import { ScratchFolder } from '../export/scratch-folders.js';
import { bucketLocationProblem, isBucketText } from '../storage/location.js';
import { putFile, type ObjectStore } from '../storage/store.js';
import type { CommandContext } from './context.js';
import { warehouseTables } from './schema-report.js';
import { createObjectStore, createWarehouse } from './wiring.js';
import { privateModes } from '../private-files.js';
import { stopOnSignals } from './stop-signals.js';

export async function runExportParquetCommand(
  context: CommandContext,
  directory: string,
  options: { resources?: string; live?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const logger = context.logger(config);
  const bucket = isBucketText(directory);
  if (bucket) {
    const problem = bucketLocationProblem(directory);
    if (problem !== undefined) throw new UsageError(`export parquet ${directory}: ${problem}`);
  }
  // A bucket: each file is made in a private folder of TMPDIR, then uploaded (an object appears
  // whole or not at all) and removed there before the next table.
  const store = bucket ? createObjectStore(config, context.environment.env, directory) : undefined;
  if (store) await store.probe();
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
    const scratch = store ? await ScratchFolder.create(tmpdir(), 'ocs-parquet-out-') : undefined;
    try {
      await exportParquet(warehouse, {
        directory: scratch?.path ?? directory,
        tables,
        live: options.live ?? false,
        modes: privateModes(config.dataFileMode),
        signal: context.environment.signal ?? stop?.signal,
        onTable: async (file) =>
          context.output.out(`${store ? await upload(store, file) : file.file}  ${file.rows} rows`),
        onLeftoversRemoved: (paths) =>
          logger.warn(
            { paths },
            `Removed ${paths.length} folder(s) an export that was killed left behind`,
          ),
      });
    } finally {
      scratch?.remove();
    }
    return ExitCode.ok;
  } finally {
    stop?.dispose();
    store?.close();
    await warehouse.close();
  }
}

/** One complete file into the bucket, as `<table>.parquet`; its s3:// name. */
async function upload(store: ObjectStore, file: ParquetFile): Promise<string> {
  const key = `${file.table}.parquet`;
  await putFile(store, key, file.file, {
    contentType: 'application/vnd.apache.parquet',
  });
  await unlink(file.file);
  return store.where(key);
}
