/**
 * Deletions under a chatbot choice (issue 35): a full refresh under an unchanged choice records
 * as deleted every row last served under it that the rows it serves still reach, whatever the
 * resource's scope and cursor kind, and nothing the server still has. The issue's own sequence
 * through the CLI (audit on), and a model of the server that deletes, edits and re-links rows
 * and changes the choice between syncs (more seeds in the .long.test.ts file).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { selectionKey } from '../src/export-api/selection.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { Row } from '../src/interfaces.js';
import { auditEnv, expectIntact, makeAuditKeys } from './audit-support.js';
import {
  idsInScope,
  SHARED_ROWS,
  scopedDataset,
  storedFlags,
  wouldServe,
  workingChatbots,
} from './chatbot-choice-support.js';
import { runDeletionModelSeeds } from './chatbot-choice-model.js';
import {
  createTestWarehouse,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  type TestWarehouse,
} from './support.js';

/** Several syncs per test on a busy machine: generous, never a goal. */
const TIMEOUT_MS = 300_000;

describe.each(splitDialects)('the sequence of issue 35 (%s)', (dialect) => {
  let server: FakeServer | undefined;
  let warehouse: TestWarehouse | undefined;
  let directory: ReturnType<typeof temporaryDirectory> | undefined;
  afterEach(async () => {
    await server?.close();
    await warehouse?.dispose();
    directory?.remove();
    server = warehouse = directory = undefined;
  });

  it(
    'records every deletion inside an unchanged choice the rows served still reach, and nothing else',
    async () => {
      // 26 resources with 4 rows or more inside the choice of its second chatbot, 14 of them shared.
      const dataset = scopedDataset(4, 12, SHARED_ROWS);
      server = await startFakeServer({
        dataset,
        teamPublicKeyPem: teamKeys().publicKey,
        chatbotChoice: { chosen: [] },
      });
      warehouse = await createTestWarehouse(dialect);
      directory = temporaryDirectory();
      const keys = await makeAuditKeys(directory.path);
      const env = { ...syncEnv(server.url, warehouse.env), ...auditEnv(keys), OCS_PAGE_SIZE: '50' };
      const sync = async (...args: string[]) => {
        const result = await runCli(['sync', ...args], env);
        expect(result.stderr).toBe('');
        expect(result.code, result.stdout).toBe(0);
      };
      const entries = server.manifest().entries.filter((entry) => entry.scope !== 'excluded');
      const flagsOf = async (resource: string) =>
        new Map((await storedFlags(warehouse!, resource)).map((row) => [row.id, row]));

      // 1. The whole team. 2. One chatbot of three: an incremental sync, then a full refresh.
      await sync();
      const a = workingChatbots(dataset)[1];
      server.choice!.set([a!]);
      const key = selectionKey([a!]);
      await sync();
      await sync('--full-refresh');
      for (const { resource, model } of entries) {
        const inScope = idsInScope(dataset, [a!], resource, model);
        for (const [id, row] of await flagsOf(resource)) {
          expect(row.deleted, `${resource} ${id}`).toBe(false);
          expect(row.outOfScope, `${resource} ${id}`).toBe(!inScope.has(id));
          // Served again unchanged or not, a row served under the choice says so.
          if (inScope.has(id)) expect(row.servedUnder, `${resource} ${id}`).toBe(key);
        }
      }

      // 3. Two rows deleted inside the choice in each resource that has at least 4 there, and
      //    one edited in each resource paged by id.
      const removed: Array<{ resource: string; model: string; row: Row }> = [];
      for (const { resource, model, cursor } of entries) {
        const ids = [...idsInScope(dataset, [a!], resource, model)];
        if (ids.length < 4) continue;
        for (const id of ids.slice(0, 2))
          removed.push({ resource, model, row: rowOf(dataset, resource, id) });
        dataset.remove(resource, ids.slice(0, 2));
        if (cursor === 'pk') dataset.edit(resource, [ids[2]!]);
      }
      const resources = new Set(removed.map(({ resource }) => resource));
      expect(resources.size).toBeGreaterThanOrEqual(20);
      const shared = entries.filter((entry) => entry.scope === 'referenced');
      expect(shared.filter((entry) => resources.has(entry.resource)).length).toBeGreaterThan(10);

      // An incremental sync never records a deletion: what it no longer sees is out of scope.
      await sync();
      for (const { resource } of removed) {
        for (const [id, row] of await flagsOf(resource)) {
          expect(row.deleted, `${resource} ${id}`).toBe(false);
        }
      }

      // 4. A full refresh under the same choice.
      await sync('--full-refresh');
      const live: string[] = [];
      let recorded = 0;
      for (const { resource, model, row } of removed) {
        const stored = (await flagsOf(resource)).get(String(row.id))!;
        const reached = wouldServe(dataset, [a!], resource, model, row);
        if (stored.deleted) recorded += 1;
        else live.push(`${resource} ${String(row.id)}`);
        // Deleted exactly when the rows served still reach it; else out of scope (a row the
        // incremental sync found missing keeps when it left, deleted or not).
        expect(stored.deleted, `${resource} ${String(row.id)}`).toBe(reached);
        if (!reached) expect(stored.outOfScope, `${resource} ${String(row.id)}`).toBe(true);
      }
      // The rows left live are those whose every way into the choice was deleted with them (a
      // provider and the collections naming it): nothing tells them from rows the choice left.
      expect(live.length, live.join(', ')).toBeLessThan(removed.length / 5);
      expect(recorded).toBe(removed.length - live.length);
      for (const { resource } of entries) {
        const exists = new Set(dataset.ids(resource).map(String));
        for (const [id, row] of await flagsOf(resource)) {
          if (exists.has(id)) expect(row.deleted, `${resource} ${id} is on the server`).toBe(false);
        }
      }
      await expectIntact(env, keys);

      // The whole team's full refresh settles what the choice could not tell.
      server.choice!.set([]);
      await sync('--full-refresh');
      for (const { resource, row } of removed) {
        expect((await flagsOf(resource)).get(String(row.id))?.deleted, resource).toBe(true);
      }
      await expectIntact(env, keys);
    },
    TIMEOUT_MS,
  );
});

describe.each(splitDialects)(
  'deletions under a chatbot choice, held to a model of the server (%s)',
  (dialect) => {
    // A seed that meets every case (the long suite runs many more).
    it(
      'deletes, edits and re-links rows and changes the choice between syncs (one seed)',
      () => runDeletionModelSeeds(dialect, [4], 6),
      TIMEOUT_MS,
    );
  },
);

function rowOf(dataset: FakeDataset, resource: string, id: string): Row {
  return dataset.rows(resource).find((row) => String(row.id) === id)!;
}
