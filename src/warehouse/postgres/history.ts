/**
 * Where every PostgreSQL history version is written: versions opened by a page (created,
 * changed, back in the chatbot choice), versions closed by a full refresh (deleted, removed) and
 * scope exits (the choice no longer serves the row). With audit on, each one is chained here, in
 * the caller's transaction (../audit-chain.ts), so no caller can write a version the chain does not
 * hold.
 */
import type pg from 'pg';
import type { AuditOperation, ChainHead } from '../../interfaces.js';
import { ENTRY_COLUMNS, linkBatch, toHead, type EntryBatch, type SqlRun } from '../audit-chain.js';
import { named } from './connection.js';
import { openingOperation, planHistoryVersions } from '../history.js';
import { quoteIdentifier as q } from '../identifiers.js';
import { SERVED_UNDER_COLUMN, VERSION_KIND_COLUMN } from '../table-definitions.js';
import { POSTGRES_RULES } from './rules.js';
import type { EncodedPage } from './values.js';

export interface HistoryStatements {
  openHashes: { name: string; text: string };
  close: { name: string; text: string };
  insert: { name: string; text: string };
  /** `insert` with the page's chain entries appended and the head moved (appendedSql). */
  insertAudited: { name: string; text: string };
}

/** Rows closed per statement when each closed version is chained. */
const CLOSE_BATCH = 5000;

const LOCK_HEAD = named(POSTGRES_RULES.headSelectSql);

/**
 * Where an append's values come from: a SQL expression each (a parameter, typed). Entries differ
 * only in their row id, operation, digest and hash; the rest is the batch's.
 */
export interface AppendParameters {
  headSeq: string;
  headHash: string;
  runId: string;
  table: string;
  at: string;
  rowIds: string;
  operations: string;
  digests: string;
  hashes: string;
  nextSeq: string;
  nextHash: string;
}

/**
 * Data-modifying CTEs that insert a batch's entries and move the head, for a WITH that other
 * statements may share. Each entry's previous hash is the hash before it in the batch (the
 * head's for the first): the same values linkBatch chained, without sending them twice.
 */
export function appendedSql(p: AppendParameters): string {
  return (
    `appended AS (INSERT INTO _ocs_audit (${ENTRY_COLUMNS})
     SELECT ${p.headSeq} + e.n, ${p.runId}, ${p.table}, e.row_id, e.operation, ${p.at}, e.digest,
       coalesce(lag(e.hash) OVER (ORDER BY e.n), ${p.headHash}), e.hash
     FROM unnest(${p.rowIds}, ${p.operations}, ${p.digests}, ${p.hashes})
       WITH ORDINALITY AS e(row_id, operation, digest, hash, n)),\n` +
    `moved AS (UPDATE _ocs_audit_head SET seq = ${p.nextSeq}, hash = ${p.nextHash} WHERE one = 1)`
  );
}

/** A batch's entries as arrays of what differs between them, and the head moved, in one statement. */
const APPEND_BATCH = named(
  `WITH ${appendedSql({
    headSeq: '$1::bigint',
    runId: '$2::bigint',
    table: '$3::text',
    at: '$4::text',
    rowIds: '$5::bigint[]',
    operations: '$6::text[]',
    digests: '$7::text[]',
    hashes: '$8::text[]',
    headHash: '$9::text',
    nextSeq: '$10::bigint',
    nextHash: '$11::text',
  })} SELECT 1`,
);

/**
 * Locks the head row (it stays locked to the commit, so tables committing at once take turns
 * here and sequence numbers stay gap-free) and links a batch after it.
 */
async function lockAndLink(
  client: pg.ClientBase,
  batch: EntryBatch,
): Promise<{ head: ChainHead; linked: ReturnType<typeof linkBatch> }> {
  const locked = await client.query<{ seq: string; hash: string }>(LOCK_HEAD);
  const head = toHead(locked.rows[0]);
  return { head, linked: linkBatch(head, batch) };
}

