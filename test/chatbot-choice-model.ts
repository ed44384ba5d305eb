/**
 * A model of a server whose team changes its chatbot choice and its data between syncs, and the
 * warehouse held to it after each run: what a sync under a choice must mark deleted, out of
 * scope or live (docs/chatbot-choice.md, "When a deletion is recorded"). Shared by
 * chatbot-choice-deletions.test.ts (a few seeds) and its long variant (many).
 */
import { expect } from 'vitest';
import { FULL_REFRESH_ALL } from '../src/sync/engine.js';
import { selectionKey } from '../src/export-api/selection.js';
import { SeededRandom } from '../src/fake-server/random.js';
import type { DeleteMode, Row } from '../src/interfaces.js';
import {
  deleteAsServer,
  idsInScope,
  openScopedBed,
  storedFlags,
  wouldServe,
  type ScopedBed,
} from './chatbot-choice-support.js';

/**
 * References a team may point elsewhere (a chatbot's provider or pipeline, a node's collection,
 * a session's participant, ...): moving one moves rows into or out of the choice without any row
 * being deleted. A row's link to what owns it (a session's chatbot, a message's chat) is fixed
 * when it is created and is not moved.
 */
const RELINKS: ReadonlyArray<readonly [resource: string, field: string, target: string]> = [
  ['chatbots', 'pipeline', 'pipelines'],
  ['chatbots', 'consent_form', 'consent_forms'],
  ['chatbots', 'voice_provider', 'voice_providers'],
  ['chatbots', 'trace_provider', 'trace_providers'],
  ['chatbots', 'llm_provider', 'llm_providers'],
  ['pipeline_nodes', 'collection', 'collections'],
  ['pipeline_nodes', 'llm_provider', 'llm_providers'],
  ['pipeline_nodes', 'llm_provider_model', 'llm_provider_models'],
  ['pipeline_nodes', 'source_material', 'source_materials'],
  ['collections', 'llm_provider', 'llm_providers'],
  ['collections', 'embedding_provider_model', 'embedding_provider_models'],
  ['chatbot_channels', 'messaging_provider', 'messaging_providers'],
  ['sessions', 'participant', 'participants'],
  ['participant_data', 'participant', 'participants'],
  ['scheduled_messages', 'participant', 'participants'],
  ['collection_files', 'file', 'files'],
];

/** Owned resources whose rows carry no link to their chatbot: reached only by who names them. */
const UNLINKED_OWNED: ReadonlySet<string> = new Set(['chats', 'event_actions']);

/** What the runs of one seed went through, summed by the caller to show every case happened. */
export interface ModelCounts {
  fullRefreshChecks: number;
  choiceChanges: number;
  deletionsRecorded: number;
  /** Of those, under a choice in resources shared between chatbots (`referenced`). */
  sharedDeletionsRecorded: number;
  /**
   * Of those, under a choice in owned resources whose rows name no chatbot and nothing that leads
   * to one (a chat is named by its session, an event action by its trigger).
   */
  unlinkedOwnedDeletionsRecorded: number;
  /** Rows gone from the server that nothing served reaches any more: left out of scope. */
  goneUnprovable: number;
  /** Rows a re-link took out of the choice under an unchanged choice. */
  relinkedOut: number;
}

/**
 * Runs the model for each seed, then holds that every case happened across them: full refreshes
 * checked, choices changed, deletions recorded (shared ones, and owned ones with no link to their
 * chatbot, under a choice), rows gone that nothing served reaches, rows re-linked out of an
 * unchanged choice.
 */
export async function runDeletionModelSeeds(
  dialect: 'sqlite' | 'postgres',
  seeds: readonly number[],
  steps: number,
): Promise<void> {
  const total = new Map<string, number>();
  for (const seed of seeds) {
    const counts = await runDeletionModel(dialect, seed, steps);
    for (const [name, count] of Object.entries(counts)) {
      total.set(name, (total.get(name) ?? 0) + count);
    }
  }
  for (const [name, count] of total) expect(count, name).toBeGreaterThan(0);
}

