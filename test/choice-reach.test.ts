/**
 * The deletion proofs under a chatbot choice (src/sync/choice-reach.ts): what they are for each
 * kind of resource, that they reach exactly the rows the fake server's choice serves, and that the
 * links they follow are fields of the real export.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scopeClassOfModel } from '../src/fake-server/chatbot-scope.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import type { DeletionProof, ManifestEntry, Row } from '../src/interfaces.js';
import { deletionProofs } from '../src/sync/choice-reach.js';
import {
  SHARED_ROWS,
  idsInScope,
  scopedDataset,
  workingChatbots,
} from './chatbot-choice-support.js';
import { SHARED_EXPORT_DIR, hasSharedExport } from './support.js';

const entry = (resource: string, model: string, scope: string | undefined): ManifestEntry => ({
  resource,
  model,
  cursor: 'pk',
  secret: false,
  ...(scope === undefined ? {} : { scope }),
});

describe('the deletion proofs of a resource', () => {
  const manifest = [
    entry('users', 'users.customuser', 'referenced'),
    entry('llm_providers', 'service_providers.llmprovider', 'referenced'),
    entry('pipelines', 'pipelines.pipeline', 'referenced'),
    entry('pipeline_nodes', 'pipelines.node', 'referenced'),
    entry('chatbots', 'experiments.experiment', 'owned'),
    entry('chats', 'chat.chat', 'owned'),
    entry('sessions', 'experiments.experimentsession', 'owned'),
    entry('chat_messages', 'chat.chatmessage', 'owned'),
  ];
  const proofs = (resource: string, complete: string[] = []) =>
    deletionProofs(
      manifest.find((candidate) => candidate.resource === resource)!,
      manifest,
      new Set(complete),
    );

  it('takes every missing row of a team-wide resource for deleted', () => {
    expect(proofs('users')).toEqual([{ kind: 'every_row' }]);
  });

  it('takes a missing row of an owned resource for deleted, whatever links it has, as the server classes it', () => {
    for (const resource of ['chatbots', 'chats', 'sessions', 'chat_messages']) {
      expect(proofs(resource), resource).toEqual([{ kind: 'owned' }]);
    }
    // A model the server calls owned is owned (a table of ours cannot know every model).
    expect(
      deletionProofs(entry('widgets', 'widgets.widget', 'owned'), manifest, new Set()),
    ).toEqual([{ kind: 'owned' }]);
    // A participant joins the choice without changing, whatever class the server gives it.
    expect(
      deletionProofs(
        entry('participants', 'experiments.participant', 'owned'),
        manifest,
        new Set(),
      ),
    ).toEqual([]);
  });

  it('follows the links the choice reaches a shared row by, to the resources the manifest has', () => {
    expect(proofs('llm_providers')).toEqual([
      { kind: 'named_by', table: 'pipeline_nodes', column: 'llm_provider', list: false },
      { kind: 'named_by', table: 'chatbots', column: 'llm_provider', list: false },
    ]);
  });

  it('takes a required parent for gone only when its resource was walked completely', () => {
    expect(proofs('pipeline_nodes')).toEqual([
      { kind: 'names', column: 'pipeline', table: 'pipelines' },
    ]);
    expect(proofs('pipeline_nodes', ['pipelines'])).toEqual([
      { kind: 'names', column: 'pipeline', table: 'pipelines' },
      { kind: 'parent_gone', column: 'pipeline', table: 'pipelines' },
    ]);
  });

  it('proves nothing for a shared model it does not know, or one the server classes otherwise', () => {
    expect(
      deletionProofs(entry('widgets', 'widgets.widget', 'referenced'), manifest, new Set()),
    ).toEqual([]);
    expect(
      deletionProofs(entry('users', 'users.customuser', 'excluded'), manifest, new Set()),
    ).toEqual([]);
    expect(
      deletionProofs(entry('users', 'users.customuser', undefined), manifest, new Set()),
    ).toEqual([]);
  });
});

describe("the deletion proofs and the fake server's choice", () => {
  it('reach exactly the rows each choice serves (every shared resource with proofs, several seeds)', () => {
    let compared = 0;
    for (const seed of [3, 4, 5]) {
      const dataset = scopedDataset(seed, 12, SHARED_ROWS);
      const manifest = (dataset.fixture ?? []).map((resource) =>
        entry(resource.resource, resource.model, scopeClassOfModel(resource.model)),
      );
      const chatbots = workingChatbots(dataset);
      for (const chosen of [[chatbots[0]!], [chatbots[1]!, chatbots[2]!]]) {
        const served = (table: string) => {
          const model = manifest.find((candidate) => candidate.resource === table)!.model;
          const ids = idsInScope(dataset, chosen, table, model);
          return dataset.rows(table).filter((row) => ids.has(String(row.id)));
        };
        for (const walked of manifest) {
          if (walked.scope === 'excluded') continue;
          const proofs = deletionProofs(walked, manifest, new Set());
          // Owned rows are proven by the choice they were last served under, not by links.
          if (proofs.length === 0 || proofs.some((proof) => proof.kind === 'owned')) continue;
          const inScope = idsInScope(dataset, chosen, walked.resource, walked.model);
          for (const row of dataset.rows(walked.resource)) {
            const reached = proofs.some((proof) => reaches(proof, row, served));
            expect(reached, `seed ${seed} ${walked.resource} ${String(row.id)}`).toBe(
              inScope.has(String(row.id)),
            );
            compared += 1;
          }
        }
      }
      expect(proofsFor(dataset, manifest), `seed ${seed}`).toEqual([]);
    }
    expect(compared).toBeGreaterThan(1000);
  });

  it.skipIf(!hasSharedExport)(
    "follow fields of the real export (but the fake's own links, which it lacks)",
    () => {
      const openApi = JSON.parse(readFileSync(join(SHARED_EXPORT_DIR, 'openapi.json'), 'utf8'));
      const real = JSON.parse(readFileSync(join(SHARED_EXPORT_DIR, 'manifest.json'), 'utf8')) as {
        entries: ManifestEntry[];
      };
      const manifest = real.entries.map((item) => ({
        ...item,
        scope: scopeClassOfModel(item.model),
      }));
      const fieldsOf = (resource: string): Set<string> => {
        const schemas = openApi.components.schemas as Record<
          string,
          { properties?: Record<string, { items?: { $ref?: string } }> }
        >;
        const path = openApi.paths[`/api/export/${resource}/`];
        const page = String(path.get.responses['200'].content['application/json'].schema.$ref);
        const row = schemas[page.split('/').pop()!]!.properties!.results!.items!.$ref!;
        return new Set(Object.keys(schemas[row.split('/').pop()!]!.properties ?? {}));
      };
      const missing: string[] = [];
      let checked = 0;
      for (const walked of manifest) {
        for (const proof of deletionProofs(walked, manifest, new Set())) {
          for (const [resource, field] of proofFields(proof, walked.resource)) {
            checked += 1;
            if (!fieldsOf(resource).has(field)) missing.push(`${resource}.${field}`);
          }
        }
      }
      expect(checked).toBeGreaterThan(30);
      // The fake's own link (a chatbot's provider) and one the server added after this export
      // was captured.
      expect(missing.sort()).toEqual(['chatbots.llm_provider', 'collections.reranker_provider']);
    },
  );
});

/** Whether a proof holds for `row` given the rows served (parents gone aside). */
function reaches(proof: DeletionProof, row: Row, served: (table: string) => Row[]): boolean {
  const id = String(row.id);
  const names = (value: unknown, table: string) =>
    value !== null && served(table).some((other) => String(other.id) === String(value));
  switch (proof.kind) {
    case 'every_row':
      return true;
    case 'named_by':
      return served(proof.table).some((other) => {
        const value = other[proof.column];
        return proof.list
          ? Array.isArray(value) && value.some((item) => String(item) === id)
          : value !== null && String(value) === id;
      });
    case 'names':
      return names(row[proof.column], proof.table);
    case 'owned':
    case 'parent_gone':
      return false;
  }
}

/** The (resource, field) pairs a proof reads. */
function proofFields(proof: DeletionProof, resource: string): Array<[string, string]> {
  switch (proof.kind) {
    case 'owned':
    case 'every_row':
      return [];
    case 'named_by':
      return [[proof.table, proof.column]];
    case 'names':
    case 'parent_gone':
      return [[resource, proof.column]];
  }
}

/** Resources the fake narrows under a choice that have no proof (none expected). */
function proofsFor(dataset: FakeDataset, manifest: ManifestEntry[]): string[] {
  const chosen = [workingChatbots(dataset)[0]!];
  return manifest
    .filter((walked) => walked.scope !== 'excluded')
    .filter((walked) => deletionProofs(walked, manifest, new Set()).length === 0)
    .filter(
      (walked) =>
        idsInScope(dataset, chosen, walked.resource, walked.model).size <
        dataset.rows(walked.resource).length,
    )
    .map((walked) => walked.resource);
}
