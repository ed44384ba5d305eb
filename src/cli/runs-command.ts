/** `ocs-sync runs` and `ocs-sync runs show ID`: the run history. Reads the warehouse only. */
import { ExitCode, UsageError } from '../errors.js';
import type { Config } from '../config/schema.js';
import { openWarehouseReader } from '../warehouse/open.js';
import type { RunRecord, WarehouseReader } from '../warehouse/reader.js';
import { WHOLE_TEAM_KEY, describeChoice } from '../sync/chatbot-choice.js';
import type { CommandContext } from './context.js';
import { firstLine, formatTable, runningText, shorten } from './output.js';
import { storedText } from '../printable.js';
import { parseNumberOption } from './option-values.js';
import { formatAgo, formatDuration } from './time-text.js';

async function withReader<T>(
  config: Config,
  work: (reader: WarehouseReader) => Promise<T>,
): Promise<T> {
  const reader = await openWarehouseReader({
    url: config.warehouse.url,
    schema: config.warehouse.schema,
    statementTimeoutSeconds: config.warehouse.statementTimeoutSeconds,
  });
  try {
    return await work(reader);
  } finally {
    await reader.close();
  }
}

export async function runRunsCommand(
  context: CommandContext,
  options: { limit: string; json?: boolean },
): Promise<number> {
  const limit = parseNumberOption(options.limit, '--limit', {
    min: 1,
    max: 100_000,
    integer: true,
  });
  const config = context.config({ server: false });
  const runs = await withReader(config, (reader) => reader.runs({ limit }));
  if (options.json) {
    context.output.out(JSON.stringify(runs, null, 2));
    return ExitCode.ok;
  }
  if (runs.length === 0) {
    context.output.out('No runs recorded yet.');
    return ExitCode.ok;
  }
  const now = Date.now();
  // Only when some run walked under a chatbot choice: which one, by its chatbots.
  const chosen = runs.some((run) => run.selectionKey !== null);
  context.output.out(
    formatTable(
      [
        'id',
        'kind',
        'status',
        'started',
        'took',
        'rows',
        'pages',
        'requests',
        ...(chosen ? ['chatbot choice'] : []),
        'error',
      ],
      runs.map((run) => [
        run.id,
        run.kind,
        run.status,
        formatAgo(run.startedAt, now),
        run.finishedAt ? formatDuration(run.durationMs) : runningText(run, 'running'),
        run.rows,
        run.pages,
        run.requests,
        ...(chosen ? [shortChoice(run)] : []),
        shorten(firstLine(run.error ?? ''), 40),
      ]),
    ),
  );
  return ExitCode.ok;
}

/** "Support bot, Sales bot (3184818c)" in at most 30 columns; "whole team"; "-" for none. */
function shortChoice(run: RunRecord): string {
  if (run.selectionKey === null) return '-';
  if (run.selectionKey === WHOLE_TEAM_KEY) return 'whole team';
  const names = (run.choice?.chatbots ?? []).map((chatbot) => chatbot.name || chatbot.publicId);
  return `${shorten(names.join(', ') || '?', 20)} (${run.selectionKey.slice(0, 8)})`;
}

export async function runRunsShowCommand(
  context: CommandContext,
  options: { json?: boolean },
  operands: string[],
): Promise<number> {
  const id = parseNumberOption(operands[0] ?? '', 'The run id', {
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
    integer: true,
  });
  const config = context.config({ server: false });
  const found = await withReader(config, async (reader) => {
    const run = await reader.run(id);
    return run ? { run, resources: await reader.runResources(id) } : undefined;
  });
  if (!found) {
    throw new UsageError(`There is no run ${id} in this warehouse; \`ocs-sync runs\` lists them.`);
  }
  const { run, resources } = found;
  if (options.json) {
    context.output.out(JSON.stringify({ ...run, resources }, null, 2));
    return ExitCode.ok;
  }
  const now = Date.now();
  const out = (line: string) => context.output.out(line);
  out(`Run ${run.id} (${run.kind}): ${run.status}`);
  out(`  started   ${run.startedAt} (${formatAgo(run.startedAt, now)})`);
  out(
    `  took      ${run.finishedAt ? formatDuration(run.durationMs) : runningText(run, 'still running')}`,
  );
  out(`  rows      ${run.rows} in ${run.pages} pages, ${run.requests} requests`);
  if (run.schemaChecksum) out(`  schema    ${run.schemaChecksum}`);
  if (run.selectionKey !== null) {
    out(`  chatbots  ${describeChoice(run.choice ?? { key: run.selectionKey, chatbots: [] })}`);
  }
  if (run.error) out(`  error     ${storedText(run.error).replace(/\n/g, '\n            ')}`);
  out('');
  out(
    resources.length === 0
      ? 'No resource was recorded in this run.'
      : formatTable(
          ['resource', 'status', 'rows', 'pages', 'took', 'error'],
          resources.map((resource) => [
            resource.resource,
            resource.status,
            resource.rows,
            resource.pages,
            formatDuration(resource.durationMs),
            firstLine(resource.error ?? ''),
          ]),
        ),
  );
  return ExitCode.ok;
}