export async function runDeletionModel(
  dialect: 'sqlite' | 'postgres',
  seed: number,
  steps: number,
): Promise<ModelCounts> {
  const counts: ModelCounts = {
    fullRefreshChecks: 0,
    choiceChanges: 0,
    deletionsRecorded: 0,
    sharedDeletionsRecorded: 0,
    unlinkedOwnedDeletionsRecorded: 0,
    goneUnprovable: 0,
    relinkedOut: 0,
  };
  const random = new SeededRandom(seed * 7_919 + 17);
  const deletes: DeleteMode = seed % 2 === 0 ? 'remove' : 'mark';
  const bed = await openScopedBed(dialect, { seed: seed + 200 });
  try {
    const ids = bed.chatbots();
    bed.server.choice!.set([ids[0]!]);
    expect((await bed.sync({ deletes })).status).toBe('ok');
    /** Every row ever stored: with `remove`, a deleted row is one no longer in its table. */
    const everStored = new Set<string>();
    let deletedBefore = await deletedRows(bed, deletes, everStored);
    for (let step = 0; step < steps; step += 1) {
      const label = `${dialect} seed ${seed} step ${step}`;
      if (random.chance(0.3)) {
        changeChoice(bed, random, ids);
        counts.choiceChanges += 1;
      }
      changeData(bed, random, counts);
      const fullRefresh = random.chance(0.6);
      const before = new Map(bed.lastServed);
      let settled = 0;
      const report = await bed.sync({
        fullRefresh: fullRefresh ? FULL_REFRESH_ALL : undefined,
        deletes,
        pageSize: random.pick([7, 40]),
        events: { onMissingSettled: ({ deleted }) => (settled += deleted) },
      });
      expect(report.status, label).toBe('ok');
      const key = bed.server.choice!.key();
      expect(report.choice?.key, label).toBe(key);
      const deleted = await deletedRows(bed, deletes, everStored);
      const newlyDeleted = [...deleted].filter((row) => !deletedBefore.has(row));
      counts.deletionsRecorded += newlyDeleted.length;
      const shared = new Set(
        bed.server
          .manifest()
          .entries.filter((entry) => entry.scope === 'referenced')
          .map((entry) => entry.resource),
      );
      if (key !== 'all') {
        const of = (resources: ReadonlySet<string>) =>
          newlyDeleted.filter((row) => resources.has(row.split('/')[0]!)).length;
        counts.sharedDeletionsRecorded += of(shared);
        counts.unlinkedOwnedDeletionsRecorded += of(UNLINKED_OWNED);
      }
      // The report and the events count what the warehouse holds.
      const reported = report.resources.reduce((sum, resource) => sum + resource.deleted, 0);
      expect(reported, label).toBe(newlyDeleted.length);
      if (key !== 'all') expect(settled, label).toBe(reported);
      for (const row of newlyDeleted) {
        const [resource, id] = row.split('/');
        // Nothing the server still has is ever marked deleted.
        expect(bed.dataset.ids(resource!).map(String), `${label}: ${row} deleted`).not.toContain(
          id,
        );
        // Only a full refresh deletes; under a choice, only rows last served under it.
        expect(fullRefresh, `${label}: ${row} deleted by an incremental run`).toBe(true);
        if (key !== 'all') {
          expect(before.get(row)?.key, `${label}: ${row} left another choice`).toBe(key);
        }
      }
      if (fullRefresh) {
        const unprovable = await checkFullRefresh(bed, label, before);
        counts.goneUnprovable += unprovable;
        counts.fullRefreshChecks += 1;
      }
      deletedBefore = deleted;
    }
    return counts;
  } finally {
    await bed.close();
  }
}

/** Widens, narrows, clears or picks anew (never the same key twice in a row). */
function changeChoice(bed: ScopedBed, random: SeededRandom, ids: readonly string[]): void {
  const current = bed.server.choice!.current();
  const unchosen = ids.filter((id) => !current.includes(id));
  const options = [
    () => (unchosen.length > 0 ? [...current, random.pick(unchosen)] : []),
    () => (current.length > 1 ? current.slice(1) : ids.filter((id) => id !== current[0])),
    () => (current.length > 0 ? [] : [random.pick(ids)]),
    () => ids.filter(() => random.chance(0.5)),
  ];
  let next = random.pick(options)();
  if (selectionKey(next) === selectionKey(current)) next = current.length > 0 ? [] : [ids[0]!];
  bed.server.choice!.set(next);
}

