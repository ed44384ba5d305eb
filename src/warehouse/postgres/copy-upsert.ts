/**
 * A page of many rows goes into its table by COPY: `COPY … FROM STDIN` (text format, through
 * pg-copy-streams) into a temporary staging table of the session, emptied at every commit, then
 * one `INSERT … SELECT … ON CONFLICT` merges it into the table, in the page's transaction. The
 * page's values travel as one stream of text PostgreSQL parses at its own speed, instead of an
 * array literal per column that the client builds and the server unpicks; pages of a few rows
 * keep the one-statement upsert (page-writes.ts), which a COPY's extra round trips would slow.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { ColumnSpec } from '../../interfaces.js';
import { quoteIdentifier as q } from '../identifiers.js';
import { OWN_COLUMN_NAMES, OWN_COLUMN_UPDATES } from '../table-definitions.js';
import { named } from './connection.js';
import { POSTGRES_TYPE } from './values.js';

/** Pages of at least this many distinct rows are written by COPY. */
export const COPY_MIN_ROWS = 64;

export interface CopyStatements {
  /** Creates the session's staging table for this table shape, if it has none yet. */
  createStage: string;
  copy: string;
  merge: { name: string; text: string };
}

/**
 * The statements of a table shape. `table`: the table, qualified; `ownValues`: the SQL values of
 * our own columns ($1 synced at, $2 run, $3 selection), as the one-statement upsert gives them.
 */
export function copyStatements(
  table: string,
  qualifiedTable: string,
  columns: readonly ColumnSpec[],
  ownValues: string,
): CopyStatements {
  const shape = createHash('sha256')
    .update(JSON.stringify([table, columns]))
    .digest('hex')
    .slice(0, 20);
  const stage = q(`_ocs_stage_${shape}`);
  const names = columns.map((column) => q(column.name));
  const definitions = [
    '"id" bigint',
    ...columns.map((column) => `${q(column.name)} ${POSTGRES_TYPE[column.type]}`),
  ];
  return {
    createStage: `CREATE TEMPORARY TABLE IF NOT EXISTS ${stage} (${definitions.join(', ')}) ON COMMIT DELETE ROWS`,
    copy: `COPY pg_temp.${stage} FROM STDIN`,
    merge: named(
      `INSERT INTO ${qualifiedTable} (${['"id"', ...names, ...OWN_COLUMN_NAMES].join(', ')}) ` +
        `SELECT s.*, ${ownValues} FROM pg_temp.${stage} AS s ` +
        `ON CONFLICT ("id") DO UPDATE SET ${[
          ...names.map((name) => `${name} = excluded.${name}`),
          ...OWN_COLUMN_UPDATES,
        ].join(', ')}`,
    ),
  };
}

/** Upserts the rows (ids, and one array per column in the shape's order) by COPY and merge. */
export async function copyUpsert(
  client: pg.ClientBase,
  statements: CopyStatements,
  ids: readonly string[],
  columns: readonly (readonly unknown[])[],
  ownValues: unknown[],
): Promise<void> {
  // Every page: a staging table created in a transaction that then failed is gone with it.
  await client.query(statements.createStage);
  await pipeline(Readable.from([copyText(ids, columns)]), client.query(copyFrom(statements.copy)));
  await client.query({ ...statements.merge, values: ownValues });
}

/** The rows in COPY's text format: a line each, fields separated by tabs. */
export function copyText(ids: readonly string[], columns: readonly (readonly unknown[])[]): string {
  const lines: string[] = new Array(ids.length);
  for (let row = 0; row < ids.length; row++) {
    let line = ids[row]!;
    for (let column = 0; column < columns.length; column++) {
      line += `\t${copyField(columns[column]![row])}`;
    }
    lines[row] = line;
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_SPECIALS = /[\\\t\n\r]/g;
const COPY_ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  '\t': '\\t',
  '\n': '\\n',
  '\r': '\\r',
};

/** A value as COPY's text format writes it: `\N` for null, backslash escapes in text. */
export function copyField(value: unknown): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'string') {
    return COPY_SPECIAL.test(value)
      ? value.replace(COPY_SPECIALS, (special) => COPY_ESCAPES[special]!)
      : value;
  }
  if (typeof value === 'boolean') return value ? 't' : 'f';
  return String(value);
}
