/**
 * The fake's export scoped to chosen chatbots, after the next server version (REFERENCE.md, last
 * section; upstream `apps/teams/export/chatbot_scope.py`): the class of every model, and which rows
 * of each resource the chosen chatbots reach. Rows are matched by their foreign-key fields, as the
 * server's querysets do; a field the dataset does not have matches nothing.
 */
import { normalizeId } from '../export-api/cursor.js';
import { compareCodePoints } from '../export-api/selection.js';
import type { Row } from '../interfaces.js';
import type { FakeDataset } from './dataset.js';

export type FakeScopeClass = 'owned' | 'referenced' | 'excluded';

const OWNED_MODELS = [
  'experiments.experiment',
  'bot_channels.experimentchannel',
  'events.statictrigger',
  'events.timeouttrigger',
  'events.scheduledtrigger',
  'events.eventaction',
  'events.scheduledmessage',
  'experiments.experimentsession',
  'experiments.participantdata',
  'chat.chat',
  'chat.chatmessage',
  'chat.chatattachment',
  'trace.trace',
  'pipelines.pipelinechathistory',
  'pipelines.pipelinechatmessages',
  'cost_tracking.usagerecord',
  'annotations.customtaggeditem',
  'annotations.usercomment',
  'assessments.score',
];

/** Evaluations, human annotations and analyses: served empty under a choice. */
const EXCLUDED_APPS = ['evaluations.', 'human_annotations.', 'analysis.'];

/**
 * The manifest's `scope` of a model, fixed per model. Team-wide models (users, tags, pricing
 * rules, notifications) are `referenced` as upstream: the class alone does not tell them apart.
 */
export function scopeClassOfModel(model: string): FakeScopeClass {
  if (OWNED_MODELS.includes(model)) return 'owned';
  if (EXCLUDED_APPS.some((prefix) => model.startsWith(prefix))) return 'excluded';
  return 'referenced';
}

/** What a generic-FK row (`content_type`, `object_id`) may point at: model label -> resource. */
export const CONTENT_TYPES: Readonly<Record<string, string>> = {
  'chat.chat': 'chats',
  'chat.chatmessage': 'chat_messages',
  'experiments.experimentsession': 'sessions',
};

type IdSet = ReadonlySet<string>;

const key = (id: unknown): string | undefined => {
  const normalized = normalizeId(id);
  return normalized === undefined ? undefined : String(normalized);
};

/**
 * The rows a choice serves. `chosen`: public ids of working versions (a chatbot deleted since is
 * simply not there, as the server's many-to-many loses it). Sets are computed on first use.
 */
export class ChatbotScopeView {
  private readonly cache = new Map<string, IdSet>();
  /** The chosen chatbots that exist, sorted by public id: what `team/` lists. */
  readonly chatbots: Array<{ public_id: string; name: string }>;
  private readonly chosenIds: IdSet;

  constructor(
    private readonly dataset: FakeDataset,
    chosen: readonly string[],
  ) {
    const wanted = new Set(chosen);
    const picked = this.rowsOf('chatbots').filter(
      (row) =>
        typeof row.public_id === 'string' &&
        wanted.has(row.public_id) &&
        (row.working_version === null || row.working_version === undefined),
    );
    this.chatbots = picked
      .map((row) => ({ public_id: row.public_id as string, name: String(row.name ?? '') }))
      .sort((left, right) => compareCodePoints(left.public_id, right.public_id));
    this.chosenIds = new Set(picked.map((row) => String(row.id)));
  }

  /** Whether the resource's row is served; undefined: every row (no rule narrows it). */
  includes(resource: string, model: string): ((row: Row) => boolean) | undefined {
    const scopeClass = scopeClassOfModel(model);
    if (scopeClass === 'excluded') return () => false;
    const ids = this.ids(resource);
    if (ids === undefined) return scopeClass === 'owned' ? () => false : undefined;
    return (row) => ids.has(String(row.id));
  }

  /** The ids a rule keeps for a resource; undefined when no rule is written for it. */
  private ids(resource: string): IdSet | undefined {
    const cached = this.cache.get(resource);
    if (cached) return cached;
    const rule = RULES[resource];
    if (!rule) return undefined;
    const ids = rule(this);
    this.cache.set(resource, ids);
    return ids;
  }

  private rowsOf(resource: string): Row[] {
    return this.dataset.hasResource(resource) ? this.dataset.rows(resource) : [];
  }

  /** The chosen chatbots and every version of each (archived ones too). */
  family(): IdSet {
    return new Set(
      this.rowsOf('chatbots')
        .filter(
          (row) =>
            this.chosenIds.has(String(row.id)) ||
            this.chosenIds.has(key(row.working_version) ?? ''),
        )
        .map((row) => String(row.id)),
    );
  }

  /** Ids of `resource` rows whose `field` holds an id of `among` (null counts with `orNull`). */
  where(resource: string, field: string, among: IdSet, orNull = false): IdSet {
    return new Set(
      this.rowsOf(resource)
        .filter((row) => {
          const value = row[field];
          if (value === null || value === undefined) return orNull && field in row;
          return among.has(key(value) ?? '');
        })
        .map((row) => String(row.id)),
    );
  }

  /** The ids `field` holds (a plain id or a list) in the served rows of `resource`. */
  referencedBy(resource: string, field: string): IdSet {
    return this.fieldValues(resource, this.served(resource), field);
  }

  /** The ids `field` holds (a plain id or a list) in the rows of `resource` with these ids. */
  fieldValues(resource: string, ids: IdSet, field: string): IdSet {
    const found = new Set<string>();
    for (const row of this.rowsOf(resource)) {
      if (!ids.has(String(row.id))) continue;
      const value = row[field];
      for (const item of Array.isArray(value) ? value : [value]) {
        const id = key(item);
        if (id !== undefined) found.add(id);
      }
    }
    return found;
  }