/** Deletes (as the server's database does), edits, re-links and inserts, in and out of the choice. */
function changeData(bed: ScopedBed, random: SeededRandom, counts: ModelCounts): void {
  const { dataset } = bed;
  const chosen = bed.server.choice!.current();
  const resources = bed.server
    .manifest()
    .entries.filter((entry) => entry.scope !== 'excluded' && entry.resource !== 'chatbots');
  for (let n = random.int(2, 5); n > 0; n -= 1) {
    const { resource, model } = random.pick(resources);
    const inScope = [...idsInScope(dataset, chosen, resource, model)];
    const all = dataset.ids(resource).map(String);
    const pool = inScope.length > 0 && random.chance(0.7) ? inScope : all;
    if (pool.length === 0) continue;
    deleteAsServer(dataset, resource, [random.pick(pool)], random.chance(0.5));
  }
  for (let n = random.int(0, 2); n > 0; n -= 1) {
    const { resource } = random.pick(resources);
    const all = dataset.ids(resource);
    if (all.length > 0) dataset.edit(resource, [random.pick(all)]);
  }
  for (let n = random.int(1, 3); n > 0; n -= 1) {
    const [resource, field, target] = random.pick(RELINKS);
    const rows = dataset.ids(resource);
    const targets = dataset.ids(target);
    if (rows.length === 0) continue;
    const to = targets.length > 0 && random.chance(0.8) ? random.pick(targets) : null;
    const id = random.pick(rows);
    const row = dataset.rows(resource).find((candidate) => candidate.id === id)!;
    const spec = dataset.fixture?.find((entry) => entry.resource === resource)?.fields[field];
    if (to === null && !spec?.nullable) continue;
    const model = bed.server.manifest().entries.find((entry) => entry.resource === target)!.model;
    const named = String(row[field]);
    const wasIn = idsInScope(dataset, chosen, target, model).has(named);
    dataset.edit(resource, [id], { [field]: to });
    if (wasIn && !idsInScope(dataset, chosen, target, model).has(named)) counts.relinkedOut += 1;
  }
  if (random.chance(0.3)) {
    const chatbot = dataset.rows('chatbots').find((row) => row.working_version === null);
    dataset.insert('chatbots', [{ working_version: chatbot!.id }]);
  }
  dataset.insert('sessions', random.int(0, 2));
  dataset.insert('chat_messages', random.int(0, 3));
  dataset.insert('participants', random.int(0, 1));
}

/** Rows marked deleted (`mark`), or stored once and gone from their table (`remove`). */
async function deletedRows(
  bed: ScopedBed,
  deletes: DeleteMode,
  everStored: Set<string>,
): Promise<Set<string>> {
  const deleted = new Set<string>();
  for (const { resource } of bed.server.manifest().entries) {
    const present = new Set<string>();
    for (const row of await storedFlags(bed.stored, resource)) {
      const key = `${resource}/${row.id}`;
      everStored.add(key);
      present.add(key);
      if (row.deleted) deleted.add(key);
    }
    if (deletes === 'remove') {
      for (const key of everStored) {
        if (key.startsWith(`${resource}/`) && !present.has(key)) deleted.add(key);
      }
    }
  }
  return deleted;
}

/**
 * After a full refresh: live and in scope is exactly what the server serves now; the rest is out
 * of scope or deleted; a row gone from the server that it last served under this same choice is
 * deleted when it is owned, or when the rows served now still reach it (the rest of the gone:
 * out of scope, for a whole-team full refresh to settle). Returns how many gone rows could not be
 * told deleted.
 */
async function checkFullRefresh(
  bed: ScopedBed,
  label: string,
  before: ReadonlyMap<string, { key: string; row: Row }>,
): Promise<number> {
  const { dataset } = bed;
  const chosen = bed.server.choice!.current();
  const key = bed.server.choice!.key();
  let unprovable = 0;
  for (const { resource, model, scope } of bed.server.manifest().entries) {
    if (scope === 'excluded' && key !== 'all') continue;
    const inScope = idsInScope(dataset, chosen, resource, model);
    const exists = new Set(dataset.ids(resource).map(String));
    const stored = await storedFlags(bed.stored, resource);
    const storedIds = new Set(stored.map((row) => row.id));
    for (const id of inScope) {
      expect(storedIds.has(id), `${label}: ${resource} ${id} served, not stored`).toBe(true);
    }
    for (const row of stored) {
      const at = `${label}: ${resource} ${row.id}`;
      if (inScope.has(row.id)) {
        expect({ deleted: row.deleted, outOfScope: row.outOfScope }, at).toEqual({
          deleted: false,
          outOfScope: false,
        });
        continue;
      }
      if (row.deleted) continue;
      expect(row.outOfScope, `${at} not served, yet neither deleted nor out of scope`).toBe(true);
      if (exists.has(row.id)) continue;
      // Gone from the server and not recorded deleted: only a shared row nothing served reaches.
      const last = before.get(`${resource}/${row.id}`);
      expect(key, `${at}: a whole-team full refresh leaves a gone row live`).not.toBe('all');
      if (last?.key === key) {
        expect(scope, `${at}: an owned row gone under an unchanged choice left live`).not.toBe(
          'owned',
        );
        expect(wouldServe(dataset, chosen, resource, model, last.row), `${at} gone`).toBe(false);
      }
      unprovable += 1;
    }
  }
  return unprovable;
}
