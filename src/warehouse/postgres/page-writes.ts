/**
 * The PostgreSQL page-write hot path. A page of many rows goes by COPY into a staging table and
 * one merge (copy-upsert.ts); a page of a few, by ONE named statement,
 * `INSERT ... SELECT * FROM unnest($1::bigint[], $2::text[], ...) ON CONFLICT ("id") DO UPDATE`,
 * with a fixed parameter count (no 65 535-parameter ceiling for wide tables) and one prepared
 * statement for every page size. History versions are written with the page's column arrays.
 */
import type pg from 'pg';
import type { ColumnSpec, PageWrite, Row } from '../../interfaces.js';
import { WarehouseError } from '../../errors.js';
import { assertHistoryTable, historyTableName, quoteIdentifier as q } from '../identifiers.js';
import { advisoryLockKey, named, type PostgresConnection } from './connection.js';
import { POSTGRES_TYPE, POSTGRES_TYPES, type EncodedPage } from './values.js';
import { assertColumnsStored, pageShapeKey } from '../schema-changes.js';
import {
  OWN_COLUMN_NAMES,
  OWN_COLUMN_UPDATES,
  SERVED_UNDER_COLUMN,
  VERSION_KIND_COLUMN,
  addColumnSql,
  createHistoryTableSql,
} from '../table-definitions.js';
import { rowContentHasher } from '../canonical.js';
import { appendedSql, openVersions, type HistoryStatements } from './history.js';
import { COPY_MIN_ROWS, copyStatements, copyUpsert, type CopyStatements } from './copy-upsert.js';

export interface PageStatements {
  columns: ColumnSpec[];
  /** History content hash of a row served under a choice's key, built once per column list. */
  hash: (row: Row, servedUnder: string | null) => string;
  upsert: { name: string; text: string };
  copy: CopyStatements;
  history?: HistoryStatements;
}

export class PostgresPageWriter {
  private readonly statements = new Map<string, PageStatements>();

  constructor(private readonly connection: PostgresConnection) {}

  /** Statements built against an old table shape must not be reused. */
  forget(): void {
    this.statements.clear();
  }

  /**
   * Upserts an encoded page and its history versions on `client`, inside the caller's
   * transaction; with `audit`, chains each version.
   */
  async write(
    client: pg.ClientBase,
    statements: PageStatements,
    page: PageWrite,
    encoded: EncodedPage,
    syncedAt: string,
    audit: boolean,
  ): Promise<number> {
    const upsertColumns = encoded.lastIndexOfEachId
      ? encoded.columns.map((values) => encoded.lastIndexOfEachId!.map((index) => values[index]))
      : encoded.columns;
    const upsertIds = encoded.lastIndexOfEachId
      ? encoded.lastIndexOfEachId.map((index) => encoded.ids[index]!)
      : encoded.ids;
    const own = [syncedAt, page.runId, page.selection ?? null];
    if (upsertIds.length >= COPY_MIN_ROWS) {
      await copyUpsert(client, statements.copy, upsertIds, upsertColumns, own);
    } else {
      await client.query({ ...statements.upsert, values: [upsertIds, ...upsertColumns, ...own] });
    }
    if (!statements.history) return 0;
    const selection = page.selection ?? null;
    const hashes = page.rows.map((row) => statements.hash(row, selection));
    return openVersions(client, statements.history, page, encoded, hashes, syncedAt, audit);
  }

