import { ExitCode, describeError } from '../errors.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import {
  recordFailedRun,
  runSync,
  type SecretsSettings,
  type SyncEvents,
  type SyncReport,
} from '../sync/engine.js';
import type { CommandContext } from './context.js';
import { formatSyncSummary } from './output.js';
import { createProgressEvents } from './progress.js';
import { stopOnSignals } from './stop-signals.js';
import {
  createFiles,
  createSecrets,
  createSigner,
  createSource,
  createWarehouse,
  startAudit,
  syncOptionsFromConfig,
  warnIfSecretsReadableByOthers,
} from './wiring.js';
import { writeCheckpoint } from '../audit/checkpoints.js';
import { privateModes } from '../private-files.js';
import type { CheckpointSigner } from '../interfaces.js';

export interface SyncCommandOptions {
  fullRefresh?: boolean | string[];
  acceptSchemaChange?: boolean;
  resources?: string;
  json?: boolean;
}

export async function runSyncCommand(
  context: CommandContext,
  options: SyncCommandOptions,
): Promise<number> {
  const flags = options.resources
    ? {
        resources: options.resources
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean),
      }
    : {};
  const config = context.config({ server: true }, flags);
  const logger = context.logger(config);
  // SIGTERM/SIGINT: the page in flight commits or rolls back, the lock is released, and the next
  // run resumes there.
  const stop = context.environment.signal
    ? undefined
    : stopOnSignals(logger, 'Stopping after the page in flight');
  try {
    const report = await syncOnce(config, logger, {
      fullRefresh: options.fullRefresh,
      acceptSchemaChange: options.acceptSchemaChange,
      signal: context.environment.signal ?? stop?.signal,
      events: createProgressEvents(logger, context.liveArea()),
    });
    context.output.out(
      options.json ? JSON.stringify(report, jsonReplacer, 2) : formatSyncSummary(report),
    );
    return exitCodeFor(report);
  } finally {
    stop?.dispose();
  }
}

/** One sync pass with the real parts; the daemon and `demo` use it too. */
export async function syncOnce(
  config: Config,
  logger: Logger,
  extra: {
    fullRefresh?: boolean | string[];
    acceptSchemaChange?: boolean;
    signal?: AbortSignal;
    events?: SyncEvents;
    onAttempt?: Parameters<typeof createSource>[2];
  } = {},
): Promise<SyncReport> {
  const warehouse = await createWarehouse(config, logger);
  try {
    await startAudit(config, warehouse, logger);
    let secrets: SecretsSettings;
    let source: ReturnType<typeof createSource>;
    let signer: CheckpointSigner | undefined;
    try {
      secrets = createSecrets(config, logger);
      signer = createSigner(config, logger);
      source = createSource(config, logger, extra.onAttempt);
    } catch (error) {
      // A key or setting that cannot be used: recorded as a failed run, so monitoring sees it.
      await recordFailedRun(
        warehouse,
        extra.fullRefresh ? 'full_refresh' : 'incremental',
        error,
      ).catch((recordError: unknown) =>
        logger.warn({ error: describeError(recordError) }, 'Could not record the failed run'),
      );
      throw error;
    }
    let report: SyncReport | undefined;
    try {
      report = await runSync({
        ...syncOptionsFromConfig(config, { source, warehouse, logger, secrets }),
        fullRefresh: extra.fullRefresh,
        acceptSchemaChange: extra.acceptSchemaChange,
        signal: extra.signal,
        events: extra.events,
        files: createFiles(config, { source, warehouse, logger }),
      });
    } finally {
      await source.close();
      await warnIfSecretsReadableByOthers(config, warehouse, logger).catch(() => undefined);
      // Every run ends with a checkpoint, a failed or interrupted one too: a step of its own.
      const signing = { stage: 'signing the audit checkpoint', unit: 'checkpoints', total: 1 };
      if (signer) extra.events?.onProgress?.({ ...signing, done: 0 });
      const audit = signer
        ? await writeCheckpoint(
            warehouse.audit,
            signer,
            config.audit.checkpointFile!,
            logger,
            privateModes(config.dataFileMode),
          )
        : undefined;
      if (audit) extra.events?.onProgress?.({ ...signing, done: 1 });
      if (report && audit) report = { ...report, audit };
    }
    return report!;
  } finally {
    await warehouse.close();
  }
}

export function exitCodeFor(report: SyncReport): number {
  return report.status === 'ok' && report.audit?.error === undefined
    ? ExitCode.ok
    : ExitCode.partial;
}

/** JSON.stringify that writes bigint ids as their digits. */
export function jsonReplacer(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}
