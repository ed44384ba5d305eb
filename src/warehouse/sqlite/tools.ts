/**
 * The operator's tools on a SQLite warehouse (WarehouseTools): a column read and rewritten by id
 * (`unseal`), a table dropped (`reset --drop-table`); rewrites are refused while the audit chain
 * is on.
 */
import type Database from 'better-sqlite3';
import type { WarehouseTools } from '../../interfaces.js';
import { WarehouseError } from '../../errors.js';
import type { KyselyAuditStore } from '../audit-store.js';
import { nowIso } from '../bookkeeping.js';
import {
  assertSafeColumnName,
  assertSafeTableName,
  historyTableName,
  liveViewName,
  quoteIdentifier as q,
} from '../identifiers.js';
import { assertValueFits, parseIdText } from '../values.js';
import type { SqliteConnection } from './connection.js';
import { decodeValue, encodeValue } from './values.js';

/** What the tools and reads use of the warehouse they belong to. */
export interface SqliteParts {
  readonly connection: SqliteConnection;
  /** Runs work alone on the connection, after every page handed over has committed. */
  exclusive<T>(work: () => T | Promise<T>, what?: string): Promise<T>;
  readonly audit: KyselyAuditStore;
  /** The tables' shapes changed: statements prepared for them are dropped. */
  forget(): void;
}

export class SqliteTools implements WarehouseTools {
  constructor(private readonly parts: SqliteParts) {}

  private get connection(): SqliteConnection {
    return this.parts.connection;
  }

  private get db(): Database.Database {
    return this.parts.connection.db;
  }

  readColumn(
    table: string,
    column: string,
    afterId: string | null,
    limit: number,
  ): Promise<Array<{ id: string; value: unknown }>> {
    return this.parts.exclusive(() => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      if (!Number.isSafeInteger(limit) || limit < 1) {
        throw new WarehouseError(`readColumn limit must be a positive integer, not ${limit}.`);
      }
      const type = this.connection.columnType(table, column);
      const select = `SELECT "id" AS id, ${q(column)} AS value FROM ${q(table)}`;
      const rows = (
        afterId === null
          ? this.db.prepare(`${select} ORDER BY "id" LIMIT ?`).safeIntegers(true).all(limit)
          : this.db
              .prepare(`${select} WHERE "id" > ? ORDER BY "id" LIMIT ?`)
              .safeIntegers(true)
              .all(parseIdText(afterId, table), limit)
      ) as Array<{ id: bigint; value: unknown }>;
      return rows.map((row) => ({ id: row.id.toString(), value: decodeValue(type, row.value) }));
    }, `Reading ${table}.${column}`);
  }

  updateColumn(
    table: string,
    column: string,
    values: Array<{ id: string; value: unknown }>,
  ): Promise<void> {
    return this.parts.exclusive(() => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      this.parts.audit.refuseRewrite(`Rewriting ${table}.${column}`);
      const type = this.connection.columnType(table, column);
      const encoded = values.map(({ id, value }) => {
        assertValueFits(value, type, table, column, id);
        return [encodeValue(type, value), parseIdText(id, table)] as const;
      });
      const update = this.db.prepare(`UPDATE ${q(table)} SET ${q(column)} = ? WHERE "id" = ?`);
      this.connection.writeTransaction(() => {
        for (const [value, id] of encoded) update.run(value, id);
      });
    }, `Updating ${table}.${column}`);
  }

  dropTable(table: string): Promise<void> {
    return this.parts.exclusive(() => {
      assertSafeTableName(table);
      this.parts.audit.refuseRewrite(`Dropping the table ${table}`);
      this.connection.writeTransaction(() => {
        this.db.exec(`DROP VIEW IF EXISTS ${q(liveViewName(table))}`);
        this.db.exec(`DROP TABLE IF EXISTS ${q(table)}`);
        this.db.exec(`DROP TABLE IF EXISTS ${q(historyTableName(table))}`);
        for (const query of this.connection.bookkeeping.forgetTableQueries(table, nowIso())) {
          this.connection.run(query);
        }
      });
      this.parts.forget();
    }, `Dropping ${table}`);
  }
}
