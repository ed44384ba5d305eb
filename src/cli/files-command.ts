/**
 * `ocs-sync files verify`: re-hash every recorded blob; exit 3 when any is missing or corrupt.
 * With `--refetch`, those files are marked failed so the next sync fetches them again.
 */
import { ExitCode } from '../errors.js';
import { verifyBlobs } from '../files/verify.js';
import type { CommandContext } from './context.js';
import { formatBytes } from './files-output.js';
import { jsonReplacer } from './sync-command.js';
import { createContentStore, createWarehouse, requireFilesDir } from './wiring.js';

export async function runFilesVerifyCommand(
  context: CommandContext,
  options: { json?: boolean; refetch?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const dir = requireFilesDir(config);
  const warehouse = await createWarehouse(config, context.logger(config), { mustExist: true });
  const store = createContentStore(config, context.environment.env, dir);
  let report;
  try {
    const ledger = warehouse.fileLedger();
    report = await verifyBlobs(ledger, store, {
      signal: context.environment.signal,
    });
    if (options.refetch) {
      for (const problem of report.problems) {
        // A damaged copy would pass for the refetched content (same digest): remove it.
        if (problem.problem === 'corrupt') await store.remove(problem.sha256);
        const record = await ledger.get(problem.fileId);
        if (record?.status !== 'ok' || record.sha256 !== problem.sha256) continue;
        await ledger.record({
          ...record,
          status: 'failed',
          error: `files verify found the blob ${problem.problem}`,
        });
      }
    }
  } finally {
    store.close();
    await warehouse.close();
  }
  if (options.json) {
    context.output.out(JSON.stringify({ dir, ...report }, jsonReplacer, 2));
  } else {
    context.output.out(
      `Checked ${report.files} stored file${report.files === 1 ? '' : 's'} (${report.blobs} blobs, ` +
        `${formatBytes(report.bytes)} intact) in ${dir}: ` +
        (report.problems.length === 0 ? 'all intact.' : `${report.problems.length} problem(s).`),
    );
    for (const problem of report.problems) {
      context.output.out(
        `${problem.problem}: file ${problem.fileId}: ${store.whereIs(problem.sha256)}` +
          (problem.detail ? ` (${problem.detail})` : ''),
      );
    }
    if (report.problems.length > 0) {
      context.output.out(
        options.refetch
          ? 'Marked for fetching again: the next sync downloads them.'
          : 'Run `ocs-sync files verify --refetch` to have the next sync download them again.',
      );
    }
  }
  return report.problems.length === 0 ? ExitCode.ok : ExitCode.partial;
}
