/**
 * readResourceStatuses with a recording SqlRows: how many statements a warehouse of many tables
 * costs (the daemon reads the statuses after every run; on PostgreSQL each is a round trip). What
 * the statements return is tested on both dialects in warehouse.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { readResourceStatuses, type SqlRows, type TableFacts } from '../src/warehouse/reader.js';

function recordingWarehouse(tables: string[]) {
  const statements: string[] = [];
  const rows: SqlRows = {
    all: async (sql) => {
      statements.push(sql);
      if (sql.startsWith('SELECT DISTINCT table_name FROM _ocs_columns')) {
        return tables.map((table_name) => ({ table_name }));
      }
      if (sql.includes("column_name = 'updated_at'")) {
        return tables.map((table_name) => ({ table_name, column_type: 'datetime' }));
      }
      if (sql.includes(' UNION ALL ') || sql.includes(' AS live,')) {
        // One row a table the statement names, counted 2 live, 1 deleted.
        return [...sql.matchAll(/SELECT '([a-z0-9_]+)' AS resource/g)].map((match) => ({
          resource: match[1],
          live: 2,
          deleted: 1,
          newest: `2026-11-29T00:00:00Z ${match[1]}`,
        }));
      }
      return [];
    },
  };
  const facts: TableFacts = {
    existingTables: async () => new Set(tables),
    newestUpdatedAtSql: () => 'max("updated_at")',
    updatedAtText: (value) => (typeof value === 'string' ? value : null),
  };
  return { rows, facts, statements };
}

describe('readResourceStatuses', () => {
  it('counts 250 tables in three statements, not three a table', async () => {
    const tables = Array.from({ length: 250 }, (_, index) => `t${String(index).padStart(3, '0')}`);
    const { rows, facts, statements } = recordingWarehouse(tables);

    const statuses = await readResourceStatuses(rows, facts);

    expect(statuses).toHaveLength(250);
    expect(statuses[249]).toMatchObject({
      resource: 't249',
      rows: 2,
      rowsDeleted: 1,
      newestUpdatedAt: '2026-11-29T00:00:00Z t249',
    });
    const counting = statements.filter((sql) => sql.includes(' AS live,'));
    expect(counting).toHaveLength(3);
    // Every statement apart from those reads the bookkeeping, whatever the number of tables.
    expect(statements.length - counting.length).toBeLessThanOrEqual(5);
  });
});
