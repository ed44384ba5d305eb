/**
 * A team's chatbot choice in the audit chain, end to end through the CLI on every dialect: scope
 * exits and returns are versions of their own kind, chained like any other (`scope_exit`,
 * `scope_return`); a scoped archive built by narrowing, full refreshes under a choice, widening, a
 * choice changed mid-run (409) and kills verifies clean; and `audit verify` names a hand edit of
 * `_ocs_out_of_scope_since`, `_ocs_version_kind` or `_ocs_served_under`, and a scope exit deleted.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { selectionKey } from '../src/export-api/selection.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { startFakeServer } from '../src/fake-server/server.js';
import { idsInScope, workingChatbots } from './chatbot-choice-support.js';
import { runCli, teamKeys, splitDialects, type TestWarehouse } from './support.js';
import {
  archiveBuiltOnce,
  expectIntact as verifiedIntact,
  expectNamed,
  killSyncWhen,
  openAuditBed,
  tamper,
  type AuditBed,
  type AuditKeys,
  type TamperCase,
} from './audit-support.js';

/** Owned (chatbots, sessions, chats, messages), shared (participants) and excluded (evaluators). */
const RESOURCES = ['chatbots', 'participants', 'sessions', 'chats', 'chat_messages', 'evaluators'];

const MODELS: Record<string, string> = {
  sessions: 'experiments.experimentsession',
  participants: 'experiments.participant',
};

