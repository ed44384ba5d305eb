/**
 * The SQLite page-write hot path's first half: encodePage() turns a page's rows into plain values
 * on the thread that hands the page over (the sync's page thread, or the warehouse's), so that
 * the commit (page-writes.ts, on the writer thread) only binds and runs statements. Loads neither
 * the driver nor the statements: the page thread needs only this.
 */
import type { ColumnSpec, PageWrite } from '../../interfaces.js';
import { rowContentHasher } from '../canonical.js';
import { assertValueFits, checkedRowId } from '../values.js';
import { encodeValue, type SqliteValue } from './values.js';

/**
 * A page ready to commit: every value encoded on the sync's thread, so that the commit (on the
 * writer thread, writer-thread.ts) only binds and runs statements. Plain data: it is
 * copied to that thread as it is.
 */
export interface EncodedPage {
  /** The walk the page belongs to (../commit-order.ts). */
  walk?: string;
  runId: number;
  resource: string;
  columns: ColumnSpec[];
  /** Each row's id, then its values in `columns` order. */
  rows: SqliteValue[][];
  /** History only: each row's content hash. */
  hashes?: string[];
  cursor: string | null;
  cursorKind: PageWrite['cursorKind'];
  /** The chatbot choice's key the page was requested under (absent: the whole team, unsaid). */
  selection?: string | null;
  syncedAt: string;
  /** Chain every history version written (the warehouse keeps an audit chain). */
  audit?: boolean;
  /** Originals of values the columns give back differently: id, column, served hash, original. */
  originals?: Array<[bigint, string, string, string]>;
}

/** Encodes a page's rows; throws before anything is written when a value does not fit. */
export function encodePage(page: PageWrite, syncedAt: string, audit = false): EncodedPage {
  const table = page.resource;
  const jsonFields = page.columns.filter((column) => column.type === 'json');
  const textOf =
    jsonFields.length > 0 ? page.jsonTexts?.forFields(jsonFields.map((c) => c.name)) : undefined;
  const rows = page.rows.map((row, index) => {
    const id = checkedRowId(row.id, table);
    const values: SqliteValue[] = [id];
    for (const column of page.columns) {
      const value = row[column.name];
      assertValueFits(value, column.type, table, column.name, id);
      // A json value as the server wrote it, when the body gave its text.
      const text = textOf && column.type === 'json' ? textOf(index, column.name, value) : undefined;
      values.push(text ?? encodeValue(column.type, value));
    }
    return values;
  });
  const selection = page.selection ?? null;
  let hashes: string[] | undefined;
  if (page.history && rows.length > 0) {
    const hash = rowContentHasher(page.columns);
    hashes = page.rows.map((row) => hash(row, selection));
  }
  return {
    walk: page.walk,
    runId: page.runId,
    resource: table,
    columns: page.columns,
    rows,
    hashes,
    cursor: page.cursor,
    cursorKind: page.cursorKind,
    selection,
    syncedAt,
    audit,
    ...(page.originals && page.originals.length > 0
      ? {
          originals: page.originals.map((value): [bigint, string, string, string] => [
            BigInt(value.id),
            value.column,
            value.servedHash,
            value.original,
          ]),
        }
      : {}),
  };
}
