/**
 * `ocs-sync demo`: the whole pipeline on one machine with no server of your own. A built-in fake
 * export server (with sealed resources and a couple of injected faults) is synced into a SQLite
 * file, opening sealed fields with a key pair made for the occasion. The output stays short:
 * warnings (the injected faults' retries) and a summary; `status` shows the rest.
 */
import { redactUrl } from '../warehouse/url.js';
import { ExitCode } from '../errors.js';
import { FILE_CONTENT_ENDPOINT } from '../fake-server/server.js';
import type { CommandContext } from './context.js';
import { startDemoServer, DEMO_API_KEY } from './fake-server-command.js';
import { parseNumberOption } from './option-values.js';
import { formatSyncSummary } from './output.js';
import { createProgressEvents } from './progress.js';
import { exitCodeFor, syncOnce } from './sync-command.js';

export { DEMO_API_KEY };

export async function runDemoCommand(
  context: CommandContext,
  options: { db: string; rows: string },
): Promise<number> {
  const rowsPerResource = parseNumberOption(options.rows, '--rows', {
    min: 1,
    max: 1_000_000,
    integer: true,
  });
  const { server, privateKeyPem } = await startDemoServer({ rowsPerResource });
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

    const warehouseUrl = context.globals.warehouse ?? options.db;
    const config = context.config(
      { server: true },
      {
        baseUrl: server.url,
        apiKey: DEMO_API_KEY,
        privateKey: privateKeyPem,
        warehouse: { url: warehouseUrl },
        http: { minRetryDelayMs: 50, maxRetryDelaySeconds: 1 },
        // Per-table lines would run to hundreds; warnings and the summary tell the story.
        logLevel: context.globals.logLevel ?? 'warn',
      },
    );
    const logger = context.logger(config);
    context.output.err(
      `Fake export server on ${server.url}; syncing into ${redactUrl(warehouseUrl)}`,
    );
    const report = await syncOnce(config, logger, {
      signal: context.environment.signal,
      env: context.environment.env,
      events: createProgressEvents(logger, context.liveArea()),
    });
    context.output.out(formatSyncSummary(report));
    context.output.out('');
    context.output.out(`See every resource:  ocs-sync status -w ${redactUrl(warehouseUrl)}`);
    context.output.out(`See the runs:        ocs-sync runs -w ${redactUrl(warehouseUrl)}`);
    context.output.out(
      'Run the demo again to see an incremental sync (one request per resource), or open the file with sqlite3.',
    );
    return report.status === 'ok' ? ExitCode.ok : exitCodeFor(report);
  } finally {
    await server.close();
  }
}