describe.each(splitDialects)('the chatbot choice in the audit chain (%s)', (dialect) => {
  let bed: AuditBed;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let keys: AuditKeys;
  let env: Record<string, string>;

  beforeEach(async () => {
    bed = await openAuditBed(dialect, {
      dataset: {
        scoped: true,
        seed: 3,
        rowsPerResource: 8,
        // A few chatbots with many conversations each, so every choice serves some of everything.
        rowCounts: { chatbots: 3, sessions: 24, chats: 20, chat_messages: 40, participants: 12 },
      },
      resources: RESOURCES,
      pageSize: 5,
      server: { chatbotChoice: { chosen: [] } },
    });
    ({ dataset, warehouse, keys, env } = bed);
  });
  afterEach(() => bed.close());

  const chatbots = () => workingChatbots(dataset);
  const choose = (chosen: string[]) => bed.server.choice!.set(chosen);
  const inScope = (chosen: string[], resource: string) =>
    idsInScope(dataset, chosen, resource, MODELS[resource]!);

  const sync = async (...args: string[]) => {
    const result = await runCli(['sync', ...args], env);
    expect(result.stderr).toBe('');
    expect(result.code, result.stdout).toBe(0);
    return result;
  };
  const expectIntact = () => verifiedIntact(env, keys);
  const count = (sql: string) => Number(tamper(warehouse, sql).trim());
  const entries = (operation: string, table = 'sessions') =>
    count(
      `SELECT count(*) FROM _ocs_audit WHERE table_name = '${table}' AND operation = '${operation}';`,
    );

  /**
   * Narrowing from [a, b] to [a], a full refresh under [a] (b's rows leave the choice), then a
   * session of a deleted on the server and found by the next full refresh under [a].
   */
  const buildScopedArchive = async () => {
    const [a, b] = chatbots();
    choose([a!, b!]);
    await sync();
    choose([a!]);
    await sync();
    await sync('--full-refresh');
    const [gone] = [...inScope([a!], 'sessions')];
    dataset.remove('sessions', [gone!]);
    await sync('--full-refresh');
    return { a: a!, b: b!, gone: gone! };
  };

  it('narrowing, full refreshes under a choice, widening, a choice changed mid-run and kills: the chain verifies clean every time', async () => {
    const { a, b, gone } = await buildScopedArchive();
    await expectIntact();
    // Under [a]: b's sessions left the choice (scope exits), the one deleted under [a] is deleted.
    const outOfB = [...inScope([a, b], 'sessions')].filter(
      (id) => !inScope([a], 'sessions').has(id),
    );
    expect(outOfB.length).toBeGreaterThan(0);
    expect(
      count(
        'SELECT count(*) FROM sessions WHERE _ocs_out_of_scope_since IS NOT NULL AND _deleted_at IS NULL;',
      ),
    ).toBe(outOfB.length);
    expect(count(`SELECT count(*) FROM sessions WHERE _deleted_at IS NOT NULL;`)).toBe(1);
    expect(
      count(`SELECT count(*) FROM sessions WHERE id = ${gone} AND _deleted_at IS NOT NULL;`),
    ).toBe(1);
    expect(entries('scope_exit')).toBeGreaterThanOrEqual(outOfB.length);
    expect(entries('delete')).toBe(1);
    // Every version's kind is its entry's.
    expect(
      count("SELECT count(*) FROM sessions__history WHERE _ocs_version_kind = 'scope_exit';"),
    ).toBe(
      count(
        "SELECT count(*) FROM _ocs_audit WHERE table_name = 'sessions' AND operation = 'scope_exit';",
      ),
    );

    // Widening: b's rows come back, as scope returns, with their old updated_at.
    choose([a, b]);
    await sync();
    expect(entries('scope_return')).toBeGreaterThanOrEqual(outOfB.length);
    expect(count('SELECT count(*) FROM sessions WHERE _ocs_out_of_scope_since IS NOT NULL;')).toBe(
      0,
    );
    await expectIntact();

    // The admin changes the choice while the run walks: 409, the walk starts again under [b].
    choose([a]);
    bed.server.choice!.changeAfter(6, [b]);
    await sync('--full-refresh');
    expect(bed.server.requests.some((request) => request.status === 409)).toBe(true);
    expect(
      tamper(warehouse, 'SELECT selection_key FROM _ocs_runs ORDER BY id DESC LIMIT 1;').trim(),
    ).toBe(selectionKey([b]));
    await expectIntact();

    // Killed in the middle of a full refresh under a choice, then again while rows return.
    choose([a]);
    await killSyncWhen(bed, env, { resource: 'chat_messages', page: 2 }, {}, ['--full-refresh']);
    await expectIntact();
    await sync('--full-refresh');
    await expectIntact();
    choose([a, b]);
    await killSyncWhen(bed, env, { resource: 'chat_messages', page: 3 });
    await expectIntact();
    await sync();
    await expectIntact();

    // The whole team again: everything is back in scope; the real deletion stays.
    choose([]);
    await sync('--full-refresh');
    const report = await expectIntact();
    expect(count('SELECT count(*) FROM sessions WHERE _ocs_out_of_scope_since IS NOT NULL;')).toBe(
      0,
    );
    expect(count('SELECT count(*) FROM sessions WHERE _deleted_at IS NOT NULL;')).toBe(1);
    expect(report.checkpoints.checked).toBeGreaterThan(5);
  });

  /** A row b's sessions left the choice with, one still in it, and the exit's version. */
  const outRow = () =>
    tamper(
      warehouse,
      'SELECT min(id) FROM sessions WHERE _ocs_out_of_scope_since IS NOT NULL AND _deleted_at IS NULL;',
    ).trim();
  const inRow = () =>
    tamper(
      warehouse,
      'SELECT min(id) FROM sessions WHERE _ocs_out_of_scope_since IS NULL AND _deleted_at IS NULL;',
    ).trim();
  const exitVersion = () =>
    tamper(
      warehouse,
      `SELECT _version_id FROM sessions__history WHERE id = ${outRow()} AND _ocs_version_kind = 'scope_exit';`,
    ).trim();

  /** Each change, made with the database's own shell, and what verify must name first. */
  const changes: TamperCase[] = [
    {
      what: '_ocs_out_of_scope_since cleared on a row out of the choice',
      sql: () => `UPDATE sessions SET _ocs_out_of_scope_since = NULL WHERE id = ${outRow()};`,
      kind: 'out_of_scope_edited',
      table: 'sessions',
      row: outRow,
    },
    {
      what: '_ocs_out_of_scope_since set on a row in the choice',
      sql: () =>
        `UPDATE sessions SET _ocs_out_of_scope_since = '2026-01-01T00:00:00.000000Z' WHERE id = ${inRow()};`,
      kind: 'out_of_scope_edited',
      table: 'sessions',
      row: inRow,
    },
    {
      what: '_ocs_out_of_scope_since moved',
      sql: () =>
        `UPDATE sessions SET _ocs_out_of_scope_since = '2020-01-01T00:00:00.000000Z' WHERE id = ${outRow()};`,
      kind: 'out_of_scope_edited',
      table: 'sessions',
      row: outRow,
    },
    {
      what: "a scope exit's _ocs_version_kind edited",
      sql: () =>
        `UPDATE sessions__history SET _ocs_version_kind = 'served' WHERE _version_id = ${exitVersion()};`,
      kind: 'version_kind_edited',
      table: 'sessions',
      row: outRow,
      version: 2,
    },
    {
      what: 'a scope exit deleted, the version before it opened again',
      sql: () => {
        const row = outRow();
        return [
          `DELETE FROM sessions__history WHERE _version_id = ${exitVersion()};`,
          `UPDATE sessions__history SET _valid_to = NULL WHERE id = ${row};`,
        ].join('\n');
      },
      kind: 'version_deleted',
      table: 'sessions',
      row: outRow,
      version: 2,
    },
    {
      what: 'a scope exit forged for a row in the choice',
      sql: () =>
        'INSERT INTO sessions__history (id, _valid_from, _content_hash, _ocs_version_kind) ' +
        `SELECT id, '2026-01-01T00:00:00.000000Z', _content_hash, 'scope_exit' FROM sessions__history WHERE id = ${inRow()} AND _valid_to IS NULL;`,
      kind: 'version_inserted',
      table: 'sessions',
      row: inRow,
    },
    {
      what: 'a scope exit made to look like a deletion',
      sql: () =>
        `UPDATE sessions SET _deleted_at = _ocs_out_of_scope_since WHERE id = ${outRow()};`,
      kind: 'deleted_at_edited',
      table: 'sessions',
      row: outRow,
    },
    {
      what: "a live row's _ocs_served_under edited (a later full refresh would take it for deleted)",
      sql: () => `UPDATE sessions SET _ocs_served_under = 'all' WHERE id = ${outRow()};`,
      kind: 'served_under_edited',
      table: 'sessions',
      row: outRow,
    },
    {
      what: "a version's _ocs_served_under edited",
      sql: () =>
        `UPDATE sessions__history SET _ocs_served_under = 'all' WHERE id = ${inRow()} AND _valid_to IS NULL;`,
      kind: 'value_edited',
      table: 'sessions',
      row: inRow,
    },
    {
      what: "the chatbots a choice's key stands for edited",
      sql: () =>
        `UPDATE _ocs_chatbot_choices SET chatbots = '[{"public_id":"forged","name":"forged"}]' WHERE selection_key = (SELECT min(selection_key) FROM _ocs_chatbot_choices);`,
      kind: 'choice_edited',
      table: '_ocs_chatbot_choices',
    },
    {
      what: "a run's chatbot choice edited",
      sql: () => "UPDATE _ocs_runs SET selection_key = 'all' WHERE id = 2;",
      kind: 'record_edited',
      table: '_ocs_runs',
      row: () => '2',
    },
  ];

  const archive = archiveBuiltOnce(async () => void (await buildScopedArchive()));
  afterAll(() => archive.dispose());

  it.each(changes)('names $what ($kind), exit 3', async (change) => {
    await archive.give(bed);
    await expectNamed(warehouse, env, keys, change);
  });
});