  /** The ids of a resource's served rows (empty when it has no rule). */
  served(resource: string): IdSet {
    return this.ids(resource) ?? new Set();
  }

  /** Generic-FK rows whose target is a served chat, message or session. */
  genericTargets(resource: string): IdSet {
    return new Set(
      this.rowsOf(resource)
        .filter((row) => {
          const type = String(row.content_type);
          const target = Object.hasOwn(CONTENT_TYPES, type) ? CONTENT_TYPES[type] : undefined;
          return target !== undefined && this.served(target).has(key(row.object_id) ?? '');
        })
        .map((row) => String(row.id)),
    );
  }
}

function union(...sets: IdSet[]): IdSet {
  const all = new Set<string>();
  for (const set of sets) for (const id of set) all.add(id);
  return all;
}

/** A set plus the working version of every row in it that has one. */
function withWorkingVersions(view: ChatbotScopeView, resource: string, ids: IdSet): IdSet {
  return union(ids, view.fieldValues(resource, ids, 'working_version'));
}

const experimentOwned = (resource: string) => (view: ChatbotScopeView) =>
  view.where(resource, 'experiment', view.family());

/** Per resource, the rows the choice serves (upstream ChatbotScope and its registry). */
const RULES: Record<string, (view: ChatbotScopeView) => IdSet> = {
  // --- owned
  chatbots: (view) => view.family(),
  chatbot_channels: (view) => view.where('chatbot_channels', 'experiment', view.family(), true),
  static_triggers: experimentOwned('static_triggers'),
  timeout_triggers: experimentOwned('timeout_triggers'),
  scheduled_triggers: experimentOwned('scheduled_triggers'),
  event_actions: (view) =>
    union(
      view.referencedBy('static_triggers', 'action'),
      view.referencedBy('timeout_triggers', 'action'),
      view.referencedBy('scheduled_triggers', 'action'),
    ),
  scheduled_messages: experimentOwned('scheduled_messages'),
  sessions: experimentOwned('sessions'),
  participant_data: experimentOwned('participant_data'),
  chats: (view) => view.referencedBy('sessions', 'chat'),
  chat_messages: (view) => view.where('chat_messages', 'chat', view.served('chats')),
  chat_attachments: (view) => view.where('chat_attachments', 'chat', view.served('chats')),
  traces: experimentOwned('traces'),
  pipeline_chat_histories: (view) =>
    view.where('pipeline_chat_histories', 'session', view.served('sessions')),
  pipeline_chat_messages: (view) =>
    view.where('pipeline_chat_messages', 'chat_history', view.served('pipeline_chat_histories')),
  usage_records: experimentOwned('usage_records'),
  custom_tagged_items: (view) => view.genericTargets('custom_tagged_items'),
  user_comments: (view) => view.genericTargets('user_comments'),
  scores: (view) => view.where('scores', 'session', view.served('sessions')),
  // --- referenced: reached by what the chosen chatbots use
  participants: (view) =>
    union(
      view.referencedBy('sessions', 'participant'),
      view.referencedBy('participant_data', 'participant'),
      view.referencedBy('scheduled_messages', 'participant'),
    ),
  pipelines: (view) =>
    withWorkingVersions(view, 'pipelines', view.referencedBy('chatbots', 'pipeline')),
  pipeline_nodes: (view) => view.where('pipeline_nodes', 'pipeline', view.served('pipelines')),
  collections: (view) =>
    withWorkingVersions(view, 'collections', view.referencedBy('pipeline_nodes', 'collection')),
  collection_files: (view) =>
    view.where('collection_files', 'collection', view.served('collections')),
  document_sources: (view) =>
    view.where('document_sources', 'collection', view.served('collections')),
  file_chunk_embeddings: (view) =>
    view.where('file_chunk_embeddings', 'collection', view.served('collections')),
  files: (view) =>
    withWorkingVersions(
      view,
      'files',
      union(
        view.referencedBy('collection_files', 'file'),
        view.referencedBy('chat_attachments', 'files'),
        view.referencedBy('synthetic_voices', 'file'),
      ),
    ),
  source_materials: (view) => view.referencedBy('pipeline_nodes', 'source_material'),
  consent_forms: (view) => view.referencedBy('chatbots', 'consent_form'),
  synthetic_voices: (view) =>
    union(
      view.referencedBy('pipeline_nodes', 'synthetic_voice'),
      view.referencedBy('chatbots', 'synthetic_voice'),
    ),
  custom_action_operations: (view) =>
    view.where('custom_action_operations', 'node', view.served('pipeline_nodes')),
  custom_actions: (view) => view.referencedBy('custom_action_operations', 'custom_action'),
  llm_providers: (view) =>
    union(
      view.referencedBy('pipeline_nodes', 'llm_provider'),
      view.referencedBy('chatbots', 'llm_provider'),
      view.referencedBy('collections', 'llm_provider'),
    ),
  llm_provider_models: (view) => view.referencedBy('pipeline_nodes', 'llm_provider_model'),
  embedding_provider_models: (view) => view.referencedBy('collections', 'embedding_provider_model'),
  voice_providers: (view) => view.referencedBy('chatbots', 'voice_provider'),
  trace_providers: (view) => view.referencedBy('chatbots', 'trace_provider'),
  messaging_providers: (view) => view.referencedBy('chatbot_channels', 'messaging_provider'),
  auth_providers: (view) =>
    union(
      view.referencedBy('custom_actions', 'auth_provider'),
      view.referencedBy('document_sources', 'auth_provider'),
    ),
};
