/**
 * Operating the audit archive through the CLI, on every dialect: checkpoints at the end of every
 * run (warehouse, file, `audit checkpoints`, `status`), keys, what audit refuses, turning it on,
 * the `history` rule, a chain rebuilt without the key, sealed values that the server seals afresh,
 * schema changes that leave old digests alone.
 */
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import nacl from 'tweetnacl';
import { keyId } from '../src/audit/key-id.js';
import type { FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import type { SignedCheckpoint } from '../src/interfaces.js';
import { checkpointText, entryHash } from '../src/warehouse/audit-chain.js';
import { canonicalJson, rowContentHasher } from '../src/warehouse/canonical.js';
import { openWarehouse } from '../src/warehouse/open.js';
import {
  createTestWarehouse,
  docsSqlBlocks,
  runCli,
  syncEnv,
  temporaryDirectory,
  splitDialects,
  type TestWarehouse,
} from './support.js';
import {
  expectIntact,
  openAuditBed,
  tamper,
  verifyJson,
  type AuditBed,
  type AuditKeys,
} from './audit-support.js';

const RESOURCES = ['llm_providers', 'files', 'participants', 'chats', 'chat_messages'];

describe('keygen --signing', () => {
  it('writes an Ed25519 key pair, the private key mode 0600, and never overwrites', async () => {
    const directory = temporaryDirectory();
    try {
      const made = await runCli(['keygen', '--signing', '--out', directory.path], {});
      expect(made.code).toBe(0);
      const privateKey = join(directory.path, 'ocs-audit-signing.key');
      const publicKey = join(directory.path, 'ocs-audit-signing.pub');
      expect(statSync(privateKey).mode & 0o777).toBe(0o600);
      const seed = Buffer.from(readFileSync(privateKey, 'utf8').trim(), 'base64');
      const pub = readFileSync(publicKey, 'utf8').trim();
      expect(Buffer.from(nacl.sign.keyPair.fromSeed(seed).publicKey).toString('base64')).toBe(pub);
      // The private key is never printed; the public key's file is named.
      expect(made.stdout).not.toContain(seed.toString('base64'));
      expect(made.stdout).toContain(publicKey);
      const again = await runCli(['keygen', '--signing', '--out', directory.path], {});
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/Refusing to overwrite .*ocs-audit-signing/);
      const both = await runCli(['keygen', '--signing', '--archive', '--out', directory.path], {});
      expect(both.code).toBe(2);
    } finally {
      directory.remove();
    }
  });
});

