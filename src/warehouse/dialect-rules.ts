/**
 * What differs between the dialects in the code they share, as one small object per dialect
 * (sqlite/rules.ts, postgres/rules.ts): the shared part asks it instead of testing the dialect's
 * name, which only the dialect folders do (eslint.config.js holds the code to that). The dialects'
 * other differences are objects of the same kind, each beside the routine it serves:
 * missing-rows.ts, missing-under-choice.ts, audit-snapshot.ts.
 */
import type { AuditEntry, ChainHead } from '../interfaces.js';

/** Runs SQL with `?` placeholders in the caller's transaction. */
export type SqlRun = (
  sql: string,
  parameters: readonly unknown[],
) => Promise<Array<Record<string, unknown>>>;

/** What a column gives back for a server's value, where it may differ (original-values.ts). */
export interface StoredValueRules {
  /** What a text column gives back for this text. */
  text(value: string): string;
  /** Whether it differs from the text (checked without copying). */
  textChanges(value: string): boolean;
  /** What a json column gives back for this JSON value; undefined: the value, as sent. */
  readonly json: ((value: unknown) => unknown) | undefined;
  /** Whether it differs from the value (checked without copying). */
  jsonChanges(value: unknown): boolean;
}

export interface DialectRules {
  readonly name: 'sqlite' | 'postgres';
  /** A statement written with `?` placeholders, as the driver takes it. */
  placeholders(sql: string): string;
  /**
   * Reads the audit chain's head for an append, locked for the rest of the transaction where a
   * row lock is how (PostgreSQL); SQLite's write transaction holds it already.
   */
  readonly headSelectSql: string;
  /**
   * Run first in a transaction that reads the head without appending (a checkpoint), so nothing
   * appends until it ends; undefined when headSelectSql locks it already.
   */
  readonly holdHeadSql: string | undefined;
  /** Inserts linked entries and moves the head to `head`, in the caller's transaction. */
  insertEntries(run: SqlRun, entries: readonly AuditEntry[], head: ChainHead): Promise<void>;
  /** A time column (ours, or a datetime) selected as text in the fixed form. */
  fixedTime(column: string): string;
  /** What columns give back for the server's values. */
  readonly values: StoredValueRules;
  /**
   * Whether a daemon keeps the warehouse open between its runs: a SQLite file's handle costs
   * nothing while it waits; a PostgreSQL pool would hold its connections (a fleet's teams, many
   * of them), and connecting is most of what opening one costs.
   */
  readonly keptBetweenRuns: boolean;
}
