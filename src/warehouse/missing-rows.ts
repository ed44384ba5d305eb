/**
 * Marking the rows a complete walk did not see, written once for both dialects: after a full
 * refresh, rows no longer served are marked deleted (or removed); under a chatbot choice, those a
 * proof shows gone are, and the rest are marked out of scope. History versions are closed (and
 * chained) before the rows change. Each dialect gives one small object of what differs: its SQL
 * (placeholders, null-safe comparison, qualified names) and its driver (one write transaction).
 */
import type { AuditOperation, ColumnSpec, DeleteMode, MissingUnderChoice } from '../interfaces.js';
import { nowIso } from './bookkeeping.js';
import { assertSafeTableName, historyTableName } from './identifiers.js';
import { OUT_OF_SCOPE_COLUMN } from './table-definitions.js';
import {
  missingUnderChoiceSql,
  proofTables,
  type ChoiceSqlDialect,
  type RowsWhere,
} from './missing-under-choice.js';

/** A history version closed or opened by the marking. */
export interface VersionChange {
  at: string;
  runId: number;
  audit: boolean;
}

/** One write transaction on the warehouse, as the marking uses it. */
export interface MissingRowsTransaction {
  tableExists(table: string): Promise<boolean>;
  /** The data columns recorded for a table, in order. */
  storedColumns(table: string): Promise<ColumnSpec[]>;
  physicalColumns(table: string): Promise<Set<string>>;
  /** Runs a statement; the number of rows it changed. */
  run(statement: RowsWhere): Promise<number>;
  /** Closes the open versions of the rows `where` selects, as `operation` (chained with audit). */
  closeVersions(
    table: string,
    where: RowsWhere,
    change: VersionChange & { operation: AuditOperation },
  ): Promise<void>;
  /** A `scope_exit` version for each row `where` selects; `columns`: those both tables hold. */
  exitScope(
    table: string,
    columns: readonly string[],
    where: RowsWhere,
    change: VersionChange,
  ): Promise<void>;
}

/** What differs between the dialects in the marking. */
export interface MissingRowsDialect {
  /** The clauses of rows missing under a choice (missing-under-choice.ts). */
  readonly choice: ChoiceSqlDialect;
  /** Rows not written by `runId` (null-safe: rows no run claimed too), not yet marked deleted. */
  notWrittenBy(runId: number): RowsWhere;
  /** `UPDATE table SET column = at WHERE ...`: the time's placeholder placed among `where`'s. */
  setTime(table: string, column: string, at: string, where: RowsWhere): RowsWhere;
  /** Runs `work` in one write transaction. */
  transaction<T>(work: (transaction: MissingRowsTransaction) => Promise<T>): Promise<T>;
}

/** After a complete full refresh: rows of `table` not written by `runId` are marked or removed. */
export function markMissingAsDeleted(
  dialect: MissingRowsDialect,
  table: string,
  options: { runId: number; mode: DeleteMode; history: boolean; audit: boolean },
): Promise<number> {
  assertSafeTableName(table);
  const { runId, mode, history, audit } = options;
  const now = nowIso();
  return dialect.transaction(async (transaction) => {
    if (!(await transaction.tableExists(table))) return 0;
    const missing = dialect.notWrittenBy(runId);
    if ((history || audit) && (await transaction.tableExists(historyTableName(table)))) {
      await transaction.closeVersions(table, missing, {
        at: now,
        operation: mode === 'remove' ? 'remove' : 'delete',
        runId,
        audit,
      });
    }
    return transaction.run(removeOrMark(dialect, table, mode, now, missing));
  });
}

/**
 * After a complete walk from the start under a chatbot choice: rows of `table` not written by
 * `runId` under the choice are marked out of scope, or deleted when a proof shows them gone.
 */
export function markMissingUnderChoice(
  dialect: MissingRowsDialect,
  table: string,
  runId: number,
  options: MissingUnderChoice & { audit: boolean },
): Promise<{ deleted: number; outOfScope: number }> {
  assertSafeTableName(table);
  const { selection, proofs, mode, history, audit } = options;
  const now = nowIso();
  return dialect.transaction(async (transaction) => {
    if (!(await transaction.tableExists(table))) return { deleted: 0, outOfScope: 0 };
    // The stored columns of every table the clauses may read, looked up before building them.
    const columns = new Map<string, ColumnSpec[] | undefined>();
    for (const name of new Set([table, ...(proofs ?? []).flatMap(proofTables)])) {
      assertSafeTableName(name);
      columns.set(
        name,
        (await transaction.tableExists(name)) ? await transaction.storedColumns(name) : undefined,
      );
    }
    const { gone, exits } = missingUnderChoiceSql(
      dialect.choice,
      table,
      { runId, selection, ...(proofs ? { proofs } : {}) },
      (name) => columns.get(name),
    );
    const historyTable = historyTableName(table);
    const keepHistory = (history || audit) && (await transaction.tableExists(historyTable));
    let deleted = 0;
    for (const proven of gone) {
      if (keepHistory) {
        await transaction.closeVersions(table, proven, {
          at: now,
          operation: mode === 'remove' ? 'remove' : 'delete',
          runId,
          audit,
        });
      }
      deleted += await transaction.run(removeOrMark(dialect, table, mode, now, proven));
    }
    if (keepHistory) {
      const present = await transaction.physicalColumns(historyTable);
      const names = (columns.get(table) ?? [])
        .map((column) => column.name)
        .filter((name) => present.has(name));
      await transaction.exitScope(table, names, exits, { at: now, runId, audit });
    }
    const outOfScope = await transaction.run(
      dialect.setTime(table, OUT_OF_SCOPE_COLUMN, now, exits),
    );
    return { deleted, outOfScope };
  });
}

function removeOrMark(
  dialect: MissingRowsDialect,
  table: string,
  mode: DeleteMode,
  now: string,
  where: RowsWhere,
): RowsWhere {
  return mode === 'remove'
    ? {
        sql: `DELETE FROM ${dialect.choice.table(table)} ${where.sql}`,
        parameters: where.parameters,
      }
    : dialect.setTime(table, '_deleted_at', now, where);
}