/** Appends a batch in the caller's transaction: locked and linked, then inserted in one statement. */
async function appendBatch(client: pg.ClientBase, batch: EntryBatch): Promise<void> {
  if (batch.rowIds.length === 0) return;
  const { head, linked } = await lockAndLink(client, batch);
  await client.query({
    ...APPEND_BATCH,
    values: [
      head.seq,
      batch.runId,
      batch.table,
      batch.at,
      batch.rowIds,
      batch.operations,
      batch.digests,
      linked.hashes,
      head.hash,
      linked.head.seq,
      linked.head.hash,
    ],
  });
}

/** SqlRun on a pg client: `?` placeholders become `$1, $2, …`. */
export function clientRun(client: Pick<pg.ClientBase, 'query'>): SqlRun {
  return async (sql, parameters) => {
    let index = 0;
    const text = sql.replace(/\?/g, () => `$${++index}`);
    return (await client.query(text, parameters as unknown[])).rows as Array<
      Record<string, unknown>
    >;
  };
}

/**
 * A version for each row of the page whose content differs from its open one, in one statement
 * of arrays; returns how many.
 */
export async function openVersions(
  client: pg.ClientBase,
  statements: HistoryStatements,
  page: { runId: number; resource: string; selection?: string | null },
  encoded: EncodedPage,
  hashes: readonly string[],
  now: string,
  audit: boolean,
): Promise<number> {
  const keys = encoded.ids;
  const open = await client.query<{ id: string; hash: string; kind: string }>({
    ...statements.openHashes,
    values: [[...new Set(keys)]],
  });
  const openHashes = new Map(open.rows.map((row) => [row.id, row.hash]));
  const exits = new Set(open.rows.filter((row) => row.kind === 'scope_exit').map((row) => row.id));
  const plan = planHistoryVersions(keys, hashes, openHashes, exits);
  if (plan.length === 0) return 0;
  // A row repeated within the page gets a version per distinct content; all but its last
  // version close at once (the same instant they opened), as one-at-a-time writes would.
  const lastPlanned = new Map<string, number>();
  plan.forEach((version, position) => lastPlanned.set(keys[version.index]!, position));
  const closeIds = [
    ...new Set(plan.filter((version) => version.closeOpen).map((version) => keys[version.index]!)),
  ];
  if (closeIds.length > 0) {
    await client.query({ ...statements.close, values: [now, closeIds] });
  }
  const indexes = plan.map((version) => version.index);
  const rowIds = indexes.map((index) => keys[index]!);
  const digests = indexes.map((index) => hashes[index]!);
  const values = [
    rowIds,
    ...encoded.columns.map((column) => indexes.map((index) => column[index])),
    plan.map((version, position) =>
      lastPlanned.get(keys[version.index]!) === position ? null : now,
    ),
    digests,
    plan.map((version) => version.kind),
    now,
    page.runId,
    page.selection ?? null,
  ];
  if (!audit) {
    await client.query({ ...statements.insert, values });
    return plan.length;
  }
  // The versions and their entries in one statement: the entries reuse its row ids and digests.
  const operations = plan.map(openingOperation);
  const batch = { runId: page.runId, table: page.resource, at: now, rowIds, operations, digests };
  const { head, linked } = await lockAndLink(client, batch);
  await client.query({
    ...statements.insertAudited,
    values: [
      ...values,
      head.seq,
      head.hash,
      page.resource,
      now,
      operations,
      linked.hashes,
      linked.head.seq,
      linked.head.hash,
    ],
  });
  return plan.length;
}

/**
 * Closes at `at` the open versions of the rows `rowsWhere` selects from `table` (a WHERE on the
 * resource table whose parameters start at $1), as `operation`. Call before the rows change.
 */
