/**
 * `snapshot.schedule`: the daemon takes a warehouse snapshot at those times (off by default),
 * beside the syncs (the online backup needs no lock, so it never waits for a run nor holds one
 * up). One at a time; a failed one is logged and the next is taken at its time. Stopped, and any
 * in progress waited for, on shutdown.
 */
import { createRequire } from 'node:module';
import type * as NodeCron from 'node-cron';
import type { Config } from '../config/schema.js';
import type { CleanupStack } from '../daemon/cleanup-stack.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { isSqliteTarget } from '../warehouse/url.js';
import { createSnapshot } from './snapshot-command.js';
import type { Env } from './wiring.js';

export function scheduleSnapshots(
  config: Config,
  env: Env,
  logger: Logger,
  cleanup: CleanupStack,
): void {
  const expression = config.snapshot.schedule;
  if (expression === undefined) return;
  if (!isSqliteTarget(config.warehouse.target) || config.snapshot.dir === undefined) {
    logger.warn(
      config.snapshot.dir === undefined
        ? 'snapshot.schedule is set without snapshot.dir (OCS_SNAPSHOT_DIR): no snapshot is taken'
        : 'snapshot.schedule is set, but the warehouse is PostgreSQL: back it up with pg_dump or the managed service (docs/off-the-box.md); no snapshot is taken',
    );
    return;
  }
  const cron = createRequire(import.meta.url)('node-cron') as typeof NodeCron;
  let inProgress: Promise<void> | undefined;
  const take = () => {
    if (inProgress) {
      logger.warn('The previous snapshot is still being taken: this one is skipped');
      return;
    }
    inProgress = createSnapshot(config, env, logger)
      .then(
        () => undefined,
        (error: unknown) =>
          logger.error(
            { error: describeError(error) },
            'The scheduled snapshot failed; the next is taken at its time',
          ),
      )
      .finally(() => (inProgress = undefined));
  };
  const task = cron.schedule(expression, take, { timezone: config.timezone, name: 'snapshot' });
  cleanup.add('snapshot schedule', async () => {
    await task.destroy();
    await inProgress;
  });
  logger.info({ schedule: expression, dir: config.snapshot.dir }, 'Snapshots scheduled');
}
