/**
 * The audit archive, end to end through the CLI on every dialect: a sync with audit on chains
 * every version, record and file-ledger record; every run ends with a signed checkpoint; `audit
 * verify` passes an archive built through edits, deletions, faults and schema changes, and names
 * every change made behind the tool's back with the database's own shell.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { replayRow } from '../src/audit/replay.js';
import { verifyAudit } from '../src/audit/verify.js';
import type { AuditOperation, Row } from '../src/interfaces.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { runCli, splitDialects, type TestWarehouse } from './support.js';
import {
  archiveBuiltOnce,
  expectIntact,
  expectNamed,
  openAuditBed,
  tamper,
  verifyJson,
  type AuditBed,
  type AuditKeys,
  type TamperCase,
} from './audit-support.js';

/** A few resources of every kind: pk and updated_at_id, sealed, files (ledger records). */
const RESOURCES = ['llm_providers', 'files', 'participants', 'chats', 'chat_messages'];

/** An entry, a stored version and the live row of row 7 of table t, for the pure replays. */
const entry = (seq: number, operation: AuditOperation, digest: string, at: string) => ({
  seq,
  runId: 1,
  table: 't',
  rowId: '7',
  operation,
  at,
  digest,
  prevHash: '',
  hash: '',
});
const version = (
  versionId: string,
  content: string,
  validFrom: string,
  validTo: string | null,
  kind = 'served',
  servedUnder: string | null = null,
) => ({
  id: '7',
  versionId,
  values: { id: 7, content },
  servedUnder,
  validFrom,
  validTo,
  contentHash: `${content}${servedUnder ?? ''}`,
  kind,
});
const liveRow = (
  content: string,
  outOfScopeSince: string | null = null,
  servedUnder: string | null = null,
) => ({
  id: '7',
  values: { id: 7, content },
  servedUnder,
  deletedAt: null as string | null,
  outOfScopeSince,
});
/** The content hash these rows have: their content, then their key. */
const hash = (row: Row, servedUnder: string | null) => `${String(row.content)}${servedUnder ?? ''}`;

describe('replaying a row (pure)', () => {
  const entries = [
    entry(1, 'create', 'a', 'T1'),
    entry(5, 'change', 'b', 'T2'),
    entry(9, 'delete', 'b', 'T3'),
  ];

  it('finds nothing when the versions and the live row are what the entries say', () => {
    const versions = [version('1', 'a', 'T1', 'T2'), version('2', 'b', 'T2', 'T3')];
    const live = { ...liveRow('b'), deletedAt: 'T3' };
    expect(replayRow('t', '7', entries, versions, live, hash)).toEqual([]);
  });

  it('names reordered versions, a deletion cleared by hand, and a version no entry explains', () => {
    const swapped = [version('1', 'b', 'T2', 'T3'), version('2', 'a', 'T1', 'T2')];
    const live = liveRow('b');
    expect(
      replayRow('t', '7', entries, swapped, live, hash).map((problem) => problem.kind),
    ).toEqual(['version_reordered', 'deleted_at_edited']);
    const extra = [...swapped.reverse(), version('3', 'c', 'T4', null)];
    expect(replayRow('t', '7', entries, extra, undefined, hash)[0]).toMatchObject({
      kind: 'version_inserted',
      version: 3,
      versionId: '3',
    });
  });
});