/**
 * Takes a warehouse back to before some of migrations 007 (audit), 008 (chatbot choice) and 009
 * (the choice on history versions), as an older ocs-sync left it: their tables, columns and
 * records gone (what SQLite cannot undo, 008's rebuilt CHECK, stays).
 */
function rollBack(warehouse: TestWarehouse, migrations: ReadonlyArray<7 | 8 | 9>): void {
  const tables = tamper(warehouse, 'SELECT DISTINCT table_name FROM _ocs_columns;')
    .trim()
    .split('\n');
  const existing = new Set(
    tamper(
      warehouse,
      warehouse.dialect === 'sqlite'
        ? "SELECT name FROM sqlite_master WHERE type = 'table';"
        : 'SELECT tablename FROM pg_tables WHERE schemaname = current_schema();',
    )
      .trim()
      .split('\n'),
  );
  const sql: string[] = [];
  const drop = (table: string, column: string) =>
    sql.push(`ALTER TABLE "${table}" DROP COLUMN "${column}";`);
  for (const table of tables) {
    const history = `${table}__history`;
    if (migrations.includes(8)) {
      sql.push(`DROP VIEW IF EXISTS "${table}__live";`);
      drop(table, '_ocs_out_of_scope_since');
      drop(table, '_ocs_served_under');
      if (existing.has(history)) drop(history, '_ocs_version_kind');
    }
    if (migrations.includes(9) && existing.has(history)) drop(history, '_ocs_served_under');
  }
  if (migrations.includes(8)) {
    drop('_ocs_runs', 'selection_key');
    drop('_ocs_resources', 'cursor_selection');
    drop('_ocs_resources', 'excluded_at');
    sql.push('DROP TABLE _ocs_chatbot_choices;');
  }
  if (migrations.includes(7)) {
    sql.push(
      'DROP TABLE _ocs_audit; DROP TABLE _ocs_audit_head; DROP TABLE _ocs_audit_checkpoints;',
    );
  }
  // 010 (the initial kind) came after all three: an older ocs-sync had not applied it either.
  sql.push(`DELETE FROM _ocs_migrations WHERE version IN (${[...migrations, 10].join(', ')});`);
  tamper(warehouse, sql.join('\n'));
}

