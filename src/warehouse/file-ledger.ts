/**
 * The file ledger (`_ocs_files`), written once with kysely so SQLite and PostgreSQL share it, as
 * the bookkeeping does. A dialect hands over its Kysely instance; the one per-dialect fact is how
 * a stored `updated_at` reads back as text.
 */
import { sql, type ColumnType as KyselyColumnType, type Kysely, type RawBuilder } from 'kysely';
import type {
  ColumnType,
  FileCandidate,
  FileLedgerStore,
  FileRecord,
  FileStatus,
  FileTotals,
} from '../interfaces.js';
import { appendRecordEntries } from './audit-chain.js';
import { kyselyRun, nowIso, toIsoText } from './bookkeeping.js';
import type { DialectRules } from './dialect-rules.js';
import { canonicalTimestamp } from '../timestamps.js';
import { storedText } from '../printable.js';

/** The table that holds the rows whose contents we fetch. */
export const FILES_TABLE = 'files';

type Timestamp = KyselyColumnType<string | Date, string, string>;
/** PostgreSQL returns bigint as a string. */
type BigNumber = KyselyColumnType<number | string, number | string, number | string>;

export interface FileLedgerTables {
  _ocs_files: {
    file_id: BigNumber;
    sha256: string | null;
    size: BigNumber | null;
    content_type: string | null;
    status: FileStatus;
    error: string | null;
    updated_at: string | null;
    file: string | null;
    fetched_at: Timestamp;
    attempts: number;
    next_attempt_at: Timestamp | null;
  };
  _ocs_columns: { table_name: string; column_name: string; column_type: ColumnType };
}

const LEDGER_COLUMN_NAMES = [
  'sha256',
  'size',
  'content_type',
  'status',
  'error',
  'updated_at',
  'file',
  'fetched_at',
  'attempts',
  'next_attempt_at',
];
/** Ids as text: 64-bit ids stay exact whatever the driver does with integers. */
const LEDGER_COLUMNS = sql.raw(
  ['cast(file_id as text) as file_id', ...LEDGER_COLUMN_NAMES].join(', '),
);
const LEDGER_COLUMNS_OF_L = sql.raw(
  ['cast(l.file_id as text) as file_id', ...LEDGER_COLUMN_NAMES.map((name) => `l.${name}`)].join(
    ', ',
  ),
);

type LedgerRow = {
  file_id: unknown;
  sha256: string | null;
  size: unknown;
  content_type: string | null;
  status: FileStatus;
  error: string | null;
  updated_at: string | null;
  file: string | null;
  fetched_at: unknown;
  attempts: unknown;
  next_attempt_at: unknown;
};

export class KyselyFileLedger implements FileLedgerStore {
  private readonly db: Kysely<FileLedgerTables>;

  /**
   * @param chained the warehouse keeps an audit chain: every record written is chained in the
   *   same transaction (warehouse/audit-chain.ts)
   */
  constructor(
    db: Kysely<never>,
    private readonly rules: DialectRules,
    private readonly chained = false,
  ) {
    this.db = db as unknown as Kysely<FileLedgerTables>;
  }

  async get(fileId: string): Promise<FileRecord | undefined> {
    const result = await sql<LedgerRow>`
      select ${LEDGER_COLUMNS} from _ocs_files where file_id = ${fileId}`.execute(this.db);
    return result.rows[0] ? toRecord(result.rows[0]) : undefined;
  }

  async totals(): Promise<FileTotals> {
    const byStatus = await this.db
      .selectFrom('_ocs_files')
      .select(['status', sql<unknown>`count(*)`.as('count')])
      .groupBy('status')
      .execute();
    const count = (status: FileStatus) =>
      Number(byStatus.find((row) => row.status === status)?.count ?? 0);
    // Identical contents are stored once, so bytes are summed over distinct digests.
    const blobs = await sql<{ blobs: unknown; bytes: unknown }>`
      select count(*) as blobs, coalesce(sum(size), 0) as bytes from (
        select sha256, max(size) as size from _ocs_files where status = 'ok' group by sha256
      ) as distinct_blobs`.execute(this.db);
    return {
      ok: count('ok'),
      missing: count('missing'),
      failed: count('failed'),
      blobs: Number(blobs.rows[0]?.blobs ?? 0),
      bytes: Number(blobs.rows[0]?.bytes ?? 0),
    };
  }

