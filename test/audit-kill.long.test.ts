/**
 * The audit chain commits with what it describes: a real `ocs-sync sync` process with audit on,
 * killed (SIGKILL) while pages commit (SQLite's writer thread; PostgreSQL with resources
 * committing at once), while file contents are recorded, and run through injected faults and
 * full refreshes, leaves a chain that verifies, and the next run goes on from it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  expectWarehouseEqualsSource,
  runCli,
  teamKeys,
  testDialects,
  type TestWarehouse,
} from './support.js';
import {
  expectIntact as verifiedIntact,
  killSyncWhen,
  openAuditBed,
  tamper,
  type AuditBed,
  type AuditKeys,
  type KillAt,
} from './audit-support.js';

const RESOURCES = ['llm_providers', 'files', 'participants', 'chats', 'chat_messages'];

describe.each(testDialects)('audit chain through kills and faults (%s)', (dialect) => {
  let bed: AuditBed;
  let server: FakeServer;
  let dataset: FakeDataset;
  let warehouse: TestWarehouse;
  let keys: AuditKeys;
  let env: Record<string, string>;

  beforeEach(async () => {
    bed = await openAuditBed(dialect, {
      dataset: { rowsPerResource: 40, seed: 17 },
      resources: RESOURCES,
      pageSize: 5,
    });
    ({ server, dataset, warehouse, keys, env } = bed);
  });
  afterEach(() => bed.close());

  const killedSync = (killAt: KillAt, extra: Record<string, string> = {}, args: string[] = []) =>
    killSyncWhen(bed, env, killAt, extra, args);

  const expectIntact = async () => {
    const report = await verifiedIntact(env, keys);
    // Sequence numbers are gap-free and the head is the last entry.
    const [count, max, head] = tamper(
      warehouse,
      'SELECT count(*), max(seq), (SELECT seq FROM _ocs_audit_head) FROM _ocs_audit;',
    )
      .trim()
      .split('|')
      .map(Number);
    expect(count).toBe(max);
    expect(head).toBe(max);
    return report;
  };

  it('SIGKILL while pages commit, then again in a full refresh: the chain verifies each time and the next run goes on from it', async () => {
    await killedSync({ resource: 'chat_messages', page: 3 });
    await expectIntact();
    dataset.edit('chat_messages', dataset.ids('chat_messages').slice(0, 10));
    dataset.remove('participants', dataset.ids('participants').slice(0, 3));
    await killedSync({ resource: 'chat_messages', page: 4 }, {}, ['--full-refresh']);
    await expectIntact();
    const rerun = await runCli(['sync', '--full-refresh'], env);
    expect(rerun.code, rerun.stderr).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: RESOURCES });
    const report = await expectIntact();
    expect(
      Number(tamper(warehouse, "SELECT count(*) FROM _ocs_audit WHERE operation = 'delete';")),
    ).toBe(3);
    expect(report.checkpoints.checked).toBeGreaterThan(0);
  });

  it('resources committing at once (concurrency 3) keep one gap-free chain through a kill', async () => {
    const concurrent = { OCS_CONCURRENCY: '3' };
    await killedSync({ resource: 'chat_messages', page: 5 }, concurrent);
    await expectIntact();
    dataset.insert('chats', 20);
    dataset.insert('chat_messages', 30);
    const rerun = await runCli(['sync'], { ...env, ...concurrent });
    expect(rerun.code, rerun.stderr).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: RESOURCES });
    await expectIntact();
  });

  it('SIGKILL while file contents are recorded', async () => {
    await killedSync({ file: 4 });
    await expectIntact();
    const rerun = await runCli(['sync'], env);
    expect(rerun.code, rerun.stderr).toBe(0);
    await expectIntact();
  });

  it('an archive built through injected faults, retries and full refreshes verifies clean', async () => {
    await server.close();
    server = bed.server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      randomFaults: {
        seed: 3,
        rate: 0.25,
        kinds: [
          { kind: 'status', status: 503 },
          { kind: 'status', status: 502, html: true },
          { kind: 'drop' },
          { kind: 'truncate' },
        ],
      },
    });
    const quick = join(bed.directory.path, 'quick.yaml');
    writeFileSync(
      quick,
      'http:\n  min_retry_delay_ms: 5\n  max_retry_delay_seconds: 1\n  max_attempts: 20\n',
    );
    env = { ...env, OCS_BASE_URL: server.url, OCS_CONFIG: quick };
    for (let round = 0; round < 3; round += 1) {
      dataset.edit('chat_messages', dataset.ids('chat_messages').slice(round * 5, round * 5 + 5));
      dataset.remove('chats', dataset.ids('chats').slice(0, 1));
      const result = await runCli(['sync', ...(round === 1 ? ['--full-refresh'] : [])], env);
      expect(result.code, result.stdout + result.stderr).toBe(0);
    }
    expect(server.requests.filter((request) => request.fault !== undefined).length).toBeGreaterThan(
      5,
    );
    const last = await runCli(['sync', '--full-refresh'], env);
    expect(last.code, last.stderr).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset, { resources: RESOURCES });
    await expectIntact();
  });
});
