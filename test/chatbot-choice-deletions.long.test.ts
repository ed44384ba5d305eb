/**
 * The model of chatbot-choice-deletions.test.ts over many seeds: deletions, edits, re-links and
 * choice changes between syncs, the warehouse held to the server's truth after each run.
 */
import { describe, expect, it } from 'vitest';
import { runDeletionModel, type ModelCounts } from './chatbot-choice-model.js';
import { testDialects } from './support.js';

const SEEDS = 24;
const STEPS = 10;

describe.each(testDialects)('deletions under a chatbot choice, many seeds (%s)', (dialect) => {
  it(`holds for ${SEEDS} seeds of ${STEPS} syncs each`, async () => {
    const total: Partial<ModelCounts> = {};
    for (let seed = 1; seed <= SEEDS; seed += 1) {
      const counts = await runDeletionModel(dialect, seed, STEPS);
      for (const [name, count] of Object.entries(counts) as Array<[keyof ModelCounts, number]>) {
        total[name] = (total[name] ?? 0) + count;
      }
    }
    for (const [name, count] of Object.entries(total)) expect(count, name).toBeGreaterThan(0);
  }, 3_600_000);
});