  /** The page statements for a table and column list, built and checked once. */
  async statementsFor(
    table: string,
    columns: ColumnSpec[],
    withHistory: boolean,
  ): Promise<PageStatements> {
    const cacheKey = pageShapeKey(table, columns, withHistory);
    const cached = this.statements.get(cacheKey);
    if (cached) return cached;

    const { connection } = this;
    await connection.withClient(async (client) => {
      if (!(await connection.tableExistsOn(client, table))) {
        throw new WarehouseError(
          `Cannot write to ${table}: the table does not exist in the warehouse yet.`,
        );
      }
      assertColumnsStored(table, columns, await connection.storedColumns(client, table));
    });

    const names = columns.map((column) => q(column.name));
    const arrays = [
      '$1::bigint[]',
      ...columns.map((column, index) => `$${index + 2}::${POSTGRES_TYPE[column.type]}[]`),
    ];
    const next = columns.length + 2;
    const ownValues = (at: number) =>
      `$${at}::timestamptz, $${at + 1}::bigint, NULL::timestamptz, NULL::timestamptz, $${at + 2}::text`;
    const upsert = named(
      `INSERT INTO ${connection.table(table)} (${['"id"', ...names, ...OWN_COLUMN_NAMES].join(', ')}) ` +
        `SELECT u.*, ${ownValues(next)} FROM unnest(${arrays.join(', ')}) AS u ` +
        `ON CONFLICT ("id") DO UPDATE SET ${[
          ...names.map((name) => `${name} = excluded.${name}`),
          ...OWN_COLUMN_UPDATES,
        ].join(', ')}`,
    );
    const statements: PageStatements = {
      columns: [...columns],
      hash: rowContentHasher(columns),
      upsert,
      copy: copyStatements(table, connection.table(table), columns, ownValues(1)),
    };
    if (withHistory) {
      const history = await this.ensureHistoryTable(table, columns);
      const historyTable = connection.table(history);
      const insertVersions =
        `INSERT INTO ${historyTable} (${['"id"', ...names, '"_valid_to"', '"_content_hash"', `"${VERSION_KIND_COLUMN}"`, '"_valid_from"', '"_run_id"', `"${SERVED_UNDER_COLUMN}"`].join(', ')}) ` +
        `SELECT u.*, $${next + 3}::timestamptz, $${next + 4}::bigint, $${next + 5}::text FROM unnest(${[
          ...arrays,
          `$${next}::timestamptz[]`,
          `$${next + 1}::text[]`,
          `$${next + 2}::text[]`,
        ].join(', ')}) AS u`;
      statements.history = {
        openHashes: named(
          `SELECT "id"::text AS id, "_content_hash" AS hash, "${VERSION_KIND_COLUMN}" AS kind ` +
            `FROM ${historyTable} WHERE "_valid_to" IS NULL AND "id" = ANY($1::bigint[])`,
        ),
        close: named(
          `UPDATE ${historyTable} SET "_valid_to" = $1::timestamptz ` +
            `WHERE "_valid_to" IS NULL AND "id" = ANY($2::bigint[])`,
        ),
        insert: named(insertVersions),
        // Parameters past the versions' (next + 5): the chain's, in openVersions' order.
        insertAudited: named(
          `WITH versions AS (${insertVersions}), ${appendedSql({
            headSeq: `$${next + 6}::bigint`,
            headHash: `$${next + 7}::text`,
            runId: `$${next + 4}::bigint`,
            table: `$${next + 8}::text`,
            at: `$${next + 9}::text`,
            rowIds: '$1::bigint[]',
            operations: `$${next + 10}::text[]`,
            digests: `$${next + 1}::text[]`,
            hashes: `$${next + 11}::text[]`,
            nextSeq: `$${next + 12}::bigint`,
            nextHash: `$${next + 13}::text`,
          })} SELECT 1`,
        ),
      };
    }
    this.statements.set(cacheKey, statements);
    return statements;
  }

  /** Creates `<table>__history` on first use and adds any data column it lacks. */
  private async ensureHistoryTable(table: string, columns: ColumnSpec[]): Promise<string> {
    const { connection } = this;
    const history = historyTableName(table);
    await connection.transaction(async (client) => {
      // Serialises two writers creating the same history table (the writer lock normally does).
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [
        advisoryLockKey(`history:${table}`, connection.schema),
      ]);
      if (!(await connection.tableExistsOn(client, history))) {
        const qualify = (name: string) => connection.table(name);
        for (const statement of createHistoryTableSql(POSTGRES_TYPES, history, qualify, columns)) {
          await client.query(statement);
        }
        return;
      }
      const present = await connection.physicalColumns(client, history);
      assertHistoryTable(table, history, present);
      for (const column of columns) {
        if (!present.has(column.name)) {
          await client.query(
            addColumnSql(POSTGRES_TYPES, connection.table(history), column.name, column.type),
          );
        }
      }
    });
    return history;
  }
}
