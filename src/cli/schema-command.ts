import { ExitCode, UsageError } from '../errors.js';
import {
  formatSchemaMermaid,
  formatSchemaText,
  readSchemaReport,
  type SchemaReport,
} from './schema-report.js';
import type { CommandContext } from './context.js';
import { jsonReplacer } from './sync-command.js';
import { createWarehouse } from './wiring.js';

const FORMATS = ['text', 'json', 'mermaid'] as const;

export async function runSchemaCommand(
  context: CommandContext,
  options: { format?: string; resources?: string },
): Promise<number> {
  const format = options.format ?? 'text';
  if (!(FORMATS as readonly string[]).includes(format)) {
    throw new UsageError(`--format must be one of ${FORMATS.join(', ')}, not ${format}.`);
  }
  const config = context.config({ server: false });
  const warehouse = await createWarehouse(config, context.logger(config), { mustExist: true });
  try {
    const wanted = options.resources
      ?.split(',')
      .map((name) => name.trim())
      .filter((name) => name !== '');
    const report = onlyTables(await readSchemaReport(warehouse), wanted);
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

/** The report limited to some tables and the relationships between them. */
function onlyTables(report: SchemaReport, names: string[] | undefined): SchemaReport {
  if (!names) return report;
  const known = new Set(report.tables.map((table) => table.name));
  const unknown = names.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new UsageError(
      `--resources names ${unknown.join(', ')}, which ${unknown.length === 1 ? 'is' : 'are'} not a table of this warehouse.`,
    );
  }
  return {
    ...report,
    tables: report.tables.filter((table) => names.includes(table.name)),
    relationships: report.relationships.filter(
      (relationship) =>
        names.includes(relationship.table) && names.includes(relationship.references),
    ),
  };
}
