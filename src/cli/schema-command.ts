import { ExitCode, UsageError } from '../errors.js';
import { formatSchemaMermaid, formatSchemaText, readSchemaReport } from './schema-report.js';
import type { CommandContext } from './main.js';
import { jsonReplacer } from './sync-command.js';
import { createWarehouse } from './wiring.js';

const FORMATS = ['text', 'json', 'mermaid'] as const;

export async function runSchemaCommand(
  context: CommandContext,
  options: { format?: string },
): Promise<number> {
  const format = options.format ?? 'text';
  if (!(FORMATS as readonly string[]).includes(format)) {
    throw new UsageError(`--format must be one of ${FORMATS.join(', ')}, not ${format}.`);
  }
  const config = context.config({ server: false });
  const warehouse = await createWarehouse(config, context.logger(config), { mustExist: true });
  try {
    const report = await readSchemaReport(warehouse);
    context.output.out(
      format === 'json'
        ? JSON.stringify(report, jsonReplacer, 2)
        : format === 'mermaid'
          ? formatSchemaMermaid(report)
          : formatSchemaText(report),
    );
    return ExitCode.ok;
  } finally {
    await warehouse.close();
  }
}
