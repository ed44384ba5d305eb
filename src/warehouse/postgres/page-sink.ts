/**
 * Where a PostgreSQL warehouse's pages go, on whichever thread hands them over: each page is
 * encoded there and committed in a transaction of its own with its cursor and originals, after
 * the pages of its table handed over before it and never after one of its walk that failed
 * (../commit-order.ts). The warehouse writes its own pages through one on its pool; the sync's
 * page thread opens one with connections of its own (openPostgresPageSink).
 */
import type { PageSink, PageSinkSetup, PageWrite, PageWriteResult } from '../../interfaces.js';
import { nowSortableUtc } from '../../timestamps.js';
import { FailedWalks } from '../commit-order.js';
import { assertSafeTableName } from '../identifiers.js';
import { named, PostgresConnection } from './connection.js';
import { PostgresPageWriter } from './page-writes.js';
import { encodePage, type AlteredCounter } from './values.js';

export interface PostgresPageSinkSetup extends PageSinkSetup {
  readonly dialect: 'postgres';
  url: string;
  schema: string;
  poolSize: number;
  statementTimeoutSeconds?: number;
  connectTimeoutSeconds?: number;
  /** The warehouse keeps an audit chain: every page keeps history, each version chained. */
  audit: boolean;
}

export class PostgresPageSink implements PageSink {
  private readonly pages: PostgresPageWriter;
  private readonly failedWalks = new FailedWalks();
  /** Per table, the last page handed over, settled either way: the next commits after it. */
  private readonly lastPageOf = new Map<string, Promise<void>>();
  private readonly saveCursor: { name: string; text: string };
  private readonly saveOriginals: { name: string; text: string };

  constructor(
    private readonly connection: PostgresConnection,
    private readonly audit: () => boolean,
    /** Checked as each page starts to commit (the writer lock still held). */
    private readonly beforeCommit: () => void = () => undefined,
  ) {
    this.pages = new PostgresPageWriter(connection);
    this.saveCursor = named(
      `INSERT INTO ${connection.table('_ocs_resources')} (resource, cursor, cursor_kind, cursor_selection, last_run_id)
       VALUES ($1, $2, $3, $4, $5) ON CONFLICT (resource) DO UPDATE SET cursor = excluded.cursor,
       cursor_kind = excluded.cursor_kind, cursor_selection = excluded.cursor_selection,
       last_run_id = excluded.last_run_id`,
    );
    this.saveOriginals = named(
      `INSERT INTO ${connection.table('_ocs_original_values')}
         (resource, id, column_name, served_hash, original)
       SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[])
       ON CONFLICT DO NOTHING`,
    );
  }

  /**
   * Hands the page over without waiting for the pages ahead of it: it commits after them, and
   * not at all when one of them failed, so the caller can prepare the next page meanwhile.
   */
  writePage(page: PageWrite): Promise<PageWriteResult> {
    const table = page.resource;
    const ahead = this.lastPageOf.get(table) ?? Promise.resolve();
    const committed = ahead
      .then(() => {
        this.failedWalks.assertOpen(page.walk, table);
        return this.commitPage(page);
      })
      .catch((error: unknown) => {
        this.failedWalks.fail(page.walk);
        throw error;
      });
    const settled = committed.then(
      () => undefined,
      () => undefined,
    );
    this.lastPageOf.set(table, settled);
    // Forgotten once nothing comes after it: walks come and go, tables stay few.
    void settled.then(() => {
      if (this.lastPageOf.get(table) === settled) this.lastPageOf.delete(table);
    });
    return committed;
  }

  forget(): void {
    this.pages.forget();
  }

  /** Waits for every page handed over. */
  async close(): Promise<void> {
    await Promise.all(this.lastPageOf.values());
    this.pages.forget();
  }

  private commitPage(page: PageWrite): Promise<PageWriteResult> {
    const table = page.resource;
    return this.connection.guard(`Writing a page of ${table}`, async () => {
      this.beforeCommit();
      assertSafeTableName(table);
      const audit = this.audit();
      // With the chain on, every row has versions: the chain must hold each one.
      const statements =
        page.rows.length > 0
          ? await this.pages.statementsFor(table, page.columns, page.history || audit)
          : undefined;
      const syncedAt = nowSortableUtc();
      const altered: AlteredCounter = { count: 0 };
      const encoded = statements
        ? encodePage(table, statements.columns, page.rows, altered, page.jsonTexts)
        : undefined;
      let versionsWritten = 0;
      await this.connection.transaction(async (client) => {
        if (page.cursor !== null) {
          await client.query({
            ...this.saveCursor,
            values: [table, page.cursor, page.cursorKind, page.selection ?? null, page.runId],
          });
        }
        const originals = page.originals ?? [];
        if (originals.length > 0) {
          await client.query({
            ...this.saveOriginals,
            values: [
              table,
              originals.map((value) => value.id),
              originals.map((value) => value.column),
              originals.map((value) => value.servedHash),
              originals.map((value) => value.original),
            ],
          });
        }
        // Last: the audit chain's head stays locked from its entries to the commit.
        if (statements && encoded) {
          versionsWritten = await this.pages.write(
            client,
            statements,
            page,
            encoded,
            syncedAt,
            audit,
          );
        }
      });
      return { rowsWritten: page.rows.length, valuesAltered: altered.count, versionsWritten };
    });
  }
}

/** The page thread's sink: pages committed on connections of its own. */
export function openPostgresPageSink(setup: PostgresPageSinkSetup): PageSink {
  const connection = new PostgresConnection({
    url: setup.url,
    schema: setup.schema,
    poolSize: setup.poolSize,
    statementTimeoutSeconds: setup.statementTimeoutSeconds,
    connectTimeoutSeconds: setup.connectTimeoutSeconds,
  });
  const sink = new PostgresPageSink(connection, () => setup.audit);
  return {
    writePage: (page) => sink.writePage(page),
    forget: () => sink.forget(),
    async close() {
      try {
        await sink.close();
      } finally {
        await connection.close();
      }
    },
  };
}