describe('replaying scope exits and returns (pure)', () => {
  const scoped = (
    versionId: string,
    content: string,
    from: string,
    to: string | null,
    kind: string,
  ) => version(versionId, content, from, to, kind, 'k');
  const live = (content: string, outOfScopeSince: string | null) =>
    liveRow(content, outOfScopeSince, 'k');
  const replay = (
    entries: ReturnType<typeof entry>[],
    versions: ReturnType<typeof scoped>[],
    row: ReturnType<typeof live>,
  ) => replayRow('t', '7', entries, versions, row, hash).map((problem) => problem.kind);
  const exit = [entry(1, 'create', 'ak', 'T1'), entry(4, 'scope_exit', 'ak', 'T2')];
  const exitVersions = [
    scoped('1', 'a', 'T1', 'T2', 'served'),
    scoped('2', 'a', 'T2', null, 'scope_exit'),
  ];

  it('a scope exit keeps the row live, out of scope since its time; a return clears it', () => {
    expect(replay(exit, exitVersions, live('a', 'T2'))).toEqual([]);
    const back = [...exit, entry(8, 'scope_return', 'bk', 'T3')];
    const backVersions = [
      scoped('1', 'a', 'T1', 'T2', 'served'),
      scoped('2', 'a', 'T2', 'T3', 'scope_exit'),
      scoped('3', 'b', 'T3', null, 'scope_return'),
    ];
    expect(replay(back, backVersions, live('b', null))).toEqual([]);
    // Deleted while out of scope: marked deleted, still out of scope since the exit.
    const deleted = [...exit, entry(9, 'delete', 'ak', 'T4')];
    const closed = [exitVersions[0]!, { ...exitVersions[1]!, validTo: 'T4' }];
    expect(
      replayRow('t', '7', deleted, closed, { ...live('a', 'T2'), deletedAt: 'T4' }, hash),
    ).toEqual([]);
  });

  it('names an out-of-scope time edited, a kind edited, and entries that cannot follow each other', () => {
    expect(replay(exit, exitVersions, live('a', null))).toEqual(['out_of_scope_edited']);
    expect(replay(exit, exitVersions, live('a', 'T9'))).toEqual(['out_of_scope_edited']);
    expect(
      replay(
        exit.slice(0, 1),
        exitVersions.slice(0, 1).map((v) => ({ ...v, validTo: null })),
        live('a', 'T2'),
      ),
    ).toEqual(['out_of_scope_edited']);
    expect(
      replay(exit, [exitVersions[0]!, { ...exitVersions[1]!, kind: 'served' }], live('a', 'T2')),
    ).toEqual(['version_kind_edited']);
    // A return with no exit before it; an exit whose digest is not the content as last served.
    expect(
      replay(
        [entry(1, 'create', 'ak', 'T1'), entry(2, 'scope_return', 'ak', 'T2')],
        [scoped('1', 'a', 'T1', 'T2', 'served'), scoped('2', 'a', 'T2', null, 'scope_return')],
        live('a', null),
      ),
    ).toEqual(['entry_edited']);
    expect(
      replay(
        [entry(1, 'create', 'ak', 'T1'), entry(2, 'scope_exit', 'bk', 'T2')],
        [scoped('1', 'a', 'T1', 'T2', 'served'), scoped('2', 'b', 'T2', null, 'scope_exit')],
        live('b', 'T2'),
      ),
    ).toEqual(['entry_edited']);
    // The live row's key edited: named apart from its values.
    expect(replay(exit, exitVersions, { ...live('a', 'T2'), servedUnder: 'other' })).toEqual([
      'served_under_edited',
    ]);
  });
});