export async function closeVersions(
  client: pg.ClientBase,
  qualified: { table: string; history: string },
  table: string,
  rowsWhere: { sql: string; parameters: readonly unknown[] },
  change: { at: string; operation: AuditOperation; runId: number; audit: boolean },
): Promise<void> {
  const selected = `SELECT "id" FROM ${qualified.table} ${rowsWhere.sql}`;
  const next = rowsWhere.parameters.length + 1;
  if (!change.audit) {
    await client.query(
      `UPDATE ${qualified.history} SET "_valid_to" = $${next}::timestamptz
       WHERE "_valid_to" IS NULL AND "id" IN (${selected})`,
      [...rowsWhere.parameters, change.at],
    );
    return;
  }
  let after = String(-(2n ** 63n));
  for (;;) {
    const closed = await client.query<{ id: string; hash: string }>(
      `WITH closing AS (
         SELECT "_version_id" FROM ${qualified.history}
         WHERE "_valid_to" IS NULL AND "id" IN (${selected}) AND "id" > $${next + 1}::bigint
         ORDER BY "id" LIMIT ${CLOSE_BATCH})
       UPDATE ${qualified.history} AS h SET "_valid_to" = $${next}::timestamptz
       FROM closing WHERE h."_version_id" = closing."_version_id"
       RETURNING h."id"::text AS id, h."_content_hash" AS hash`,
      [...rowsWhere.parameters, change.at, after],
    );
    if (closed.rows.length === 0) return;
    const rows = closed.rows.sort((left, right) => {
      const difference = BigInt(left.id) - BigInt(right.id);
      return difference < 0n ? -1 : difference > 0n ? 1 : 0;
    });
    await appendBatch(client, {
      runId: change.runId,
      table,
      at: change.at,
      rowIds: rows.map((row) => row.id),
      operations: rows.map(() => change.operation),
      digests: rows.map((row) => row.hash),
    });
    after = rows[rows.length - 1]!.id;
  }
}

/**
 * A scope exit for each row of `table` that `rowsWhere` selects (a WHERE on the resource table
 * whose parameters start at $1): a version of its own (the content as last served, kind
 * `scope_exit`) opened at `at`, closing the row's open one. Call before the rows are marked out of
 * scope. `columns`: the data columns both tables hold.
 */
export async function exitScope(
  client: pg.ClientBase,
  qualified: { table: string; history: string },
  table: string,
  columns: readonly string[],
  rowsWhere: { sql: string; parameters: readonly unknown[] },
  change: { at: string; runId: number; audit: boolean },
): Promise<void> {
  const names = ['"id"', ...columns.map(q), q(SERVED_UNDER_COLUMN)];
  const next = rowsWhere.parameters.length + 1;
  const before = await client.query<{ last: string }>(
    `SELECT coalesce(max("_version_id"), 0)::text AS last FROM ${qualified.history}`,
  );
  const last = before.rows[0]!.last;
  await client.query(
    `INSERT INTO ${qualified.history} (${[...names, '"_valid_from"', '"_content_hash"', '"_run_id"', q(VERSION_KIND_COLUMN)].join(', ')})
     SELECT ${names.map((name) => `t.${name}`).join(', ')}, $${next}::timestamptz,
       coalesce((SELECT o."_content_hash" FROM ${qualified.history} o
                 WHERE o."id" = t."id" AND o."_valid_to" IS NULL), ''),
       $${next + 1}::bigint, 'scope_exit'
     FROM ${qualified.table} t ${rowsWhere.sql}`,
    [...rowsWhere.parameters, change.at, change.runId],
  );
  await client.query(
    `UPDATE ${qualified.history} SET "_valid_to" = $${next}::timestamptz
     WHERE "_valid_to" IS NULL AND "_version_id" <= $${next + 1}::bigint
       AND "id" IN (SELECT "id" FROM ${qualified.table} ${rowsWhere.sql})`,
    [...rowsWhere.parameters, change.at, last],
  );
  if (!change.audit) return;
  // The versions just written are the ones past `last`: chained a batch at a time.
  let after = last;
  for (;;) {
    const batch = await client.query<{ version: string; id: string; hash: string }>(
      `SELECT "_version_id"::text AS version, "id"::text AS id, "_content_hash" AS hash
       FROM ${qualified.history} WHERE "_version_id" > $1::bigint
       ORDER BY "_version_id" LIMIT ${CLOSE_BATCH}`,
      [after],
    );
    if (batch.rows.length === 0) return;
    await appendBatch(client, {
      runId: change.runId,
      table,
      at: change.at,
      rowIds: batch.rows.map((row) => row.id),
      operations: batch.rows.map(() => 'scope_exit'),
      digests: batch.rows.map((row) => row.hash),
    });
    after = batch.rows[batch.rows.length - 1]!.version;
  }
}
