/**
 * What `ocs-sync schema` prints: the resource tables, their columns and types, and the
 * relationships between them, as text, JSON or a Mermaid ER diagram. Pure: reading the warehouse
 * is readSchemaReport's one I/O step.
 */
import type { ColumnSpec, Warehouse } from '../interfaces.js';
import { MANIFEST_ORDER_STATE_KEY, storedTables } from '../sync/engine.js';
import {
  RELATIONSHIPS_STATE_KEY,
  RESOURCE_MODELS_STATE_KEY,
  findRelationships,
  parseRelationships,
  referenceCandidates,
  type Relationship,
} from '../sync/relationships.js';
import { sqlColumnTypes } from '../warehouse/open.js';
import { historyTableName, liveViewName } from '../warehouse/identifiers.js';
import { OWN_COLUMNS } from '../warehouse/table-definitions.js';

export interface SchemaReport {
  dialect: Warehouse['dialect'];
  tables: Array<{
    name: string;
    /** The view of its rows not marked deleted. */
    liveView: string;
    history: string;
    columns: Array<ColumnSpec & { sqlType: string }>;
  }>;
  relationships: Relationship[];
}

/** The tables of the last manifest (and `team`) that exist, in manifest order, with columns. */
export async function warehouseTables(warehouse: Warehouse): Promise<Map<string, ColumnSpec[]>> {
  return storedTables(
    warehouse,
    parseList(await warehouse.bookkeeping.getState(MANIFEST_ORDER_STATE_KEY)),
  );
}

/** The tables with the relationships found. */
export async function readSchemaReport(warehouse: Warehouse): Promise<SchemaReport> {
  const tables = await warehouseTables(warehouse);
  let relationships = parseRelationships(
    await warehouse.bookkeeping.getState(RELATIONSHIPS_STATE_KEY),
  );
  if ((await warehouse.bookkeeping.getState(RELATIONSHIPS_STATE_KEY)) === undefined) {
    // A warehouse synced before relationships were kept: work them out now, without saving.
    const models = new Map(
      Object.entries(parseObject(await warehouse.bookkeeping.getState(RESOURCE_MODELS_STATE_KEY))),
    );
    relationships = await findRelationships(
      warehouse.reads,
      referenceCandidates(tables, models),
      [],
    );
  }
  const sqlTypes = await sqlColumnTypes(warehouse.dialect);
  return {
    dialect: warehouse.dialect,
    tables: [...tables].map(([name, columns]) => ({
      name,
      liveView: liveViewName(name),
      history: historyTableName(name),
      columns: [{ name: 'id', type: 'integer' as const }, ...columns, ...OWN_COLUMNS].map(
        (column) => ({ ...column, sqlType: sqlTypes[column.type] }),
      ),
    })),
    relationships: relationships.filter(
      (relationship) => tables.has(relationship.table) && tables.has(relationship.references),
    ),
  };
}

function parseList(text: string | undefined): string[] {
  try {
    const parsed = JSON.parse(text ?? '[]') as unknown;
    return Array.isArray(parsed) ? parsed.filter((item) => typeof item === 'string') : [];
  } catch {
    return [];
  }
}

function parseObject(text: string | undefined): Record<string, string> {
  try {
    const parsed = JSON.parse(text ?? '{}') as unknown;
    return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

function referenceOf(
  report: SchemaReport,
  table: string,
  column: string,
): Relationship | undefined {
  return report.relationships.find(
    (relationship) => relationship.table === table && relationship.column === column,
  );
}

export function formatSchemaText(report: SchemaReport): string {
  const lines: string[] = [];
  for (const table of report.tables) {
    lines.push(`${table.name}  (live rows: ${table.liveView})`);
    const width = Math.max(...table.columns.map((column) => column.name.length));
    const typeWidth = Math.max(...table.columns.map((column) => column.type.length));
    for (const column of table.columns) {
      const reference = referenceOf(report, table.name, column.name);
      const note =
        column.name === 'id'
          ? 'primary key'
          : reference
            ? `-> ${reference.references}.id (${reference.basis})`
            : '';
      lines.push(
        `  ${column.name.padEnd(width)}  ${column.type.padEnd(typeWidth)}  ${column.sqlType}${note ? `  ${note}` : ''}`,
      );
    }
    lines.push('');
  }
  lines.push(
    report.relationships.length === 0
      ? 'Relationships: none found yet (run a sync).'
      : `Relationships (${report.relationships.length}):`,
  );
  for (const relationship of report.relationships) {
    lines.push(
      `  ${relationship.table}.${relationship.column} -> ${relationship.references}.id (${relationship.basis})`,
    );
  }
  return lines.join('\n');
}

/** A Mermaid `erDiagram`: each table with its columns, each relationship as many-to-one. */
export function formatSchemaMermaid(report: SchemaReport): string {
  const lines = ['erDiagram'];
  for (const table of report.tables) {
    lines.push(`  ${table.name} {`);
    for (const column of table.columns) {
      const key =
        column.name === 'id' ? ' PK' : referenceOf(report, table.name, column.name) ? ' FK' : '';
      lines.push(`    ${column.type} ${column.name}${key}`);
    }
    lines.push('  }');
  }
  for (const relationship of report.relationships) {
    // Many rows to at most one: a reference may be null.
    lines.push(
      `  ${relationship.table} }o--o| ${relationship.references} : "${relationship.column}"`,
    );
  }
  return lines.join('\n');
}
