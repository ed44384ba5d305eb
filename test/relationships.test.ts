import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ColumnSpec } from '../src/interfaces.js';
import { columnsFromOpenApi } from '../src/sync/openapi-columns.js';
import {
  decideRelationship,
  findRelationships,
  referenceCandidates,
  type ReferenceCandidate,
} from '../src/sync/relationships.js';
import { SHARED_EXPORT_DIR, hasSharedExport } from './support.js';

const integer = (name: string): ColumnSpec => ({ name, type: 'integer' });

describe('reference candidates (by name)', () => {
  const models = new Map([
    ['chats', 'chat.chat'],
    ['chat_messages', 'chat.chatmessage'],
    ['chatbots', 'experiments.experiment'],
    ['sessions', 'experiments.experimentsession'],
    ['evaluation_runs', 'evaluations.evaluationrun'],
    ['annotation_items', 'human_annotations.annotationitem'],
    ['custom_tagged_items', 'annotations.customtaggeditem'],
  ]);
  const tables = new Map<string, ColumnSpec[]>([
    ...[...models.keys()].map((name) => [name, []] as [string, ColumnSpec[]]),
    [
      'things',
      [
        integer('chat'),
        integer('experiment'),
        integer('session'),
        integer('input_chat_message'),
        integer('run'),
        integer('item'),
        integer('working_version'),
        integer('owner'),
        integer('version_number'),
        { name: 'chat_text', type: 'text' },
      ],
    ],
  ]);
  const byColumn = new Map(
    referenceCandidates(tables, models).map((candidate) => [candidate.column, candidate.targets]),
  );

  it('matches model names, resource names and plurals, and model-name endings', () => {
    expect(byColumn.get('chat')).toEqual(['chats']);
    expect(byColumn.get('experiment')).toEqual(['chatbots']);
    expect(byColumn.get('session')).toEqual(['sessions']);
    expect(byColumn.get('input_chat_message')).toEqual(['chat_messages']);
    expect(byColumn.get('run')).toEqual(['evaluation_runs']);
    expect(byColumn.get('item')).toEqual(['annotation_items', 'custom_tagged_items']);
    expect(byColumn.get('working_version')).toEqual(['things']);
  });

  it('guesses nothing for names no resource carries, nor for columns that are not integers', () => {
    expect(byColumn.has('owner')).toBe(false);
    expect(byColumn.has('version_number')).toBe(false);
    expect(byColumn.has('chat_text')).toBe(false);
  });

  it.skipIf(!hasSharedExport)('finds the main joins of the real export surface', () => {
    const manifest = JSON.parse(readFileSync(join(SHARED_EXPORT_DIR, 'manifest.json'), 'utf8')) as {
      entries: Array<{ resource: string; model: string }>;
    };
    const schema = columnsFromOpenApi(
      JSON.parse(readFileSync(join(SHARED_EXPORT_DIR, 'openapi.json'), 'utf8')),
    );
    const realModels = new Map(manifest.entries.map((entry) => [entry.resource, entry.model]));
    const candidates = referenceCandidates(schema.tables, realModels);
    const first = new Map(candidates.map((c) => [`${c.table}.${c.column}`, c.targets[0]]));
    expect(first.get('chat_messages.chat')).toBe('chats');
    expect(first.get('sessions.experiment')).toBe('chatbots');
    expect(first.get('sessions.participant')).toBe('participants');
    expect(first.get('sessions.chat')).toBe('chats');
    expect(first.get('traces.session')).toBe('sessions');
    expect(first.get('chatbot_channels.experiment')).toBe('chatbots');
  });
});

describe('deciding a relationship from the data', () => {
  const candidate: ReferenceCandidate = { table: 't', column: 'item', targets: ['a', 'b'] };

  it('takes the first target every value matches', () => {
    expect(
      decideRelationship(candidate, [
        { values: 5, unmatched: 2 },
        { values: 5, unmatched: 0 },
      ]),
    ).toEqual({ table: 't', column: 'item', references: 'b', basis: 'verified' });
    expect(
      decideRelationship(candidate, [
        { values: 5, unmatched: 1 },
        { values: 5, unmatched: 3 },
      ]),
    ).toBeUndefined();
  });

  it('assumes only an unambiguous name while the column has no value', () => {
    expect(decideRelationship(candidate, [{ values: 0, unmatched: 0 }])).toBeUndefined();
    expect(
      decideRelationship({ ...candidate, targets: ['a'] }, [{ values: 0, unmatched: 0 }]),
    ).toEqual({ table: 't', column: 'item', references: 'a', basis: 'assumed' });
  });

  it('checks again only what is not verified yet', async () => {
    const checked: string[] = [];
    const checker = {
      checkReference: async (table: string, column: string, target: string) => {
        checked.push(`${table}.${column}->${target}`);
        return { values: 3, unmatched: target === 'b' ? 0 : 1 };
      },
    };
    const other: ReferenceCandidate = { table: 'u', column: 'b', targets: ['b'] };
    const found = await findRelationships(
      checker,
      [candidate, other],
      [{ table: 'u', column: 'b', references: 'b', basis: 'verified' }],
    );
    expect(found.map((r) => `${r.table}.${r.column}->${r.references}`)).toEqual([
      't.item->b',
      'u.b->b',
    ]);
    expect(checked).toEqual(['t.item->a', 't.item->b']);
  });
});