describe.each(splitDialects)('migrations 007, 008 and 009 in any order (%s)', (dialect) => {
  let bed: AuditBed;
  afterEach(() => bed.close());

  const open = async (scoped: boolean) => {
    bed = await openAuditBed(dialect, {
      dataset: { scoped: true, seed: 4, rowsPerResource: 6, rowCounts: { chatbots: 3 } },
      resources: RESOURCES,
      pageSize: 5,
      server: scoped ? { chatbotChoice: { chosen: [] } } : {},
    });
    return bed;
  };
  const chosen = (count: number) => workingChatbots(bed.dataset).slice(0, count);
  const applied = () =>
    tamper(bed.warehouse, 'SELECT version FROM _ocs_migrations ORDER BY version;')
      .trim()
      .split('\n')
      .map(Number);

  it('an audit warehouse from before choices (007 without 008 and 009) verifies clean once migrated, then follows a scoped server', async () => {
    await open(false);
    expect((await runCli(['sync'], bed.env)).code).toBe(0);
    rollBack(bed.warehouse, [8, 9]);
    expect(applied()).not.toContain(8);
    // verify opens the warehouse, which applies 008 and 009: every old version is `served`,
    // served under no choice, so every digest still holds.
    await verifiedIntact(bed.env, bed.keys);
    expect(applied()).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);

    await bed.server.close();
    bed.server = await startScopedServer(bed, chosen(1));
    const env = { ...bed.env, OCS_BASE_URL: bed.server.url };
    const synced = await runCli(['sync', '--full-refresh'], env);
    expect(synced.code, synced.stdout + synced.stderr).toBe(0);
    await verifiedIntact(env, bed.keys);
    expect(
      Number(
        tamper(bed.warehouse, "SELECT count(*) FROM _ocs_audit WHERE operation = 'scope_exit';"),
      ),
    ).toBeGreaterThan(0);
  });

  it("a warehouse main's ocs-sync migrated (008 without 007 and 009) and one from before all three are migrated and synced; audit stays refused on them", async () => {
    await open(true);
    bed.server.choice!.set(chosen(2));
    const plain = Object.fromEntries(
      Object.entries(bed.env).filter(([name]) => !name.startsWith('OCS_AUDIT')),
    );
    const env = { ...plain, OCS_HISTORY: 'true' };
    const sync = async (extra: Record<string, string> = {}, ...args: string[]) => {
      const result = await runCli(['sync', ...args], { ...env, ...extra });
      expect(result.code, result.stdout + result.stderr).toBe(0);
    };
    await sync();
    rollBack(bed.warehouse, [7, 9]);
    expect(applied()).toEqual([1, 2, 3, 4, 5, 6, 8]);
    bed.server.choice!.set(chosen(1));
    await sync({}, '--full-refresh');
    expect(applied()).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(
      Number(
        tamper(
          bed.warehouse,
          "SELECT count(*) FROM sessions__history WHERE _ocs_version_kind = 'scope_exit';",
        ),
      ),
    ).toBeGreaterThan(0);

    rollBack(bed.warehouse, [7, 8, 9]);
    expect(applied()).toEqual([1, 2, 3, 4, 5, 6]);
    bed.server.choice!.set(chosen(2));
    await sync();
    expect(applied()).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect((await runCli(['status'], env)).code).toBe(0);

    // The chain must witness everything from the first run: not on a warehouse that holds data.
    const refused = await runCli(['sync'], bed.env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'this warehouse already holds runs and tables without an audit chain',
    );
  });
});

function startScopedServer(bed: AuditBed, chosen: string[]) {
  return startFakeServer({
    dataset: bed.dataset,
    teamPublicKeyPem: teamKeys().publicKey,
    chatbotChoice: { chosen },
  });
}
