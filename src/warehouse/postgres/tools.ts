/**
 * The operator's tools on a PostgreSQL warehouse (WarehouseTools): a column read and rewritten by
 * id (`unseal`), a table dropped (`reset --drop-table`); rewrites are refused while the audit
 * chain is on.
 */
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
import type { PostgresConnection } from './connection.js';
import {
  POSTGRES_TYPE,
  decodeValue,
  encodeValue,
  readExpression,
  type AlteredCounter,
} from './values.js';

/** What the tools use of the warehouse they belong to. */
export interface PostgresToolParts {
  readonly audit: KyselyAuditStore;
  /** The tables' shapes changed: statements prepared for them are dropped. */
  forget(): void;
}

export class PostgresTools implements WarehouseTools {
  constructor(
    private readonly connection: PostgresConnection,
    private readonly parts: PostgresToolParts,
  ) {}

  readColumn(
    table: string,
    column: string,
    afterId: string | null,
    limit: number,
  ): Promise<Array<{ id: string; value: unknown }>> {
    return this.connection.guard(`Reading ${table}.${column}`, async () => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      if (!Number.isSafeInteger(limit) || limit < 1) {
        throw new WarehouseError(`readColumn limit must be a positive integer, not ${limit}.`);
      }
      return this.connection.withClient(async (client) => {
        const type = await this.connection.columnType(client, table, column);
        const select = `SELECT "id"::text AS id_text, ${readExpression(column, type)} AS value FROM ${this.connection.table(table)}`;
        const result =
          afterId === null
            ? await client.query<{ id_text: string; value: unknown }>(
                `${select} ORDER BY "id" LIMIT $1`,
                [limit],
              )
            : await client.query<{ id_text: string; value: unknown }>(
                `${select} WHERE "id" > $1::bigint ORDER BY "id" LIMIT $2`,
                [parseIdText(afterId, table).toString(), limit],
              );
        // Aliased apart from "id" so ORDER BY sorts by the bigint column, not its text.
        return result.rows.map((row) => ({ id: row.id_text, value: decodeValue(type, row.value) }));
      });
    });
  }

  updateColumn(
    table: string,
    column: string,
    values: Array<{ id: string; value: unknown }>,
  ): Promise<void> {
    return this.connection.guard(`Updating ${table}.${column}`, async () => {
      assertSafeTableName(table);
      assertSafeColumnName(column, table);
      this.parts.audit.refuseRewrite(`Rewriting ${table}.${column}`);
      if (values.length === 0) return;
      await this.connection.transaction(async (client) => {
        const type = await this.connection.columnType(client, table, column);
        const altered: AlteredCounter = { count: 0 };
        // The last value given for an id wins, as one-at-a-time updates would.
        const byId = new Map<string, unknown>();
        for (const { id, value } of values) {
          assertValueFits(value, type, table, column, id);
          byId.set(parseIdText(id, table).toString(), encodeValue(type, value, altered));
        }
        await client.query(
          `UPDATE ${this.connection.table(table)} AS t SET ${q(column)} = u.value
           FROM unnest($1::bigint[], $2::${POSTGRES_TYPE[type]}[]) AS u(id, value) WHERE t."id" = u.id`,
          [[...byId.keys()], [...byId.values()]],
        );
      });
    });
  }

  dropTable(table: string): Promise<void> {
    return this.connection.guard(`Dropping ${table}`, async () => {
      assertSafeTableName(table);
      this.parts.audit.refuseRewrite(`Dropping the table ${table}`);
      try {
        await this.connection.transaction(async (client) => {
          await client.query(`DROP VIEW IF EXISTS ${this.connection.table(liveViewName(table))}`);
          await client.query(`DROP TABLE IF EXISTS ${this.connection.table(table)}`);
          await client.query(
            `DROP TABLE IF EXISTS ${this.connection.table(historyTableName(table))}`,
          );
          for (const query of this.connection.bookkeeping.forgetTableQueries(table, nowIso())) {
            await this.connection.run(client, query);
          }
        });
      } finally {
        this.parts.forget();
      }
    });
  }
}
