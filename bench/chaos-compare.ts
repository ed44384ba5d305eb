/**
 * The chaos soak's verdict on a warehouse (chaos.ts): does it hold what the server holds? Read
 * after the final runs, against the fake server's own rows (ServerTruth), table by table and row
 * by row, and the file contents against the bytes the server serves. Each finding is a line of
 * text; none is a pass.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { blobPath } from '../src/files/blob-store.js';
import type { ServerTruth } from './soak-server-process.js';
import type { StoredRow } from './warehouse-rows.js';

/** A table's rows in id order in the server's shape: live ones, or every one (deleted too). */
export type ReadTable = (table: string, includeDeleted: boolean) => Promise<StoredRow[]>;

export interface TableComparison {
  tables: number;
  /** Rows the server has, each found in the warehouse. */
  rows: number;
  /** Rows the warehouse keeps marked deleted (every one a row the server deleted). */
  deletedMarked: number;
  /** Rows the server deleted that are still live: only a full refresh can tell they are gone. */
  awaitingFullRefresh: number;
  problems: string[];
}

/** Findings kept per comparison: the first ones say what is wrong, the count how much. */
const PROBLEMS_KEPT = 20;

function describe(value: unknown): string {
  const text = JSON.stringify(value, (_key, item: unknown) =>
    typeof item === 'bigint' ? item.toString() : item,
  );
  return text === undefined ? 'absent' : text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** The first field two versions of a row disagree on. */
function firstDifference(stored: StoredRow, served: StoredRow): string {
  for (const field of new Set([...Object.keys(served), ...Object.keys(stored)])) {
    if (!isDeepStrictEqual(stored[field], served[field])) {
      return `${field}: ${describe(stored[field])} in the warehouse, ${describe(served[field])} on the server`;
    }
  }
  return 'the same fields, other types';
}

/**
 * Compares every table with the server's rows. `after` says what the last run could know:
 * - `incremental`: every row the server has is there, as the server has it (nothing lost, no
 *   change missed), but a row it deleted may still be live, and a `files` row whose file was
 *   replaced may be older (files pages by id: only a full refresh reads such a row again);
 * - `full refresh`: exactly the server's rows, and every other row marked deleted.
 * In both, each id is there once, and no row is one the server never had.
 */
export async function compareWithServer(
  truth: ServerTruth,
  readTable: ReadTable,
  after: 'incremental' | 'full refresh',
): Promise<TableComparison> {
  const result: TableComparison = {
    tables: 0,
    rows: 0,
    deletedMarked: 0,
    awaitingFullRefresh: 0,
    problems: [],
  };
  let findings = 0;
  const problem = (text: string) => {
    findings += 1;
    if (result.problems.length < PROBLEMS_KEPT) result.problems.push(text);
  };
  const replacedFiles = new Set(truth.replacedFiles);
  for (const [table, served] of Object.entries(truth.tables)) {
    let all: StoredRow[];
    let live: StoredRow[];
    try {
      all = await readTable(table, true);
      live = await readTable(table, false);
    } catch (error) {
      // A resource without rows may have no table yet.
      if (served.length > 0) problem(`${table}: cannot be read (${(error as Error).message})`);
      continue;
    }
    result.tables += 1;
    const removed = new Set(truth.removed[table] ?? []);
    const ids = all.map((row) => String(row.id));
    const stored = new Set(ids);
    const doubled = ids.filter((id, index) => index > 0 && id === ids[index - 1]);
    if (doubled.length > 0) problem(`${table}: ids stored more than once: ${doubled.join(', ')}`);
    const liveById = new Map(live.map((row) => [String(row.id), row]));
    const servedIds = new Set<string>();
    for (const row of served) {
      const id = String(row.id);
      servedIds.add(id);
      const kept = liveById.get(id);
      if (!kept) {
        problem(
          `${table} ${id}: lost (${stored.has(id) ? 'marked deleted' : 'not in the warehouse'}, the server has it)`,
        );
      } else if (!isDeepStrictEqual(kept, row)) {
        const olderFile = after === 'incremental' && table === 'files' && replacedFiles.has(id);
        if (!olderFile) problem(`${table} ${id}: differs: ${firstDifference(kept, row)}`);
      }
      result.rows += 1;
    }
    for (const id of liveById.keys()) {
      if (servedIds.has(id)) continue;
      if (!removed.has(id)) problem(`${table} ${id}: live in the warehouse, never on the server`);
      else if (after === 'incremental') result.awaitingFullRefresh += 1;
      else
        problem(`${table} ${id}: deleted on the server, not marked deleted after a full refresh`);
    }
    for (const id of stored) {
      if (liveById.has(id) || servedIds.has(id)) continue;
      result.deletedMarked += 1;
      if (!removed.has(id)) problem(`${table} ${id}: marked deleted, never deleted on the server`);
    }
  }
  if (findings > result.problems.length) {
    result.problems.push(`... and ${findings - result.problems.length} more`);
  }
  return result;
}

/** A row of `_ocs_files`, the file contents' ledger. */
export interface LedgerRow {
  fileId: string;
  status: string;
  sha256: string | null;
  size: number | null;
}

/**
 * Every `files` row the server has is in the ledger once: `ok` with the digest and size of the
 * bytes the server serves now and a blob that hashes to it, or `missing` where it serves none.
 */
export function compareFileContents(
  truth: ServerTruth,
  ledger: LedgerRow[],
  filesDir: string,
): { files: number; problems: string[] } {
  const problems: string[] = [];
  const byId = new Map<string, LedgerRow>();
  for (const row of ledger) {
    if (byId.has(row.fileId)) problems.push(`file ${row.fileId}: in the ledger more than once`);
    byId.set(row.fileId, row);
  }
  for (const [id, content] of Object.entries(truth.fileContents)) {
    const record = byId.get(id);
    byId.delete(id);
    if (content === null) {
      if (record?.status !== 'missing') {
        problems.push(`file ${id}: ${record?.status ?? 'not in the ledger'}, the server has none`);
      }
      continue;
    }
    if (
      record?.status !== 'ok' ||
      record.sha256 !== content.sha256 ||
      Number(record.size) !== content.size
    ) {
      const stored = !record
        ? 'not in the ledger'
        : record.sha256 === null
          ? record.status
          : `${record.status} ${record.sha256.slice(0, 12)} ${record.size} bytes`;
      problems.push(
        `file ${id}: ${stored}, the server serves ${content.sha256.slice(0, 12)} ${content.size} bytes`,
      );
      continue;
    }
    const path = blobPath(filesDir, content.sha256);
    const onDisk = existsSync(path)
      ? createHash('sha256').update(readFileSync(path)).digest('hex')
      : undefined;
    if (onDisk !== content.sha256) {
      problems.push(`file ${id}: its blob ${onDisk ? 'holds other bytes' : 'is missing'}`);
    }
  }
  for (const id of byId.keys()) problems.push(`file ${id}: in the ledger, not on the server`);
  return { files: Object.keys(truth.fileContents).length, problems };
}
