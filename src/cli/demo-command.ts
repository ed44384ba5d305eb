/**
 * `ocs-sync demo`: the whole pipeline on one machine with no server of your own. A built-in fake
 * export server (with sealed resources and a couple of injected faults) is synced into a SQLite
 * file, opening sealed fields with a key pair made for the occasion.
 */
import { generateKeyPairSync } from 'node:crypto';
import { ExitCode, UsageError } from '../errors.js';
import { createSampleDataset } from '../fake-server/fixture.js';
import { FILE_CONTENT_ENDPOINT, startFakeServer } from '../fake-server/server.js';
import { formatFileTotals } from './files-output.js';
import type { CommandContext } from './main.js';
import { formatStatusTable, formatSyncSummary } from './output.js';
import { createProgressEvents } from './progress.js';
import { exitCodeFor, syncOnce } from './sync-command.js';
import { createWarehouse } from './wiring.js';

export const DEMO_API_KEY = 'demo-admin-key';

export async function runDemoCommand(
  context: CommandContext,
  options: { db: string; rows: string },
): Promise<number> {
  const rowsPerResource = Number(options.rows);
  if (!Number.isInteger(rowsPerResource) || rowsPerResource < 1 || rowsPerResource > 1_000_000) {
    throw new UsageError(`--rows must be a whole number from 1 to 1000000, got ${options.rows}.`);
  }
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const server = await startFakeServer({
    dataset: createSampleDataset({ rowsPerResource }),
    apiKeys: { admin: [DEMO_API_KEY], nonAdmin: [] },
    teamPublicKeyPem: publicKey,
    rateLimit: { limit: 2000, windowSeconds: 300 },
  });
  try {
    // A flaky moment, so the log shows retries doing their job.
    server.faults.failNext(
      1,
      { kind: 'status', status: 503, html: true },
      { resource: 'chat_messages' },
    );
    server.faults.failNext(1, { kind: 'truncate' }, { resource: 'participants' });
    // File downloads meet a cut-off body and a reset connection too; both are retried.
    server.faults.failNext(1, { kind: 'truncate' }, { resource: FILE_CONTENT_ENDPOINT });
    server.faults.failNext(1, { kind: 'drop' }, { resource: FILE_CONTENT_ENDPOINT });

    const config = context.config(
      { server: true },
      {
        baseUrl: server.url,
        apiKey: DEMO_API_KEY,
        privateKey,
        warehouse: { url: context.globals.warehouse ?? options.db },
        http: { minRetryDelayMs: 50, maxRetryDelaySeconds: 1 },
      },
    );
    const logger = context.logger(config);
    context.output.err(`Fake export server on ${server.url}; syncing into ${config.warehouse.url}`);
    const report = await syncOnce(config, logger, {
      signal: context.environment.signal,
      events: createProgressEvents(logger, context.environment.logStream ?? process.stderr),
    });
    context.output.out(formatSyncSummary(report));
    context.output.out('');
    const warehouse = await createWarehouse(config, logger);
    try {
      context.output.out(formatStatusTable(await warehouse.status()));
      context.output.out('');
      context.output.out(formatFileTotals(await warehouse.fileLedger().totals(), config.files.dir));
    } finally {
      await warehouse.close();
    }
    context.output.out('');
    context.output.out(
      `Run it again to see an incremental sync (one request per resource), or open ${config.warehouse.url} with sqlite3.`,
    );
    return report.status === 'ok' ? ExitCode.ok : exitCodeFor(report);
  } finally {
    await server.close();
  }
}
