/**
 * The page writers of the overlap designs the benchmark compares (overlap-designs.ts). Each opens
 * its own connection to the SQLite warehouse and writes a page with its cursor in one transaction.
 *
 * - `bytes`: the raw page is decoded and parsed here, then written through the warehouse's own
 *   writePage (encoding, type checks, 64-bit ids as in a sync).
 * - `rows`: the fetching thread parsed and encoded the rows; only the prepared upserts run here.
 * - `json-each`: the raw page is bound as a blob and SQLite parses it (`json_each`).
 */
import Database from 'better-sqlite3';
import type { ColumnSpec, Row } from '../src/interfaces.js';
import { createLogger } from '../src/log.js';
import { parsePage } from '../src/source/http-source.js';
import { parseJsonExact } from '../src/json.js';
import { cursorAfterPage, deriveCursor } from '../src/sync/plan.js';
import { openWarehouse } from '../src/warehouse/open.js';
import type { SqliteValue } from '../src/warehouse/sqlite/values.js';
import { jsonEachUpsertSql, rowUpsertSql, saveCursorSql } from './overlap-sql.js';

export type WriterDesign = 'bytes' | 'rows' | 'json-each';

export interface WriterSetup {
  design: WriterDesign;
  path: string;
  resource: string;
  columns: ColumnSpec[];
  runId: number;
  pageSize: number;
  rowsPerBatch: number;
}

export type WriterMessage =
  | { type: 'bytes'; bytes: ArrayBuffer; cursor: string | null }
  | { type: 'rows'; rows: SqliteValue[][]; cursor: string | null }
  | { type: 'end' };

export interface Writer {
  page(message: Exclude<WriterMessage, { type: 'end' }>): Promise<number>;
  close(): Promise<void>;
}

export async function openWriter(options: WriterSetup): Promise<Writer> {
  if (options.design === 'bytes') {
    const logger = createLogger({ level: 'warn', pretty: false });
    const warehouse = await openWarehouse({ url: options.path, logger });
    const decoder = new TextDecoder();
    let previous: string | null = null;
    return {
      async page(message) {
        if (message.type !== 'bytes') throw new Error('bytes expected');
        const page = parsePage(
          parseJsonExact(decoder.decode(message.bytes)),
          options.resource,
          options.pageSize,
        );
        previous = cursorAfterPage(page, 'updated_at_id', previous);
        const result = await warehouse.writePage({
          runId: options.runId,
          resource: options.resource,
          columns: options.columns,
          rows: page.rows,
          cursor: previous,
          cursorKind: 'updated_at_id',
          history: false,
        });
        return result.rowsWritten;
      },
      close: () => warehouse.close(),
    };
  }
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 10000');
  const saveCursor = db.prepare(saveCursorSql);
  const close = async () => {
    db.close();
  };
  if (options.design === 'rows') {
    const one = db.prepare(rowUpsertSql(options.resource, options.columns, 1));
    const batch = db.prepare(rowUpsertSql(options.resource, options.columns, options.rowsPerBatch));
    const syncedAt = new Date().toISOString();
    const write = db.transaction((rows: SqliteValue[][], cursor: string | null) => {
      let next = 0;
      for (; next + options.rowsPerBatch <= rows.length; next += options.rowsPerBatch) {
        const parameters: SqliteValue[] = [];
        for (let index = next; index < next + options.rowsPerBatch; index++) {
          parameters.push(...rows[index]!, syncedAt, options.runId);
        }
        batch.run(parameters);
      }
      for (; next < rows.length; next++) one.run(...rows[next]!, syncedAt, options.runId);
      if (cursor !== null) saveCursor.run(options.resource, cursor, 'updated_at_id', options.runId);
    });
    return {
      async page(message) {
        if (message.type !== 'rows') throw new Error('rows expected');
        write(message.rows, message.cursor);
        return message.rows.length;
      },
      close,
    };
  }
  const insert = db.prepare(jsonEachUpsertSql(options.resource, options.columns));
  // The last page has no cursor: resume from its last row, as the sync does.
  const lastRow = db
    .prepare(
      `SELECT value ->> '$.updated_at' AS updated_at, value -> '$.id' AS id
       FROM json_each(CAST(? AS TEXT), '$.results') ORDER BY key DESC LIMIT 1`,
    )
    .safeIntegers(true);
  const syncedAt = new Date().toISOString();
  const write = db.transaction((bytes: Buffer, cursor: string | null) => {
    const changes = insert.run({ page: bytes, syncedAt, runId: options.runId }).changes;
    const last = cursor ?? lastRow.get(bytes);
    // The id comes as its JSON text (`->`), so a 64-bit id keeps its digits.
    const saved =
      typeof last === 'string' || last === undefined
        ? last
        : deriveCursor('updated_at_id', last as unknown as Row);
    if (saved !== undefined)
      saveCursor.run(options.resource, saved, 'updated_at_id', options.runId);
    return changes;
  });
  return {
    async page(message) {
      if (message.type !== 'bytes') throw new Error('bytes expected');
      return write(Buffer.from(message.bytes), message.cursor);
    },
    close,
  };
}
