/**
 * The audit chain on SQLite: appending entries with prepared statements inside the caller's
 * write transaction (the page writer on the writer thread, and the warehouse's own connection).
 * SQLite lets one connection write at a time, so the head read inside a write transaction is the
 * head: nothing can append between the read and the commit.
 */
import Database from 'better-sqlite3';
import type { AuditSnapshot } from '../../interfaces.js';
import {
  ENTRY_COLUMNS,
  HEAD_UPDATE_SQL,
  linkBatch,
  toHead,
  type EntryBatch,
} from '../audit-chain.js';
import { SqlAuditSnapshot } from '../audit-snapshot.js';
import { quoteIdentifier as q } from '../identifiers.js';
import { SQLITE_RULES } from './rules.js';
import { decodeValue } from './values.js';

/** Entries per multi-row INSERT (9 parameters each). */
const ENTRIES_PER_INSERT = 64;

export class SqliteChainWriter {
  private statements?: {
    head: Database.Statement;
    moveHead: Database.Statement;
    insertOne: Database.Statement;
    insertBatch: Database.Statement;
  };

  constructor(private readonly db: Database.Database) {}

  /**
   * Links and inserts a batch of entries after the head, in the caller's write transaction. On
   * the writer thread's hot path: each entry's values go straight into the statement's parameters.
   */
  append(batch: EntryBatch): void {
    const count = batch.rowIds.length;
    if (count === 0) return;
    const statements = this.prepared();
    const head = toHead(statements.head.get() as { seq: unknown; hash: unknown } | undefined);
    const linked = linkBatch(head, batch);
    const { runId, table, at, rowIds, operations, digests } = batch;
    let parameters: Array<string | number> = [];
    for (let index = 0; index < count; index += 1) {
      parameters.push(
        head.seq + index + 1,
        runId,
        table,
        rowIds[index]!,
        operations[index]!,
        at,
        digests[index]!,
        linked.prevHashes[index]!,
        linked.hashes[index]!,
      );
      if (parameters.length === ENTRIES_PER_INSERT * 9) {
        statements.insertBatch.run(parameters);
        parameters = [];
      }
    }
    for (let start = 0; start < parameters.length; start += 9) {
      statements.insertOne.run(parameters.slice(start, start + 9));
    }
    statements.moveHead.run(linked.head.seq, linked.head.hash);
  }

  /** Prepared on first use: the tables exist only after migrate(). */
  private prepared() {
    const insert = (count: number) =>
      this.db.prepare(
        `INSERT INTO _ocs_audit (${ENTRY_COLUMNS}) VALUES ${Array.from(
          { length: count },
          () => '(?, ?, ?, ?, ?, ?, ?, ?, ?)',
        ).join(', ')}`,
      );
    this.statements ??= {
      head: this.db.prepare(SQLITE_RULES.headSelectSql),
      moveHead: this.db.prepare(HEAD_UPDATE_SQL),
      insertOne: insert(1),
      insertBatch: insert(ENTRIES_PER_INSERT),
    };
    return this.statements;
  }
}

/**
 * A read-only connection of its own in one read transaction (WAL keeps its view while syncs
 * commit); `:memory:` has no second connection and reads through the warehouse's own.
 */
export function openSqliteSnapshot(path: string, own: Database.Database): AuditSnapshot {
  const db =
    path === ':memory:' ? own : new Database(path, { readonly: true, fileMustExist: true });
  if (db !== own) db.pragma('busy_timeout = 10000');
  db.exec('BEGIN');
  const all = async (sql: string, parameters: readonly unknown[] = []) =>
    db
      .prepare(sql)
      .safeIntegers(true)
      .all(...(parameters as unknown[])) as Array<Record<string, unknown>>;
  return new SqlAuditSnapshot({
    rules: SQLITE_RULES,
    all,
    readExpression: (column) => q(column),
    decode: decodeValue,
    existingTables: async () =>
      new Set(
        (await all("SELECT name FROM sqlite_master WHERE type = 'table'")).map((row) =>
          String(row.name),
        ),
      ),
    physicalColumns: async (table) =>
      new Set((await all(`PRAGMA table_info(${q(table)})`)).map((row) => String(row.name))),
    close: async () => {
      if (!db.open) return;
      db.exec('COMMIT');
      if (db !== own) db.close();
    },
  });
}
