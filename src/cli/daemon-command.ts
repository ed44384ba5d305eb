/**
 * `ocs-sync daemon`: the long-running service (see src/daemon/daemon.ts). Configuration problems
 * stop it at start (exit 1); once running, failed syncs never stop it; SIGTERM/SIGINT (or the
 * environment's abort signal in tests) shut it down cleanly with exit 0.
 */
import { ExitCode } from '../errors.js';
import type { Logger } from '../log.js';
import { CleanupStack } from '../daemon/cleanup-stack.js';
import { runDaemon } from '../daemon/daemon.js';
import type { CommandContext } from './context.js';
import { syncOnce } from './sync-command.js';
import { openWarehouseReader } from '../warehouse/open.js';
import type { WarehouseReader } from '../warehouse/reader.js';
import type { Config } from '../config/schema.js';
import { createSecrets, createWarehouse } from './wiring.js';

/** Exit this long after shutdown if something (a hung request, a lock wait) still holds the process. */
const FORCED_EXIT_AFTER_MS = 500;

export async function runDaemonCommand(context: CommandContext): Promise<number> {
  const config = context.config({ server: true });
  const logger = context.logger(config);
  // Key files are read at every run; a bad one should stop the daemon now (exit 1), not make
  // every run fail while it looks alive.
  createSecrets(config, logger);
  const cleanup = new CleanupStack();
  const fromProcess = context.environment.signal === undefined;
  const signal = context.environment.signal ?? processSignal(logger, cleanup);

  const result = await runDaemon({
    schedule: config.schedule,
    fullRefreshSchedule: config.fullRefreshSchedule,
    timezone: config.timezone,
    health: config.health,
    logger,
    signal,
    cleanup,
    sync: ({ kind, signal: runSignal, events, onAttempt }) =>
      syncOnce(config, logger, {
        fullRefresh: kind === 'full_refresh',
        signal: runSignal,
        events,
        onAttempt,
      }),
    readLastSuccess: () =>
      readWarehouse(config, async (reader) => {
        // ok or partial, as the metric counts a success.
        const finishedAt = (await reader.lastSuccessfulRun(['ok', 'partial']))?.finishedAt;
        return finishedAt ? Date.parse(finishedAt) : undefined;
      }),
    readUnfinishedFullRefresh: () =>
      readWarehouse(config, async (reader) => {
        // A dead process's run reads as interrupted once nobody holds the lock.
        const [last] = await reader.runs({ limit: 1, kinds: ['full_refresh'] });
        return last && last.status !== 'ok' && last.status !== 'partial'
          ? { runId: last.id, status: last.status }
          : undefined;
      }),
    readStatus: async () => {
      const warehouse = await createWarehouse(config, logger);
      try {
        return await warehouse.status();
      } finally {
        await warehouse.close();
      }
    },
  });

  if (fromProcess) {
    // Everything is closed, so the process normally exits at once; this only fires if some
    // handle (a request or lock wait the run did not give up) would keep it alive.
    setTimeout(() => process.exit(process.exitCode ?? ExitCode.ok), FORCED_EXIT_AFTER_MS).unref();
    if (result.abandonedRun) logger.warn('Exiting with a run still in progress');
  }
  return ExitCode.ok;
}

/** `read` on the warehouse, opened to read only; undefined when there is none yet. */
async function readWarehouse<T>(
  config: Config,
  read: (reader: WarehouseReader) => Promise<T | undefined>,
): Promise<T | undefined> {
  // A warehouse the first run has yet to create has nothing to tell.
  const reader = await openWarehouseReader({
    url: config.warehouse.url,
    schema: config.warehouse.schema,
  }).catch(() => undefined);
  if (!reader) return undefined;
  try {
    return await read(reader);
  } finally {
    await reader.close();
  }
}

/** An AbortSignal for SIGTERM and SIGINT; a second signal exits at once. */
export function processSignal(logger: Logger, cleanup: CleanupStack): AbortSignal {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      logger.warn({ signal: name }, 'Second signal: exiting now');
      process.exit(128 + (name === 'SIGINT' ? 2 : 15));
    }
    logger.info({ signal: name }, 'Signal received');
    controller.abort(new Error(`${name} received`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  cleanup.add('signal handlers', () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  });
  return controller.signal;
}
