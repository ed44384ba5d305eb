/**
 * Which rows a complete walk under a chatbot choice did not see, and of those which are proven
 * gone from the server (interfaces.ts DeletionProof) and which only leave the choice: the WHERE
 * clauses of markMissingUnderChoice, written once for both dialects. Each is one statement on
 * the warehouse's side whatever the table's size; the proofs are subqueries on the tables the
 * same run wrote.
 */
import type { ColumnSpec, DeletionProof } from '../interfaces.js';
import { assertSafeColumnName, assertSafeTableName, quoteIdentifier as q } from './identifiers.js';
import { OUT_OF_SCOPE_COLUMN, SERVED_UNDER_COLUMN } from './table-definitions.js';

/** What differs between the dialects in these clauses. */
export interface ChoiceSqlDialect {
  /** A table's name as SQL: quoted, and qualified by the schema where there is one. */
  table(name: string): string;
  /** The placeholder of the parameter at 1-based `position` (SQLite `?`, PostgreSQL `$n`). */
  placeholder(position: number, type: 'bigint' | 'text'): string;
  /**
   * The integer ids in the JSON list `column` of the rows of `alias`, as a FROM item joined to
   * them and the id's expression; anything but a list of integers gives none.
   */
  listIds(alias: string, column: string): { join: string; id: string };
}

/** A WHERE clause on a resource table, with its parameters in placeholder order. */
export interface RowsWhere {
  sql: string;
  parameters: Array<string | number>;
}

export interface MissingUnderChoiceSql {
  /**
   * Missing rows last served under the choice that a proof shows gone, one clause per proof:
   * each a plain semi-join (or anti-join) a planner runs well, where an OR of subqueries may be
   * run row by row. A row one clause deletes is no longer missing for the next.
   */
  gone: RowsWhere[];
  /** Missing rows not yet marked out of scope (once `gone` is applied: the rest). */
  exits: RowsWhere;
}

/** Data columns of a table (undefined: no such table). */
export type ColumnsOf = (table: string) => readonly ColumnSpec[] | undefined;

/**
 * @param table the resource table; `columnsOf` gives each table's stored columns, and a proof
 *   whose tables or columns are not stored (or not of the type it needs) is left out.
 */
export function missingUnderChoiceSql(
  dialect: ChoiceSqlDialect,
  table: string,
  options: { runId: number; selection: string; proofs?: readonly DeletionProof[] },
  columnsOf: ColumnsOf,
): MissingUnderChoiceSql {
  const { runId, selection } = options;
  // Placeholders are handed out in the order of the text: SQLite's `?` are positional.
  const clause = () => {
    const parameters: Array<string | number> = [];
    const parameter = (value: string | number, type: 'bigint' | 'text') => {
      parameters.push(value);
      return dialect.placeholder(parameters.length, type);
    };
    // Seen: written by this run under this choice. Null-safe: rows from before choices were
    // recorded, or no run claimed, count as missing.
    const missing =
      `NOT (coalesce("_run_id", -1) = ${parameter(runId, 'bigint')} AND ` +
      `coalesce("${SERVED_UNDER_COLUMN}", '') = ${parameter(selection, 'text')}) ` +
      `AND "_deleted_at" IS NULL`;
    const served = (alias: string) =>
      `${alias}."_run_id" = ${parameter(runId, 'bigint')} AND ` +
      `${alias}."${SERVED_UNDER_COLUMN}" = ${parameter(selection, 'text')}`;
    return { parameters, parameter, missing, served };
  };

  const gone = (options.proofs ?? [])
    .filter((proof) => applies(proof, table, columnsOf))
    .map((proof) => {
      const where = clause();
      const servedHere = `"${SERVED_UNDER_COLUMN}" = ${where.parameter(selection, 'text')}`;
      const proven = proofSql(proof, table, dialect, where);
      return {
        sql: `WHERE ${where.missing} AND ${servedHere} AND ${proven}`,
        parameters: where.parameters,
      };
    });
  const exits = clause();
  return {
    gone,
    exits: {
      sql: `WHERE ${exits.missing} AND "${OUT_OF_SCOPE_COLUMN}" IS NULL`,
      parameters: exits.parameters,
    },
  };
}

function proofSql(
  proof: DeletionProof,
  table: string,
  dialect: ChoiceSqlDialect,
  where: { served(alias: string): string },
): string {
  const servedIn = (name: string) => `${dialect.table(name)} s WHERE ${where.served('s')}`;
  switch (proof.kind) {
    case 'owned':
    case 'every_row':
      return '1 = 1';
    case 'named_by': {
      if (!proof.list) return `"id" IN (SELECT s.${q(proof.column)} FROM ${servedIn(proof.table)})`;
      const list = dialect.listIds('s', proof.column);
      return (
        `"id" IN (SELECT ${list.id} FROM ${dialect.table(proof.table)} s ${list.join} ` +
        `WHERE ${where.served('s')})`
      );
    }
    case 'names':
      return `${q(proof.column)} IN (SELECT s."id" FROM ${servedIn(proof.table)})`;
    case 'parent_gone':
      // Correlated by the table's own name: the statements these clauses go in never alias it.
      return (
        `${q(proof.column)} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${dialect.table(proof.table)} s ` +
        `WHERE s."id" = ${q(table)}.${q(proof.column)} AND s."_deleted_at" IS NULL)`
      );
  }
}

/** Whether the tables and columns a proof reads are stored, with the types it needs. */
function applies(proof: DeletionProof, table: string, columnsOf: ColumnsOf): boolean {
  const typeOf = (of: string, column: string) => {
    assertSafeTableName(of);
    assertSafeColumnName(column, of);
    return columnsOf(of)?.find((spec) => spec.name === column)?.type;
  };
  const stored = (of: string) => {
    assertSafeTableName(of);
    return columnsOf(of) !== undefined;
  };
  switch (proof.kind) {
    case 'owned':
    case 'every_row':
      return true;
    case 'named_by':
      return typeOf(proof.table, proof.column) === (proof.list ? 'json' : 'integer');
    case 'names':
    case 'parent_gone':
      return typeOf(table, proof.column) === 'integer' && stored(proof.table);
  }
}

/** The other tables a proof reads. */
export function proofTables(proof: DeletionProof): string[] {
  return 'table' in proof ? [proof.table] : [];
}
