/**
 * The step after every walk of a full refresh under a chatbot choice: each resource walked
 * completely under the choice the run ended with settles the rows it did not see, in manifest
 * order (a parent before its rows). Those last served under this choice that are owned, or that
 * the rows served prove gone, are deleted (choice-reach.ts); the rest are marked out of scope. It
 * waits for every walk because the proofs read what the other walks served.
 */
import type { DeleteMode, ManifestEntry, StageProgress, Warehouse } from '../interfaces.js';
import type { Logger } from '../log.js';
import { deletionProofs } from './choice-reach.js';

/** What a resource's report carries of the settling. */
export interface SettledReport {
  resource: string;
  status: string;
  deleted: number;
  outOfScope?: number;
}

export interface SettleUnderChoice {
  warehouse: Warehouse;
  runId: number;
  /** The key of the choice the run ended under. */
  key: string;
  /** The manifest, in its order. */
  entries: readonly ManifestEntry[];
  /** Full refreshes under a choice that left their missing rows to settle: resource -> key. */
  awaiting: ReadonlyMap<string, string>;
  deletes: DeleteMode;
  historyFor(resource: string): boolean;
  logger: Logger;
  progress(progress: StageProgress): void;
  onSettled?(info: { resource: string; deleted: number; outOfScope: number }): void;
  throwIfAborted(): void;
}

/** Settles each resource of `reports` that waits under `key` and ended `ok`; updates its report. */
export async function settleMissingUnderChoice(
  reports: readonly SettledReport[],
  step: SettleUnderChoice,
): Promise<void> {
  const complete = new Set(
    reports
      .filter((report) => report.status === 'ok' && step.awaiting.get(report.resource) === step.key)
      .map((report) => report.resource),
  );
  for (const entry of step.entries) {
    const report = reports.find((candidate) => candidate.resource === entry.resource);
    if (!report || !complete.has(entry.resource)) continue;
    step.throwIfAborted();
    const stage = `marking rows of ${entry.resource} the chatbot choice no longer serves`;
    step.progress({ stage, done: 0, unit: 'rows' });
    const marked = await step.warehouse.markMissingUnderChoice(entry.resource, step.runId, {
      selection: step.key,
      proofs: deletionProofs(entry, step.entries, complete),
      mode: step.deletes,
      history: step.historyFor(entry.resource),
    });
    report.deleted = marked.deleted;
    report.outOfScope = marked.outOfScope;
    step.progress({ stage, done: marked.deleted + marked.outOfScope, unit: 'rows' });
    step.onSettled?.({ resource: entry.resource, ...marked });
    step.logger.debug(
      { resource: entry.resource, deleted: marked.deleted, outOfScope: marked.outOfScope },
      `${entry.resource}: missing rows settled under the chatbot choice`,
    );
  }
}
