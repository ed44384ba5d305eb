/**
 * `ocs-sync serve`: answer the server's export API from the warehouse, so the server's own
 * importer (`manage.py sync_team`) can restore the team. Runs until SIGTERM/SIGINT.
 */
import { readFileSync } from 'node:fs';
import { ExitCode, UsageError } from '../errors.js';
import { secretPolicyFor } from '../config/secrets.js';
import { isLoopbackHost } from '../config/server.js';
import { parseListenAddress } from '../listen-address.js';
import { CleanupStack } from '../daemon/cleanup-stack.js';
import { keyFileShown, loadArchiveSecretKey, warnIfExposed } from '../sealing/keys.js';
import { startExportServer } from '../serve/export-server.js';
import { prepareServe } from '../serve/prepare.js';
import { loadRestorePublicKey } from '../serve/restore-key.js';
import type { SealingForServe } from '../serve/rows.js';
import { toSortableUtc } from '../timestamps.js';
import { processSignal } from './daemon-command.js';
import type { CommandContext } from './context.js';
import { createContentStore, createWarehouse } from './wiring.js';

export const DEFAULT_SERVE_LISTEN = '127.0.0.1:8765';

export interface ServeCommandOptions {
  listen?: string;
  publicKey?: string;
  archiveKey?: string;
  apiKeyFile?: string;
  asOf?: string;
  allowIncomplete?: boolean;
  filesDir?: string;
}

/** Shorter keys can be guessed; `openssl rand -hex 32` gives 64 characters. */
export const MIN_SERVE_KEY_LENGTH = 32;

const AS_OF = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;

function readApiKey(options: ServeCommandOptions, env: NodeJS.ProcessEnv): string {
  let key: string | undefined;
  if (options.apiKeyFile !== undefined) {
    try {
      key = readFileSync(options.apiKeyFile, 'utf8').trim();
    } catch (error) {
      throw new UsageError(
        `Cannot read --api-key-file ${keyFileShown(options.apiKeyFile)}: ${(error as NodeJS.ErrnoException).code ?? 'error'}.`,
      );
    }
    if (key === '') throw new UsageError(`--api-key-file ${options.apiKeyFile} is empty.`);
  } else {
    key = env.OCS_SERVE_API_KEY?.trim();
  }
  if (!key) {
    throw new UsageError('serve needs an API key for the importer to present.', {
      hint: 'Set OCS_SERVE_API_KEY or pass --api-key-file FILE (a long random string).',
    });
  }
  if (key.length < MIN_SERVE_KEY_LENGTH) {
    const setting =
      options.apiKeyFile !== undefined
        ? `--api-key-file ${options.apiKeyFile}`
        : 'OCS_SERVE_API_KEY';
    throw new UsageError(
      `The serve API key (${setting}) has ${key.length} characters; serve refuses keys shorter than ${MIN_SERVE_KEY_LENGTH}, which can be guessed.`,
      { hint: 'Make one with `openssl rand -hex 32` (64 characters).' },
    );
  }
  return key;
}

export async function runServeCommand(
  context: CommandContext,
  options: ServeCommandOptions,
): Promise<number> {
  const listenText = options.listen ?? DEFAULT_SERVE_LISTEN;
  const listen = parseListenAddress(listenText);
  if ('problem' in listen) throw new UsageError(`--listen ${listenText} ${listen.problem}.`);
  if (options.asOf !== undefined && !AS_OF.test(options.asOf)) {
    throw new UsageError(
      `--as-of ${JSON.stringify(options.asOf)} is not an ISO 8601 time with an offset, e.g. 2026-11-20T10:00:00Z.`,
    );
  }
  let asOf: string | undefined;
  try {
    asOf = options.asOf === undefined ? undefined : toSortableUtc(options.asOf);
  } catch {
    throw new UsageError(`--as-of ${JSON.stringify(options.asOf)} is not a real date and time.`);
  }
  const apiKey = readApiKey(options, context.environment.env);
  const config = context.config({ server: false });
  const logger = context.logger(config);
  if (options.apiKeyFile !== undefined) {
    warnIfExposed(options.apiKeyFile, 'serve API key file (--api-key-file)', (message) =>
      logger.warn(message),
    );
  }
  const sealing: SealingForServe = {};
  if (options.publicKey !== undefined) sealing.publicKey = loadRestorePublicKey(options.publicKey);
  if (options.archiveKey !== undefined) {
    sealing.archiveSecretKey = loadArchiveSecretKey(options.archiveKey, (message) =>
      logger.warn(message),
    );
  }
  const filesDir = options.filesDir ?? config.files.dir;

  const cleanup = new CleanupStack();
  const signal = context.environment.signal ?? processSignal(logger, cleanup);
  const warehouse = await createWarehouse(config, logger, { mustExist: true });
  cleanup.add('warehouse', () => warehouse.close());
  const files =
    filesDir === undefined
      ? undefined
      : createContentStore(config, context.environment.env, filesDir);
  if (files) cleanup.add('file contents', async () => files.close());
  try {
    const prepared = await prepareServe(warehouse, {
      policyFor: (resource) => secretPolicyFor(config, resource),
      excludedFields: config.excludeFields,
      asOf,
      allowIncomplete: options.allowIncomplete === true,
      hasPublicKey: sealing.publicKey !== undefined,
      hasArchiveKey: sealing.archiveSecretKey !== undefined,
    });
    for (const warning of prepared.plan.warnings) logger.warn(warning);
    const server = await startExportServer({
      warehouse,
      plan: prepared.plan,
      manifestBody: prepared.manifestBody,
      openApiBody: prepared.openApiBody,
      apiKey,
      sealing,
      asOf,
      files,
      listen,
      logger,
    });
    cleanup.add('export server', () => server.close());
    if (!isLoopbackHost(listen.host)) {
      logger.warn(
        { listen: listenText },
        `serve listens on ${listenText}, beyond loopback, and speaks plain HTTP: the API key and the team's data (opened secrets resealed, file contents) cross the network unencrypted unless a TLS proxy sits in front of it. Prefer --listen 127.0.0.1:PORT with an SSH tunnel, or put a TLS proxy in front.`,
      );
    }
    const { out } = context.output;
    out(`Serving ${warehouse.description}${asOf ? ` as of ${asOf}` : ''} at ${server.url}`);
    out(`Schema checksum ${prepared.schemaChecksum}; ${prepared.plan.resources.size} resources.`);
    out('On the target server (see docs/restore.md):');
    out(
      `  python manage.py sync_team --source-url ${server.url} --api-key "$OCS_SERVE_API_KEY" ` +
        '--team-slug SLUG --private-key-path RESTORE_PRIVATE_KEY.pem',
    );
    if (!signal.aborted) {
      await new Promise<void>((resolve) =>
        signal.addEventListener('abort', () => resolve(), { once: true }),
      );
    }
    return ExitCode.ok;
  } finally {
    await cleanup.runAll(logger);
  }
}