describe.each(splitDialects)('audit archive (%s)', (dialect) => {
  let bed: AuditBed;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let keys: AuditKeys;
  let env: Record<string, string>;

  beforeEach(async () => {
    bed = await openAuditBed(dialect, {
      dataset: { rowsPerResource: 12, seed: 21 },
      resources: RESOURCES,
      pageSize: 5,
    });
    ({ dataset, warehouse, keys, env } = bed);
  });
  afterEach(() => bed.close());

  const sync = async (...args: string[]) => {
    const result = await runCli(['sync', ...args], env);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    return result;
  };

  /** Two syncs with edits between them, then a full refresh that finds deleted rows. */
  const buildArchive = async () => {
    await sync();
    dataset.edit('chat_messages', dataset.ids('chat_messages').slice(0, 3));
    dataset.edit('participants', dataset.ids('participants').slice(0, 2));
    dataset.insert('chat_messages', 4);
    await sync();
    dataset.remove('chat_messages', dataset.ids('chat_messages').slice(3, 5));
    dataset.edit('chats', dataset.ids('chats').slice(0, 1));
    await sync('--full-refresh');
  };

  it('an archive built by syncs, edits and a full refresh verifies clean', async () => {
    await buildArchive();
    const { result, report } = await verifyJson(env, keys);
    expect(report.problems).toEqual([]);
    expect(result.code).toBe(0);
    expect(report.intact).toBe(true);
    expect(report.checkpoints.checked).toBe(3);
    expect(report.versions).toBeGreaterThan(0);
    const deletions = tamper(
      warehouse,
      "SELECT count(*) FROM _ocs_audit WHERE operation = 'delete';",
    ).trim();
    expect(Number(deletions)).toBe(2);
  });

  it('the same archive, its pages written on the sync’s thread (page_threads: false, as a fleet does), verifies clean', async () => {
    const config = join(bed.directory.path, 'config.yaml');
    writeFileSync(config, 'page_threads: false\n');
    env = { ...env, OCS_CONFIG: config };
    await buildArchive();
    const report = await expectIntact(env, keys);
    expect(report.checkpoints.checked).toBe(3);
    expect(report.versions).toBeGreaterThan(0);
  });

  /** A row of chat_messages with two versions (edited once), and its versions' ids. */
  const editedMessage = () => {
    const id = tamper(
      warehouse,
      'SELECT id FROM chat_messages__history GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 1;',
    ).trim();
    const versions = tamper(
      warehouse,
      `SELECT _version_id FROM chat_messages__history WHERE id = ${id} ORDER BY _version_id;`,
    )
      .trim()
      .split('\n');
    return { id, first: versions[0]!, second: versions[1]! };
  };
  const deletedMessage = () =>
    tamper(warehouse, 'SELECT min(id) FROM chat_messages WHERE _deleted_at IS NOT NULL;').trim();
  const liveMessage = () =>
    tamper(warehouse, 'SELECT min(id) FROM chat_messages WHERE _deleted_at IS NULL;').trim();
  const checkpointSeq = (index: number) =>
    tamper(
      warehouse,
      `SELECT seq FROM _ocs_audit_checkpoints ORDER BY id LIMIT 1 OFFSET ${index};`,
    ).trim();

  /** Each change, made with the database's own shell, and what verify must name first. */
  const changes: TamperCase[] = [
    {
      what: 'a value edited in a history version',
      sql: () =>
        `UPDATE chat_messages__history SET content = 'edited behind its back' WHERE _version_id = ${editedMessage().first};`,
      kind: 'value_edited',
      table: 'chat_messages',
      row: () => editedMessage().id,
      version: 1,
    },
    {
      what: "a version's _content_hash edited",
      sql: () =>
        `UPDATE chat_messages__history SET _content_hash = '${'1'.repeat(64)}' WHERE _version_id = ${editedMessage().second};`,
      kind: 'value_edited',
      table: 'chat_messages',
      version: 2,
    },
    {
      what: 'a version deleted',
      sql: () => `DELETE FROM chat_messages__history WHERE _version_id = ${editedMessage().first};`,
      kind: 'version_deleted',
      table: 'chat_messages',
      version: 1,
    },
    {
      what: 'a version inserted',
      sql: () => {
        const { first } = editedMessage();
        return (
          'INSERT INTO chat_messages__history (id, message_type, content, _valid_from, _valid_to, _content_hash, _run_id) ' +
          `SELECT id, message_type, 'forged', _valid_from, _valid_from, _content_hash, _run_id FROM chat_messages__history WHERE _version_id = ${first};`
        );
      },
      kind: 'version_inserted',
      table: 'chat_messages',
      version: 3,
    },
    {
      what: 'versions reordered',
      sql: () => {
        const { first, second } = editedMessage();
        return [
          `UPDATE chat_messages__history SET _version_id = -1 WHERE _version_id = ${first};`,
          `UPDATE chat_messages__history SET _version_id = ${first} WHERE _version_id = ${second};`,
          `UPDATE chat_messages__history SET _version_id = ${second} WHERE _version_id = -1;`,
        ].join('\n');
      },
      kind: 'version_reordered',
      table: 'chat_messages',
      version: 1,
    },
    {
      what: '_valid_from edited',
      sql: () =>
        `UPDATE chat_messages__history SET _valid_from = '2020-01-01T00:00:00.000000Z' WHERE _version_id = ${editedMessage().second};`,
      kind: 'valid_time_edited',
      table: 'chat_messages',
      version: 2,
    },
    {
      what: '_valid_to edited',
      sql: () =>
        `UPDATE chat_messages__history SET _valid_to = NULL WHERE _version_id = ${editedMessage().first};`,
      kind: 'valid_time_edited',
      table: 'chat_messages',
      version: 1,
    },
    {
      what: 'a live row edited',
      sql: () => `UPDATE chat_messages SET content = 'edited' WHERE id = ${liveMessage()};`,
      kind: 'row_edited',
      table: 'chat_messages',
      row: liveMessage,
    },
    {
      what: 'a live row deleted',
      sql: () => `DELETE FROM chat_messages WHERE id = ${liveMessage()};`,
      kind: 'row_deleted',
      table: 'chat_messages',
    },
    {
      what: '_deleted_at set by hand',
      sql: () =>
        `UPDATE chat_messages SET _deleted_at = '2026-01-01T00:00:00.000000Z' WHERE id = ${liveMessage()};`,
      kind: 'deleted_at_edited',
      table: 'chat_messages',
    },
    {
      what: '_deleted_at cleared by hand',
      sql: () => `UPDATE chat_messages SET _deleted_at = NULL WHERE id = ${deletedMessage()};`,
      kind: 'deleted_at_edited',
      table: 'chat_messages',
      row: deletedMessage,
    },
    {
      what: 'a row inserted that no version explains',
      sql: () =>
        "INSERT INTO chats (id, name, _synced_at) VALUES (999999, 'forged', '2026-01-01T00:00:00.000000Z');",
      kind: 'row_inserted',
      table: 'chats',
      row: () => '999999',
    },
    {
      what: 'a history table dropped',
      sql: () => 'DROP TABLE participants__history;',
      kind: 'table_dropped',
      table: 'participants',
    },
    {
      what: 'audit entries cut after checkpoint 2, the head row moved to match and checkpoint 3 deleted',
      sql: () => {
        const seq = checkpointSeq(1);
        return [
          `DELETE FROM _ocs_audit WHERE seq > ${seq};`,
          `UPDATE _ocs_audit_head SET seq = ${seq}, hash = (SELECT hash FROM _ocs_audit WHERE seq = ${seq});`,
          `DELETE FROM _ocs_audit_checkpoints WHERE seq > ${seq};`,
        ].join('\n');
      },
      kind: 'entries_cut',
    },
    {
      what: "an entry's digest edited",
      sql: () => `UPDATE _ocs_audit SET digest = '${'2'.repeat(64)}' WHERE seq = 10;`,
      kind: 'entry_edited',
    },
    {
      what: "an entry's hash edited",
      sql: () => 'UPDATE _ocs_audit SET hash = digest WHERE seq = 12;',
      kind: 'entry_edited',
    },
    {
      what: 'an entry deleted',
      sql: () => 'DELETE FROM _ocs_audit WHERE seq = 20;',
      kind: 'entries_deleted',
    },
    {
      what: 'a checkpoint edited (no longer signed by the key)',
      sql: () =>
        `UPDATE _ocs_audit_checkpoints SET counts = '{"create":1}' WHERE seq = ${checkpointSeq(0)};`,
      kind: 'checkpoint_unsigned',
    },
    {
      what: 'a checkpoint deleted from the warehouse',
      sql: () => `DELETE FROM _ocs_audit_checkpoints WHERE seq = ${checkpointSeq(1)};`,
      kind: 'checkpoint_deleted',
    },
    {
      what: 'a run record edited',
      sql: () => 'UPDATE _ocs_runs SET "rows" = 999999 WHERE id = 2;',
      kind: 'record_edited',
      table: '_ocs_runs',
      row: () => '2',
    },
    {
      what: 'a run record deleted',
      sql: () => 'DELETE FROM _ocs_runs WHERE id = 1;',
      kind: 'record_deleted',
      table: '_ocs_runs',
      row: () => '1',
    },
    {
      what: "a resource run's record edited",
      sql: () =>
        'UPDATE _ocs_resource_runs SET "rows" = "rows" + 1 WHERE id = (SELECT max(id) FROM _ocs_resource_runs);',
      kind: 'record_edited',
      table: '_ocs_resource_runs',
    },
    {
      what: 'a file-ledger record edited',
      sql: () =>
        `UPDATE _ocs_files SET sha256 = '${'3'.repeat(64)}' WHERE file_id = (SELECT min(file_id) FROM _ocs_files WHERE status = 'ok');`,
      kind: 'record_edited',
      table: '_ocs_files',
    },
    {
      what: 'a file-ledger record deleted',
      sql: () => 'DELETE FROM _ocs_files WHERE file_id = (SELECT max(file_id) FROM _ocs_files);',
      kind: 'record_deleted',
      table: '_ocs_files',
    },
  ];

  const archive = archiveBuiltOnce(() => buildArchive());
  afterAll(() => archive.dispose());

  it.each(changes)('names $what ($kind), exit 3', async (change) => {
    await archive.give(bed);
    await expectNamed(warehouse, env, keys, change);
  });

  it('names the first broken link even past the problems it lists', async () => {
    await archive.give(bed);
    // Found first (tables are walked by name) but chained late; the team row is chained early.
    tamper(warehouse, "UPDATE chat_messages SET content = 'edited' WHERE _deleted_at IS NULL;");
    tamper(warehouse, "UPDATE team SET name = 'edited';");
    const opened = await openWarehouse({
      url: warehouse.env.OCS_WAREHOUSE_URL!,
      schema: warehouse.env.OCS_WAREHOUSE_SCHEMA,
    });
    try {
      const snapshot = await opened.audit.snapshot();
      const report = await verifyAudit({ snapshot, problemLimit: 2 }).finally(() =>
        snapshot.close(),
      );
      expect(report.problemCount).toBeGreaterThan(3);
      expect(report.first).toMatchObject({ kind: 'row_edited', table: 'team' });
      expect(report.problems[0]).toBe(report.first);
      expect(report.problems).toHaveLength(3);
    } finally {
      await opened.close();
    }
  });
});