describe.each(splitDialects)('operating the audit archive (%s)', (dialect) => {
  let bed: AuditBed;
  let server: FakeServer;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let directory: AuditBed['directory'];
  let keys: AuditKeys;
  let env: Record<string, string>;

  beforeEach(async () => {
    bed = await openAuditBed(dialect, {
      dataset: { rowsPerResource: 10, seed: 5 },
      resources: RESOURCES,
      pageSize: 4,
    });
    ({ server, dataset, warehouse, directory, keys, env } = bed);
  });
  afterEach(() => bed.close());

  const sync = async (extra: Record<string, string> = {}, ...args: string[]) => {
    const result = await runCli(['sync', ...args], { ...env, ...extra });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    return result;
  };
  const verify = () => expectIntact(env, keys);

  it('every run ends with a signed checkpoint in the warehouse and in the file (0600); audit checkpoints and status show them', async () => {
    const first = await sync();
    expect(first.stdout).toMatch(
      /Audit: checkpoint of run 1 at entry \d+ .* signed, 1 line\(s\) appended/,
    );
    dataset.edit('chats', dataset.ids('chats').slice(0, 2));
    await sync();
    expect(statSync(keys.checkpointFile).mode & 0o777).toBe(0o600);
    const lines = readFileSync(keys.checkpointFile, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(2);
    const fromFile = lines.map((line) => JSON.parse(line) as SignedCheckpoint);
    expect(fromFile.map((checkpoint) => checkpoint.run)).toEqual([1, 2]);
    expect(fromFile[1]!.previous_seq).toBe(fromFile[0]!.seq);
    // Signed by the key keygen wrote, over the canonical JSON of the rest.
    const publicKey = readFileSync(keys.publicKeyFile, 'utf8').trim();
    for (const checkpoint of fromFile) {
      expect(checkpoint.key).toBe(publicKey);
      expect(
        nacl.sign.detached.verify(
          Buffer.from(checkpointText(checkpoint)),
          Buffer.from(checkpoint.signature, 'base64'),
          Buffer.from(publicKey, 'base64'),
        ),
      ).toBe(true);
      expect(canonicalJson(checkpoint)).toBe(lines[fromFile.indexOf(checkpoint)]);
    }
    const listed = await runCli(['audit', 'checkpoints', '--json'], env);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual(fromFile);
    const table = await runCli(['audit', 'checkpoints'], env);
    expect(table.stdout).toMatch(/^run\s+entry\s+head/m);
    // The private key never reaches the warehouse or the output.
    const seed = readFileSync(keys.privateKeyFile, 'utf8').trim();
    const dump = tamper(
      warehouse,
      'SELECT * FROM _ocs_audit_checkpoints; SELECT * FROM _ocs_state;',
    );
    expect(dump).not.toContain(seed);
    expect(first.stdout + first.logs).not.toContain(seed);

    let status = await runCli(['status'], env);
    expect(status.stdout).toMatch(
      /Audit: +on \(\d+ entries\); last checkpoint: run 2 at entry \d+/,
    );
    expect(status.stdout).toContain('never verified');
    await verify();
    status = await runCli(['status', '--json'], env);
    const audit = (JSON.parse(status.stdout) as { audit: Record<string, unknown> }).audit;
    expect(audit.enabled).toBe(true);
    expect((audit.last_checkpoint as { run: number }).run).toBe(2);
    expect((audit.last_verify as { intact: boolean }).intact).toBe(true);

    tamper(warehouse, "UPDATE chats SET name = 'renamed' WHERE id = (SELECT min(id) FROM chats);");
    const broken = await runCli(
      ['audit', 'verify', '--public-key', keys.publicKeyFile, '--checkpoints', keys.checkpointFile],
      env,
    );
    expect(broken.code).toBe(3);
    expect(broken.stdout).toMatch(
      /^Audit chain BROKEN: 1 problem\(s\).*\nFirst broken link: chats, row \d+, entry \d+: a live row edited \(row_edited\): the values of row \d+ in chats differ from its last version/,
    );
    // A broken archive is a problem of its own for monitoring: exit 7, first of the problems.
    status = await runCli(['status'], env);
    expect(status.code).toBe(7);
    expect(status.stdout).toMatch(
      /^Health: +the last audit verify \(\d+s ago\) found the audit archive BROKEN: 1 problem\(s\); first: chats, row \d+, entry \d+: a live row edited/m,
    );
    expect(status.stdout).toMatch(/; last verify: BROKEN \(see Health\)$/m);
    const json = JSON.parse((await runCli(['status', '--json'], env)).stdout) as {
      exit_code: number;
      healthy: boolean;
      problems: string[];
    };
    expect(json).toMatchObject({ exit_code: 7, healthy: false });
    expect(json.problems[0]).toMatch(/^the last audit verify .* BROKEN/);
    // Put back as it was, the next verify passes and status is healthy again.
    tamper(
      warehouse,
      'UPDATE chats SET name = (SELECT h.name FROM chats__history h WHERE h.id = chats.id AND h._valid_to IS NULL) WHERE id = (SELECT min(id) FROM chats);',
    );
    await verify();
    expect((await runCli(['status'], env)).code).toBe(0);
  });

  it('audit verify draws each stage on a terminal, clears it at the end, and keeps it out of logs elsewhere', async () => {
    await sync();
    const entries = Number(tamper(warehouse, 'SELECT seq FROM _ocs_audit_head;').trim());
    const onTerminal = await runCli(['audit', 'verify'], env, { terminal: true });
    expect(onTerminal.code).toBe(0);
    expect(onTerminal.logs).toContain(
      `checking the audit chain: ${entries.toLocaleString('en-US')} of ${entries.toLocaleString('en-US')} entries`,
    );
    const chatVersions = Number(tamper(warehouse, 'SELECT count(*) FROM chats__history;').trim());
    expect(onTerminal.logs).toContain(`checking chats: ${chatVersions} versions`);
    // The line is cleared before the result is logged.
    const last = onTerminal.logs.lastIndexOf('checking ');
    const [status, after, ...more] = onTerminal.logs.slice(last).split('\r');
    expect(status).toMatch(/^checking [^\n]*$/);
    expect(after?.startsWith(`${String.fromCharCode(27)}[2K`)).toBe(true);
    expect(after).toContain('Audit chain intact');
    expect(more).toEqual([]);
    const offTerminal = await runCli(['audit', 'verify'], env);
    expect(offTerminal.code).toBe(0);
    expect(offTerminal.logs).not.toContain('checking');
  });

  it('the checkpoint file is created with data_file_mode; check counts it among the private files', async () => {
    const shared = join(directory.path, 'shared-checkpoints.jsonl');
    await sync({ OCS_DATA_FILE_MODE: '0640', OCS_AUDIT_CHECKPOINT_FILE: shared });
    expect(statSync(shared).mode & 0o777).toBe(0o640);
    // A file that exists keeps its mode; check says when it is wider than the setting.
    chmodSync(shared, 0o644);
    const checked = await runCli(['check'], { ...env, OCS_AUDIT_CHECKPOINT_FILE: shared });
    expect(checked.stdout).toMatch(
      /! files private\s+wider than data_file_mode allows .*shared-checkpoints\.jsonl \(0644\)/,
    );
  });

  it('check loads the signing key and finds out whether the checkpoint file can be appended to, writing nothing', async () => {
    const check = (extra: Record<string, string> = {}) => runCli(['check'], { ...env, ...extra });
    const id = keyId(readFileSync(keys.publicKeyFile, 'utf8').trim());
    let result = await check();
    expect(result.stdout).toMatch(
      new RegExp(
        `✓ audit signing\\s+Ed25519 key ${id} loads; \\S+checkpoints\\.jsonl is created by the next sync`,
      ),
    );
    expect(result.code).toBe(0);
    expect(existsSync(keys.checkpointFile)).toBe(false);
    await sync();
    const before = readFileSync(keys.checkpointFile, 'utf8');
    result = await check();
    expect(result.stdout).toMatch(
      /✓ audit signing\s+Ed25519 key \w+ loads; checkpoints are appended to /,
    );
    expect(readFileSync(keys.checkpointFile, 'utf8')).toBe(before);

    const notAKey = join(directory.path, 'not-a-key');
    writeFileSync(notAKey, 'not base64 at all!\n', { mode: 0o600 });
    result = await check({ OCS_AUDIT_SIGNING_KEY_FILE: notAKey });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(
      /✗ audit signing\s+The audit signing key file \S+ does not hold an Ed25519 private key \(not base64\)/,
    );
    expect(result.stdout).toContain(
      'fix: Use the ocs-audit-signing.key written by `ocs-sync keygen --signing`',
    );
    // 64 bytes whose second half is not the public key of the first: no Ed25519 key.
    const mismatched = join(directory.path, 'mismatched.key');
    writeFileSync(mismatched, `${Buffer.alloc(64, 7).toString('base64')}\n`, { mode: 0o600 });
    result = await check({ OCS_AUDIT_SIGNING_KEY_FILE: mismatched });
    expect(result.stdout).toMatch(
      /✗ audit signing .*second half is not the public key of the first/,
    );
    // A public key is 32 bytes, as a seed is: named so, or the same as keygen's beside it.
    const publicKeyMessage = (file: string) =>
      `The audit signing key file ${file} holds the public key, not the private one; no checkpoint signed with it would verify.`;
    result = await check({ OCS_AUDIT_SIGNING_KEY_FILE: keys.publicKeyFile });
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(publicKeyMessage(keys.publicKeyFile));
    expect(result.stdout).toContain(
      'fix: Point audit.signing_key_file at ocs-audit-signing.key; keep ocs-audit-signing.pub for `audit verify --public-key`.',
    );
    const renamed = join(dirname(keys.publicKeyFile), 'renamed.key');
    writeFileSync(renamed, readFileSync(keys.publicKeyFile), { mode: 0o600 });
    result = await check({ OCS_AUDIT_SIGNING_KEY_FILE: renamed });
    expect(result.stdout).toContain(publicKeyMessage(renamed));
    const synced = await runCli(['sync'], { ...env, OCS_AUDIT_SIGNING_KEY_FILE: renamed });
    expect(synced.code).not.toBe(0);
    expect(synced.stderr).toContain(publicKeyMessage(renamed));
    const exposed = join(directory.path, 'exposed.key');
    writeFileSync(exposed, readFileSync(keys.privateKeyFile));
    chmodSync(exposed, 0o644);
    result = await check({ OCS_AUDIT_SIGNING_KEY_FILE: exposed });
    // Said once, by the key files' check, with the chmod that fixes it.
    expect(result.stdout).toMatch(/✓ audit signing\s+Ed25519 key \w+ loads; /);
    expect(result.stdout).toMatch(
      new RegExp(
        `! key files private +Audit signing key file ${exposed} can be read by group or others \\(mode 0644\\)`,
      ),
    );
    expect(result.stdout).toContain(`fix: It holds a key: chmod 600 ${exposed}`);
    expect(result.code).toBe(0);

    const missingFolder = join(directory.path, 'not-mounted', 'checkpoints.jsonl');
    result = await check({ OCS_AUDIT_CHECKPOINT_FILE: missingFolder });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(
      /✗ audit signing\s+the signing key \(Ed25519, key \w+\) loads, but the checkpoint file's folder \S+not-mounted does not exist/,
    );
    expect(existsSync(join(directory.path, 'not-mounted'))).toBe(false);
    result = await check({ OCS_AUDIT_CHECKPOINT_FILE: directory.path });
    expect(result.stdout).toMatch(/✗ audit signing .*the checkpoint file \S+ is not a file/);

    // On without a key: a chain, but nothing signed. Off: nothing to check.
    result = await check({ OCS_AUDIT_SIGNING_KEY_FILE: '', OCS_AUDIT_CHECKPOINT_FILE: '' });
    expect(result.stdout).toMatch(
      /! audit signing\s+no audit.signing_key_file: the chain is kept, but no checkpoint is signed/,
    );
    result = await check({
      OCS_AUDIT: 'false',
      OCS_AUDIT_SIGNING_KEY_FILE: '',
      OCS_AUDIT_CHECKPOINT_FILE: '',
    });
    expect(result.stdout).not.toContain('audit signing');
  });

  it('what status, audit checkpoints and audit verify quote from the warehouse is escaped and cut', async () => {
    await sync();
    const escape = dialect === 'sqlite' ? 'char(27)' : 'chr(27)';
    const long = `${escape} || '[2J' || '${'x'.repeat(500)}'`;
    tamper(warehouse, `UPDATE _ocs_audit_checkpoints SET created_at = ${long};`);
    tamper(
      warehouse,
      `UPDATE _ocs_audit SET table_name = 'ch' || ${escape} || 'ats' || '${'y'.repeat(3000)}' WHERE seq = (SELECT min(seq) FROM _ocs_audit WHERE table_name = 'chats');`,
    );
    const verified = await runCli(['audit', 'verify', '--public-key', keys.publicKeyFile], env);
    expect(verified.code).toBe(3);
    const shown = [
      verified.stdout,
      (await runCli(['audit', 'checkpoints'], env)).stdout,
      (await runCli(['status'], env)).stdout,
    ];
    for (const text of shown) {
      expect(text).not.toContain('\u001b');
      expect(text).not.toContain('x'.repeat(100));
      expect(text).not.toContain('y'.repeat(1200));
    }
    expect(verified.stdout).toContain('ch\\u001bats');
  });

  it("runs the docs' audit queries with the database's shell", async () => {
    await sync();
    const queries = docsSqlBlocks('audit-queries');
    expect(queries).toHaveLength(2);
    for (const query of queries) {
      expect(tamper(warehouse, query).trim().split('\n').length, query).toBeGreaterThan(0);
    }
    expect(tamper(warehouse, queries[0]!)).toMatch(/\|update\|/);
  });

  it('a kept checkpoint file gets the lines a run could not append, and a checkpoint that cannot be written makes the run exit 3', async () => {
    await sync();
    writeFileSync(keys.checkpointFile, '');
    const second = await sync();
    expect(second.stdout).toContain('2 line(s) appended');
    expect(readFileSync(keys.checkpointFile, 'utf8').trim().split('\n')).toHaveLength(2);
    const failing = await runCli(['sync'], {
      ...env,
      OCS_AUDIT_CHECKPOINT_FILE: join(directory.path, 'no-such-folder', 'checkpoints.jsonl'),
    });
    expect(failing.code).toBe(3);
    expect(failing.stdout).toMatch(
      /Audit: the checkpoint was not written: The checkpoint file .* cannot be found/,
    );
    await verify();
  });

  it('a checkpoint line cut short is a torn write: verify warns (exit 0), the next run repairs it and appends only what is new, an edited line is still tampering', async () => {
    await sync();
    await sync();
    const whole = readFileSync(keys.checkpointFile, 'utf8');
    const [first, second] = whole.trim().split('\n');
    // A kill or a full disk in the middle of writing the second line.
    const cut = `${first}\n${second!.slice(0, 57)}`;
    writeFileSync(keys.checkpointFile, cut);
    const torn = await verifyJson(env, keys);
    expect(torn.result.code).toBe(0);
    expect(torn.report.problems).toEqual([]);
    expect(torn.report.warnings).toEqual([
      expect.stringMatching(
        /^line 2 of the checkpoint file .* is cut short: it is the start of the checkpoint of run 2 \(seq \d+\), which is whole in _ocs_audit_checkpoints \(a write torn by a crash or a full disk, not a change\)$/,
      ),
    ]);
    const text = await runCli(
      ['audit', 'verify', '--public-key', keys.publicKeyFile, '--checkpoints', keys.checkpointFile],
      env,
    );
    expect(text.stdout).toMatch(/^Audit chain intact/);
    expect(text.stdout).toMatch(/^warning: line 2 of the checkpoint file .* is cut short/m);

    // The next run keeps the fragment on its own line, writes run 2's checkpoint whole and its
    // own: nothing twice, nothing removed.
    const third = await runCli(['sync'], { ...env, OCS_LOG_LEVEL: 'warn' });
    expect(third.code).toBe(0);
    expect(third.logs).toMatch(/The last line of the checkpoint file was cut short/);
    const repaired = readFileSync(keys.checkpointFile, 'utf8').split('\n');
    expect(repaired.slice(0, 3)).toEqual([first, second!.slice(0, 57), second]);
    expect(repaired).toHaveLength(5);
    expect(repaired[4]).toBe('');
    expect((JSON.parse(repaired[3]!) as SignedCheckpoint).run, "the third run's checkpoint").toBe(
      3,
    );
    const after = await verifyJson(env, keys);
    expect(after.result.code).toBe(0);
    expect(after.report.warnings).toHaveLength(1);
    // A fourth run finds a whole file: one more line, no repair.
    await sync();
    expect(readFileSync(keys.checkpointFile, 'utf8').split('\n')).toHaveLength(6);

    // Any other change is still tampering: a character of a whole line changed.
    const lines = readFileSync(keys.checkpointFile, 'utf8').split('\n');
    lines[0] = lines[0]!.replace('"run":1', '"run":7');
    writeFileSync(keys.checkpointFile, lines.join('\n'));
    const edited = await verifyJson(env, keys);
    expect(edited.result.code).toBe(3);
    expect(edited.report.first?.kind).toMatch(/^checkpoint_/);
    // And a fragment that begins no signed checkpoint is not taken for a torn write.
    writeFileSync(keys.checkpointFile, `${whole}{"format":"forged`);
    const forged = await verifyJson(env, keys);
    expect(forged.result.code).toBe(3);
    expect(forged.report.first?.kind).toBe('checkpoint_edited');
  });

  it('a reset is chained; reset --drop-table and dropping a stored field are refused while audit is on', async () => {
    await sync();
    const reset = await runCli(['reset', 'chats', '--yes'], env);
    expect(reset.code).toBe(0);
    await verify();
    const drop = await runCli(['reset', 'chats', '--drop-table', '--yes'], env);
    expect(drop.code).toBe(1);
    expect(drop.stderr).toMatch(
      /Dropping the table chats is refused: this warehouse keeps an audit chain/,
    );
    const excluded = await runCli(['sync'], { ...env, OCS_EXCLUDE_FIELDS: 'chats.name' });
    expect(excluded.code).toBe(3);
    expect(excluded.stdout).toMatch(/Dropping chats.name \(exclude_fields\) is refused/);
    await verify();
    tamper(
      warehouse,
      "UPDATE _ocs_resource_runs SET error = 'nothing happened' WHERE run_id = (SELECT max(run_id) FROM _ocs_resource_runs WHERE resource = 'chats' AND error LIKE 'cursor%');",
    );
    const { result, report } = await verifyJson(env, keys);
    expect(result.code).toBe(3);
    expect(report.first).toMatchObject({ kind: 'record_edited', table: '_ocs_resource_runs' });
  });

  it('audit starts with a warehouse, never on one that holds data; once on, it stays on', async () => {
    const { OCS_AUDIT: _on, ...withoutAudit } = env;
    const plain = {
      ...withoutAudit,
      OCS_AUDIT_SIGNING_KEY_FILE: '',
      OCS_AUDIT_CHECKPOINT_FILE: '',
    };
    delete (plain as Record<string, string | undefined>).OCS_AUDIT_SIGNING_KEY_FILE;
    delete (plain as Record<string, string | undefined>).OCS_AUDIT_CHECKPOINT_FILE;
    const unaudited = await runCli(['sync'], plain);
    expect(unaudited.code).toBe(0);
    const refused = await runCli(['sync'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /audit.enabled is on, but this warehouse already holds runs and tables without an audit chain/,
    );
    const notAudited = await runCli(['audit', 'verify'], env);
    expect(notAudited.code).toBe(1);
    expect(notAudited.stderr).toMatch(/This warehouse keeps no audit chain/);

    const fresh = await createTestWarehouse(dialect);
    try {
      const freshEnv = { ...env, ...fresh.env };
      expect((await runCli(['sync'], freshEnv)).code).toBe(0);
      dataset.edit('chat_messages', dataset.ids('chat_messages').slice(0, 3));
      // The configuration forgets audit: the chain goes on all the same.
      const forgetful = await runCli(['sync'], { ...plain, ...fresh.env });
      expect(forgetful.code).toBe(0);
      expect(forgetful.logs).toContain('this warehouse keeps an audit chain: it stays on');
      const changes = tamper(fresh, "SELECT count(*) FROM _ocs_audit WHERE operation = 'change';");
      expect(Number(changes.trim())).toBe(3);
      const { result, report } = await verifyJson(freshEnv, keys);
      expect(report.problems).toEqual([]);
      expect(result.code).toBe(0);
    } finally {
      await fresh.dispose();
    }
  });

  it('with audit on, a history list that leaves resources out is a configuration error naming them', async () => {
    const result = await runCli(['sync'], { ...env, OCS_HISTORY: 'chats,chat_messages' });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'history lists some resources, but audit is on for this warehouse, which keeps the history of every resource; it leaves out team, llm_providers, files, participants',
    );
    // Recorded as a failed run, chained like any other.
    await verify();
    expect((await runCli(['sync'], { ...env, OCS_HISTORY: 'true' })).code).toBe(0);
  });

  it('a chain rebuilt consistently without the signing key passes only a verify that trusts the warehouse', async () => {
    await sync();
    dataset.edit('chat_messages', dataset.ids('chat_messages').slice(0, 2));
    await sync();
    // Someone with write access rewrites a message in its open version and its live row, gives
    // the version the content hash the documented canonical form gives, rebuilds every entry
    // hash from there and the head, and removes the checkpoints kept in the warehouse.
    const target = tamper(warehouse, 'SELECT min(id) FROM chat_messages;').trim();
    const opened = await openWarehouse({
      url: warehouse.env.OCS_WAREHOUSE_URL!,
      schema: warehouse.env.OCS_WAREHOUSE_SCHEMA,
    });
    const statements: string[] = [];
    try {
      const snapshot = await opened.audit.snapshot();
      const table = (await snapshot.tables()).find(
        (candidate) => candidate.table === 'chat_messages',
      )!;
      const versions = await snapshot.versions(table, null, 10_000);
      const open = versions.find((version) => version.id === target && version.validTo === null)!;
      const forged = rowContentHasher(table.columns)({ ...open.values, content: 'rewritten' });
      statements.push(
        `UPDATE chat_messages__history SET content = 'rewritten', _content_hash = '${forged}' WHERE _version_id = ${open.versionId};`,
        `UPDATE chat_messages SET content = 'rewritten' WHERE id = ${target};`,
      );
      const entries = await snapshot.entries(0, 100_000);
      await snapshot.close();
      let previous: string | undefined;
      for (const entry of entries) {
        const rewritten =
          entry.table === 'chat_messages' &&
          entry.rowId === target &&
          entry.digest === open.contentHash
            ? { ...entry, digest: forged }
            : { ...entry };
        if (previous !== undefined) rewritten.prevHash = previous;
        rewritten.hash = entryHash(rewritten);
        previous = rewritten.hash;
        if (rewritten.hash !== entry.hash) {
          statements.push(
            `UPDATE _ocs_audit SET digest = '${rewritten.digest}', prev_hash = '${rewritten.prevHash}', hash = '${rewritten.hash}' WHERE seq = ${entry.seq};`,
          );
        }
      }
      statements.push(`UPDATE _ocs_audit_head SET hash = '${previous}';`);
      statements.push('DELETE FROM _ocs_audit_checkpoints;');
    } finally {
      await opened.close();
    }
    tamper(warehouse, statements.join('\n'));

    // Trusting what sits beside the warehouse, nothing shows.
    const blind = await runCli(['audit', 'verify'], {
      ...env,
      OCS_AUDIT_SIGNING_KEY_FILE: '',
      OCS_AUDIT_CHECKPOINT_FILE: '',
      OCS_AUDIT: 'false',
    });
    expect(blind.code, blind.stderr).toBe(0);
    expect(blind.stdout).toContain('Audit chain intact');
    expect(blind.stdout).toContain('no checkpoint file given');

    // Against the checkpoint file shipped elsewhere, the rewrite is plain: the checkpoints are
    // gone from the warehouse, and the chain no longer passes through the signed head of run 2.
    const { result, report } = await verifyJson(env, keys);
    expect(result.code).toBe(3);
    expect(report.first?.kind).toBe('checkpoint_deleted');
    expect(report.problems.map((problem) => problem.kind)).toContain('chain_rewritten');
    expect(report.problems.find((problem) => problem.kind === 'chain_rewritten')?.detail).toMatch(
      /does not pass through the signed head of the checkpoint of run 2/,
    );

    // Checkpoints forged with another key are no better.
    const forger = nacl.sign.keyPair();
    const forgedKey = Buffer.from(forger.publicKey).toString('base64');
    const genuine = readFileSync(keys.checkpointFile, 'utf8').trim().split('\n');
    const head = tamper(warehouse, 'SELECT seq, hash FROM _ocs_audit_head;').trim().split('|');
    const forgedLines = genuine.map((line) => {
      const checkpoint = JSON.parse(line) as SignedCheckpoint;
      const body = { ...checkpoint, key: forgedKey };
      if (checkpoint.seq === Number(head[0])) body.head = head[1]!;
      const signature = Buffer.from(
        nacl.sign.detached(Buffer.from(checkpointText(body)), forger.secretKey),
      ).toString('base64');
      return canonicalJson({ ...body, signature });
    });
    const forgedFile = join(directory.path, 'forged.jsonl');
    writeFileSync(forgedFile, `${forgedLines.join('\n')}\n`);
    const againstKey = await verifyJson(env, keys, [
      '--public-key',
      keys.publicKeyFile,
      '--checkpoints',
      forgedFile,
    ]);
    expect(againstKey.result.code).toBe(3);
    expect(againstKey.report.first?.kind).toBe('checkpoint_unsigned');
  });

  const count = (sql: string) => Number(tamper(warehouse, sql).trim());

  it.each([
    ['sealed', 'audit'],
    ['reseal', 'audit'],
    ['sealed', 'history alone'],
  ] as const)(
    'sealed values the server seals afresh make no new version on a full refresh (%s policy, %s); unseal --in-place is refused',
    async (policy, keeping) => {
      // As the real server does: every export seals every value afresh.
      server.options.sealAfresh = true;
      if (keeping === 'history alone') {
        env = {
          ...syncEnv(server.url, warehouse.env),
          OCS_RESOURCES: RESOURCES.join(','),
          OCS_HISTORY: 'true',
        };
      }
      const archive = join(directory.path, 'archive-keys');
      const made = await runCli(['keygen', '--archive', '--out', archive], {});
      expect(made.code).toBe(0);
      const policyEnv = {
        OCS_SECRETS_DEFAULT: policy,
        OCS_ARCHIVE_PUBLIC_KEY: readFileSync(
          join(archive, 'ocs-archive-public.key'),
          'utf8',
        ).trim(),
      };
      await sync(policyEnv);
      const providers = count('SELECT count(*) FROM llm_providers;');
      const stored = tamper(warehouse, 'SELECT id, config FROM llm_providers ORDER BY id;');
      await sync(policyEnv, '--full-refresh');
      await sync(policyEnv, '--full-refresh');
      expect(count('SELECT count(*) FROM llm_providers__history;')).toBe(providers);
      expect(tamper(warehouse, 'SELECT id, config FROM llm_providers ORDER BY id;')).toBe(stored);
      // A row whose other fields changed takes the new sealed text with its new version.
      const [edited] = dataset.ids('llm_providers');
      dataset.edit('llm_providers', [edited!], { name: 'renamed' });
      await sync(policyEnv, '--full-refresh');
      expect(count('SELECT count(*) FROM llm_providers__history;')).toBe(providers + 1);
      const configs = (sql: string) => tamper(warehouse, sql).trim();
      expect(configs(`SELECT config FROM llm_providers WHERE id = ${edited};`)).not.toBe(
        configs(
          `SELECT config FROM llm_providers__history WHERE id = ${edited} AND _valid_to IS NOT NULL;`,
        ),
      );
      if (keeping === 'audit') await verify();
      if (policy === 'reseal') {
        const unseal = await runCli(
          ['unseal', '--archive-key', join(archive, 'ocs-archive-secret.key'), '--in-place'],
          { ...env, ...policyEnv },
        );
        expect(unseal.code).toBe(1);
        expect(unseal.stderr).toMatch(/Rewriting llm_providers.config is refused/);
      }
    },
  );

  it('schema changes (a new column, integer -> decimal -> json, number -> json, date-time -> text) leave every old digest as it was', async () => {
    const withCollections = { OCS_RESOURCES: [...RESOURCES, 'collections'].join(',') };
    await sync(withCollections);
    const [collection, otherCollection] = dataset.ids('collections');
    // A double past 2^53 with no fraction: its digits must read back the same after widening.
    dataset.edit('collections', [collection!], { search_dense_weight: 1e21 });
    // files and collections page by id: their edits arrive with a full refresh.
    await sync(withCollections, '--full-refresh');
    const hashes = (table: string) =>
      tamper(
        warehouse,
        `SELECT _version_id, _content_hash FROM ${table}__history ORDER BY _version_id;`,
      )
        .trim()
        .split('\n');
    const before = new Map(
      ['files', 'collections', 'chat_messages', 'chats'].map((table) => [table, hashes(table)]),
    );
    const [file, otherFile] = dataset.ids('files');
    const [message] = dataset.ids('chat_messages');
    const [chat] = dataset.ids('chats');
    dataset.edit('files', [file!], { content_size: 1.5 });
    dataset.edit('chats', [chat!], { brand_new_field: 'new' });
    await sync(withCollections, '--full-refresh');
    dataset.edit('files', [otherFile!], { content_size: 'a lot' });
    dataset.edit('collections', [otherCollection!], { search_dense_weight: 'heavy' });
    dataset.edit('chat_messages', [message!], { created_at: 'the day before yesterday' });
    await sync(withCollections, '--full-refresh');
    const widened = tamper(
      warehouse,
      "SELECT table_name, column_name, from_type, to_type FROM _ocs_schema_changes WHERE change IN ('widen_column', 'add_column') ORDER BY id;",
    );
    for (const change of [
      'files|content_size|integer|decimal',
      'files|content_size|decimal|json',
      'collections|search_dense_weight|number|json',
      'chat_messages|created_at|datetime|text',
    ]) {
      expect(widened).toContain(change);
    }
    expect(widened).toMatch(/chats\|brand_new_field\|\|/);
    for (const [table, old] of before) {
      expect(hashes(table).slice(0, old.length), table).toEqual(old);
    }
    await verify();
  });
});
