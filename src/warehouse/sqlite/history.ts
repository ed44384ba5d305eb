/**
 * Where every SQLite history version is written: versions opened by a page (created, changed,
 * back in the chatbot choice), versions closed by a full refresh (deleted, removed) and scope
 * exits (the choice no longer serves the row). With audit on, each one is chained here
 * (audit.ts), in the caller's transaction, so no caller can write a version the chain does
 * not hold. Runs on the writer thread (pages) and on the warehouse's connection (the others).
 */
import type Database from 'better-sqlite3';
import type { AuditOperation } from '../../interfaces.js';
import { openingOperation, planHistoryVersions } from '../history.js';
import { quoteIdentifier as q } from '../identifiers.js';
import { SqliteChainWriter } from './audit.js';
import type { SqliteValue } from './values.js';
import { SERVED_UNDER_COLUMN, VERSION_KIND_COLUMN } from '../table-definitions.js';
import { toJsonText } from '../values.js';

export interface HistoryStatements {
  openHashes: Database.Statement;
  close: Database.Statement;
  /** Inserts one version; the versions a batch leaves over. */
  insert: Database.Statement;
  /** Inserts `versionsPerBatch` versions at once, in order. */
  insertBatch: Database.Statement;
  versionsPerBatch: number;
}

/** What opening versions needs of a page (page-writes.ts's EncodedPage). */
export interface VersionedPage {
  runId: number;
  resource: string;
  /** Each row's id, then its values in column order. */
  rows: SqliteValue[][];
  /** Each row's content hash. */
  hashes: string[];
  /** The chatbot choice's key the page was served under (null: a server without choices). */
  selection?: string | null;
  syncedAt: string;
  /** Chain each version written. */
  audit?: boolean;
}

/** Rows closed per statement when each closed version is chained. */
const CLOSE_BATCH = 5000;

export class SqliteHistoryWriter {
  private readonly chain: SqliteChainWriter;

  constructor(private readonly db: Database.Database) {
    this.chain = new SqliteChainWriter(db);
  }

  /** A version for each row whose content differs from its open one; returns how many. */
  open(statements: HistoryStatements, page: VersionedPage): number {
    const { hashes } = page;
    const keys = page.rows.map((values) => String(values[0]));
    // One query for every open version of the page's ids.
    const open = statements.openHashes.all(
      toJsonText(page.rows.map((values) => values[0])),
    ) as Array<{ id: bigint; hash: string; kind: string }>;
    const openHashes = new Map(open.map((row) => [String(row.id), row.hash]));
    const exits = new Set(
      open.filter((row) => row.kind === 'scope_exit').map((row) => String(row.id)),
    );
    const plan = planHistoryVersions(keys, hashes, openHashes, exits);
    // Versions are inserted several at a time (as rows are upserted, page-writes.ts). A close
    // runs at once; when it must close a version still waiting in the batch (an id repeated
    // within the page), the batch is inserted first, so the order is as row by row.
    const { versionsPerBatch } = statements;
    let batch: SqliteValue[] = [];
    const batched = new Set<string>();
    const insertBatched = () => {
      const perVersion = batch.length / batched.size;
      let start = 0;
      if (batched.size === versionsPerBatch) {
        statements.insertBatch.run(batch);
        start = batch.length;
      }
      for (; start < batch.length; start += perVersion) {
        statements.insert.run(batch.slice(start, start + perVersion));
      }
      batch = [];
      batched.clear();
    };
    for (const version of plan) {
      const values = page.rows[version.index]!;
      const key = keys[version.index]!;
      if (version.closeOpen) {
        if (batched.has(key)) insertBatched();
        statements.close.run(page.syncedAt, values[0]);
      }
      batch.push(
        ...values,
        page.syncedAt,
        hashes[version.index]!,
        page.runId,
        version.kind,
        page.selection ?? null,
      );
      batched.add(key);
      if (batched.size === versionsPerBatch) insertBatched();
    }
    if (batched.size > 0) insertBatched();
    if (page.audit) {
      this.chain.append({
        runId: page.runId,
        table: page.resource,
        at: page.syncedAt,
        rowIds: plan.map((version) => keys[version.index]!),
        operations: plan.map(openingOperation),
        digests: plan.map((version) => hashes[version.index]!),
      });
    }
    return plan.length;
  }