  async candidates(afterId: string | null, limit: number): Promise<FileCandidate[]> {
    const columns = new Map(
      (
        await this.db
          .selectFrom('_ocs_columns')
          .select(['column_name', 'column_type'])
          .where('table_name', '=', FILES_TABLE)
          .execute()
      ).map((row) => [row.column_name, row.column_type]),
    );
    // No columns recorded: the `files` table was never created here.
    if (columns.size === 0) return [];
    const path = columns.has('file') ? sql`f.file` : sql`null`;
    const size = columns.has('content_size') ? sql`f.content_size` : sql`null`;
    const updatedAt = this.asText(columns.get('updated_at'));
    const after = afterId === null ? sql`` : sql`and f.id > ${afterId}`;
    const result = await sql<
      LedgerRow & { id: string; row_file: unknown; row_updated_at: unknown; row_size: unknown }
    >`
      select cast(f.id as text) as id, ${path} as row_file, ${updatedAt} as row_updated_at,
        ${size} as row_size,
        ${LEDGER_COLUMNS_OF_L}
      from ${sql.table(FILES_TABLE)} as f left join _ocs_files as l on l.file_id = f.id
      where f._deleted_at is null ${after}
      order by f.id limit ${limit}`.execute(this.db);
    return result.rows.map((row) => ({
      fileId: row.id,
      file: row.row_file === null || row.row_file === undefined ? null : String(row.row_file),
      updatedAt:
        row.row_updated_at === null || row.row_updated_at === undefined
          ? null
          : canonicalTimestamp(String(row.row_updated_at)),
      contentSize: declaredSize(row.row_size),
      record: row.status === null || row.status === undefined ? undefined : toRecord(row),
    }));
  }

  async records(afterId: string | null, limit: number): Promise<FileRecord[]> {
    const after = afterId === null ? sql`` : sql`where file_id > ${afterId}`;
    const result = await sql<LedgerRow>`
      select ${LEDGER_COLUMNS} from _ocs_files ${after} order by file_id limit ${limit}`.execute(
      this.db,
    );
    return result.rows.map(toRecord);
  }

  async record(record: FileRecord): Promise<void> {
    const values = {
      file_id: record.fileId,
      sha256: record.sha256,
      size: record.size,
      content_type: record.contentType,
      status: record.status,
      error: record.error === null ? null : storedText(record.error),
      updated_at: record.updatedAt,
      file: record.file,
      fetched_at: record.fetchedAt,
      attempts: record.attempts,
      next_attempt_at: record.nextAttemptAt,
    };
    const { file_id: _key, ...changes } = values;
    const upsert = (db: Kysely<FileLedgerTables>) =>
      db
        .insertInto('_ocs_files')
        .values(values)
        .onConflict((conflict) => conflict.column('file_id').doUpdateSet(changes))
        .execute();
    if (!this.chained) {
      await upsert(this.db);
      return;
    }
    await this.db.transaction().execute(async (trx) => {
      const existed = await trx
        .selectFrom('_ocs_files')
        .select('file_id')
        .where('file_id', '=', record.fileId)
        .executeTakeFirst();
      await upsert(trx);
      await appendRecordEntries(
        kyselyRun(trx as unknown as Kysely<never>, this.rules),
        this.rules,
        [
          {
            table: '_ocs_files',
            key: record.fileId,
            operation: existed ? 'update' : 'insert',
            runId: null,
          },
        ],
        nowIso(),
      );
    });
  }

  /** The stored `updated_at` as text that canonicalTimestamp reads. */
  private asText(type: ColumnType | undefined): RawBuilder<unknown> {
    if (type === undefined) return sql`null`;
    if (type === 'datetime') return sql.raw(this.rules.fixedTime('f.updated_at'));
    return sql`cast(f.updated_at as text)`;
  }
}

/** A stored `content_size` as a byte count: a positive whole number, else null (says nothing). */
function declaredSize(value: unknown): number | null {
  const size = typeof value === 'number' || typeof value === 'bigint' ? Number(value) : NaN;
  const parsed = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : size;
  return Number.isSafeInteger(parsed) && parsed > 0 ? parsed : null;
}

function toRecord(row: LedgerRow): FileRecord {
  return {
    fileId: String(row.file_id),
    sha256: row.sha256,
    size: row.size === null || row.size === undefined ? null : Number(row.size),
    contentType: row.content_type,
    status: row.status,
    error: row.error,
    updatedAt: row.updated_at,
    file: row.file,
    fetchedAt: toIsoText(row.fetched_at) ?? '',
    attempts: Number(row.attempts ?? 0),
    nextAttemptAt: toIsoText(row.next_attempt_at),
  };
}
