/**
 * Following a chatbot choice, randomized (the long suite): on every dialect, a choice changed at
 * any request of many seeded runs never mixes two choices, and a seeded model of the server
 * (rows added, edited and deleted, choices changed between and within runs, full refreshes) never
 * loses a row the server still has nor marks one deleted that it still has. The deterministic
 * cases are in chatbot-choice.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { FULL_REFRESH_ALL } from '../src/sync/engine.js';
import { selectionKey } from '../src/export-api/selection.js';
import { SeededRandom } from '../src/fake-server/random.js';
import { deleteAsServer, scopedBeds, storedFlags } from './chatbot-choice-support.js';
import { sourceRowsAsStored, testDialects } from './support.js';

/** Many runs in one test: generous, so a busy machine slows them without failing them. */
const PROPERTY_TEST_TIMEOUT_MS = 600_000;

describe.each(testDialects)('following a chatbot choice, randomized (%s)', (dialect) => {
  const { open, inScope, close: closeBed } = scopedBeds(dialect);

  it(
    'a choice change at any request never mixes two choices (many seeds)',
    async () => {
      let changedMidRun = 0;
      for (let seed = 1; seed <= 8; seed += 1) {
        const random = new SeededRandom(seed * 7919);
        const current = await open({ seed });
        const ids = current.chatbots();
        const subset = () => ids.filter(() => random.chance(0.5));
        const first = subset();
        let second = subset();
        if (selectionKey(first) === selectionKey(second))
          second = first.length > 0 ? [] : [ids[0]!];
        current.server.choice!.set(first);
        current.server.choice!.changeAfter(random.int(3, 40), second);
        const report = await current.sync({ pageSize: 3 });
        expect(report.status, `seed ${seed}`).toBe('ok');
        expect(report.choice?.key).toBe(selectionKey(second));
        if (current.server.requests.some((request) => request.status === 409)) changedMidRun += 1;
        const keys = new Map([
          [selectionKey(first), first],
          [selectionKey(second), second],
        ]);
        for (const { resource, scope } of current.server.manifest().entries) {
          const rows = await storedFlags(current.stored, resource);
          for (const row of rows) {
            expect(row.deleted, `seed ${seed} ${resource} ${row.id}`).toBe(false);
            const chosen = keys.get(row.servedUnder ?? '');
            expect(
              chosen,
              `seed ${seed} ${resource} ${row.id} served under ${row.servedUnder}`,
            ).toBeDefined();
            // A page is stored under the choice it was requested with: its rows are in that scope.
            expect(
              inScope(current, chosen!, resource).has(row.id),
              `seed ${seed} ${resource} ${row.id}`,
            ).toBe(true);
          }
          if (scope === 'excluded' && second.length > 0) continue;
          const stored = new Set(rows.map((row) => row.id));
          for (const id of inScope(current, second, resource)) {
            expect(stored.has(id), `seed ${seed}: ${resource} ${id} of the new choice`).toBe(true);
          }
          // A cursor says the choice it was committed under (an empty walk commits none).
          const state = await current.warehouse.bookkeeping.getResourceState(resource);
          if (state?.cursor) expect(keys.has(state.cursorSelection ?? ''), resource).toBe(true);
        }
        await closeBed();
      }
      // The change lands in the middle of a walk (a 409), not only between runs.
      expect(changedMidRun).toBeGreaterThanOrEqual(6);
    },
    PROPERTY_TEST_TIMEOUT_MS,
  );

  it(
    'holds every row the server served and still has, and marks only real deletions (randomized)',
    async () => {
      const exercised = { fullRefreshChecks: 0, changedMidRun: 0, deletionsMarked: 0 };
      for (let seed = 1; seed <= 5; seed += 1) {
        const random = new SeededRandom(seed * 104_729);
        const current = await open({ seed: seed + 100 });
        const check = async (label: string, fullRefreshOk: boolean) => {
          const chosen = current.server.choice!.current();
          const effective = current.server.choice!.exportable().map((chatbot) => chatbot.public_id);
          for (const { resource, scope, secret } of current.server.manifest().entries) {
            const rows = await storedFlags(current.stored, resource);
            const byId = new Map(rows.map((row) => [row.id, row]));
            const exists = new Set(current.dataset.ids(resource).map(String));
            for (const key of current.served) {
              const [table, id] = key.split('/');
              if (table !== resource || !exists.has(id!)) continue;
              const row = byId.get(id!);
              expect(row, `${label}: ${resource} ${id} was served and still exists`).toBeDefined();
              expect(row!.deleted, `${label}: ${resource} ${id} marked deleted`).toBe(false);
            }
            for (const row of rows) {
              if (row.deleted) {
                expect(exists.has(row.id), `${label}: ${resource} ${row.id} deleted wrongly`).toBe(
                  false,
                );
              }
            }
            if (!fullRefreshOk || (scope === 'excluded' && effective.length > 0)) continue;
            const wanted = inScope(current, chosen, resource);
            const live = new Set(rows.filter((r) => !r.deleted && !r.outOfScope).map((r) => r.id));
            expect(live, `${label}: ${resource} in scope after a full refresh`).toEqual(wanted);
            if (!secret && (resource === 'sessions' || resource === 'chat_messages')) {
              const stored = (await current.stored.readTable(resource)).filter((row) =>
                wanted.has(String(row.id)),
              );
              const source = sourceRowsAsStored(current.dataset, resource).filter((row) =>
                wanted.has(String(row.id)),
              );
              expect(stored, `${label}: ${resource} content`).toEqual(source);
            }
          }
        };
        for (let step = 0; step < 9; step += 1) {
          const label = `seed ${seed} step ${step}`;
          const ids = current.chatbots();
          const choose = () => (random.chance(0.25) ? [] : ids.filter(() => random.chance(0.5)));
          current.server.choice!.set(choose());
          if (random.chance(0.3)) {
            const chatbot = current.dataset
              .rows('chatbots')
              .find((row) => row.public_id === ids[0]);
            current.dataset.insert('chatbots', [{ working_version: chatbot!.id }]);
          }
          current.dataset.insert('sessions', random.int(0, 3));
          current.dataset.insert('chat_messages', random.int(0, 4));
          current.dataset.insert('participants', random.int(0, 2));
          for (const resource of ['sessions', 'chat_messages', 'participants', 'users']) {
            const existing = current.dataset.ids(resource);
            if (existing.length > 2 && random.chance(0.6)) {
              current.dataset.edit(resource, [random.pick(existing)]);
            }
            if (existing.length > 4 && random.chance(0.4)) {
              // As the server deletes: a session takes its chat and what hangs under it along (a
              // user, whom every chatbot names as its owner, only goes alone).
              const id = String(random.pick(existing));
              if (resource === 'users') current.dataset.remove(resource, [id]);
              else deleteAsServer(current.dataset, resource, [id], false);
            }
          }
          if (random.chance(0.3)) current.server.choice!.changeAfter(random.int(3, 60), choose());
          const fullRefresh = random.chance(0.4);
          current.server.requests.length = 0;
          const report = await current.sync({
            fullRefresh: fullRefresh ? FULL_REFRESH_ALL : undefined,
            pageSize: random.int(2, 6),
          });
          expect(['ok', 'partial'], label).toContain(report.status);
          if (current.server.requests.some((request) => request.status === 409)) {
            exercised.changedMidRun += 1;
          }
          exercised.deletionsMarked += report.resources.reduce((sum, r) => sum + r.deleted, 0);
          const settled = fullRefresh && report.status === 'ok';
          if (settled && report.choice?.key === current.server.choice!.key()) {
            exercised.fullRefreshChecks += 1;
          }
          // A change that came after the run's last request waits for the next run.
          await check(
            label,
            fullRefresh &&
              report.status === 'ok' &&
              report.choice?.key === current.server.choice!.key(),
          );
        }
        await closeBed();
      }
      expect(exercised.fullRefreshChecks).toBeGreaterThan(3);
      expect(exercised.changedMidRun).toBeGreaterThan(1);
      expect(exercised.deletionsMarked).toBeGreaterThan(0);
    },
    PROPERTY_TEST_TIMEOUT_MS,
  );
});
