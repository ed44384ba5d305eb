/**
 * The model of chatbot-choice-deletions.test.ts over many seeds: deletions, edits, re-links and
 * choice changes between syncs, the warehouse held to the server's truth after each run.
 */
import { describe, it } from 'vitest';
import { runDeletionModelSeeds } from './chatbot-choice-model.js';
import { testDialects } from './support.js';

const SEEDS = Array.from({ length: 16 }, (_, index) => index + 1);
const STEPS = 10;

describe.each(testDialects)('deletions under a chatbot choice, many seeds (%s)', (dialect) => {
  it(
    `holds for ${SEEDS.length} seeds of ${STEPS} syncs each`,
    () => runDeletionModelSeeds(dialect, SEEDS, STEPS),
    3_600_000,
  );
});