  /**
   * Closes at `at` the open versions of the rows of `table` that `rowsWhere` selects (a WHERE on
   * the resource table, with its parameters), as `operation`. Call before the rows change.
   */
  close(
    table: string,
    historyTable: string,
    rowsWhere: { sql: string; parameters: readonly SqliteValue[] },
    change: { at: string; operation: AuditOperation; runId: number; audit: boolean },
  ): void {
    const selected = `SELECT "id" FROM ${q(table)} ${rowsWhere.sql}`;
    if (!change.audit) {
      this.db
        .prepare(
          `UPDATE ${q(historyTable)} SET "_valid_to" = ? WHERE "_valid_to" IS NULL AND "id" IN (${selected})`,
        )
        .run(change.at, ...rowsWhere.parameters);
      return;
    }
    const next = this.db
      .prepare(
        `SELECT "_version_id" AS version, "id" AS id, "_content_hash" AS hash FROM ${q(historyTable)}
         WHERE "_valid_to" IS NULL AND "id" IN (${selected}) AND "id" > ? ORDER BY "id" LIMIT ${CLOSE_BATCH}`,
      )
      .safeIntegers(true);
    const closeVersions = this.db.prepare(
      `UPDATE ${q(historyTable)} SET "_valid_to" = ? WHERE "_version_id" IN (SELECT value FROM json_each(?))`,
    );
    let after: bigint = -(2n ** 63n);
    for (;;) {
      const batch = next.all(...rowsWhere.parameters, after) as Array<{
        version: bigint;
        id: bigint;
        hash: string;
      }>;
      if (batch.length === 0) return;
      closeVersions.run(change.at, toJsonText(batch.map((row) => row.version)));
      this.chain.append({
        runId: change.runId,
        table,
        at: change.at,
        rowIds: batch.map((row) => row.id.toString()),
        operations: batch.map(() => change.operation),
        digests: batch.map((row) => row.hash),
      });
      after = batch[batch.length - 1]!.id;
    }
  }

  /**
   * A scope exit for each row of `table` that `rowsWhere` selects: a version of its own (the
   * content as last served, kind `scope_exit`) opened at `at`, closing the row's open one. Call
   * before the rows are marked out of scope. `columns`: the data columns both tables hold.
   */
  exitScope(
    table: string,
    historyTable: string,
    columns: readonly string[],
    rowsWhere: { sql: string; parameters: readonly SqliteValue[] },
    change: { at: string; runId: number; audit: boolean },
  ): void {
    const names = ['"id"', ...columns.map(q), q(SERVED_UNDER_COLUMN)];
    const before = this.db
      .prepare(`SELECT coalesce(max("_version_id"), 0) FROM ${q(historyTable)}`)
      .pluck()
      .safeIntegers(true)
      .get() as bigint;
    this.db
      .prepare(
        `INSERT INTO ${q(historyTable)} (${[...names, '"_valid_from"', '"_content_hash"', '"_run_id"', q(VERSION_KIND_COLUMN)].join(', ')})
         SELECT ${names.map((name) => `t.${name}`).join(', ')}, ?,
           coalesce((SELECT o."_content_hash" FROM ${q(historyTable)} o
                     WHERE o."id" = t."id" AND o."_valid_to" IS NULL), ''),
           ?, 'scope_exit'
         FROM ${q(table)} t ${rowsWhere.sql}`,
      )
      .run(change.at, change.runId, ...rowsWhere.parameters);
    this.db
      .prepare(
        `UPDATE ${q(historyTable)} SET "_valid_to" = ?
         WHERE "_valid_to" IS NULL AND "_version_id" <= ?
           AND "id" IN (SELECT "id" FROM ${q(table)} ${rowsWhere.sql})`,
      )
      .run(change.at, before, ...rowsWhere.parameters);
    if (!change.audit) return;
    // The versions just written are the ones past `before`: chained a batch at a time.
    const next = this.db
      .prepare(
        `SELECT "_version_id" AS version, "id" AS id, "_content_hash" AS hash FROM ${q(historyTable)}
         WHERE "_version_id" > ? ORDER BY "_version_id" LIMIT ${CLOSE_BATCH}`,
      )
      .safeIntegers(true);
    let after = before;
    for (;;) {
      const batch = next.all(after) as Array<{ version: bigint; id: bigint; hash: string }>;
      if (batch.length === 0) return;
      this.chain.append({
        runId: change.runId,
        table,
        at: change.at,
        rowIds: batch.map((row) => row.id.toString()),
        operations: batch.map(() => 'scope_exit'),
        digests: batch.map((row) => row.hash),
      });
      after = batch[batch.length - 1]!.version;
    }
  }
}
