/**
 * How the server's chatbot choice reaches each model's rows, and so what shows that a row a full
 * refresh under the choice did not see is gone from the server rather than out of the choice.
 *
 * The server serves, under a choice, the chosen chatbots' families and what they reach, one link
 * at a time, always from rows it serves (upstream `apps/teams/export/chatbot_scope.py`, read for
 * REFERENCE.md's last section). So a missing row is provably deleted when the rows served in the
 * same run still reach it: the server would have served it if it still had it. A row nothing
 * served reaches any more may have left the choice (a chatbot stopped using a provider, a session
 * was deleted and its chat kept), so it is only marked out of scope. One more proof holds on any
 * server with referential integrity: a row whose required parent is gone is gone with it.
 *
 * A model this table does not know, or one the manifest classes otherwise than the table
 * expects (the server's rules changed), gets no proof: its missing rows are out of scope.
 */
import type { DeletionProof, ManifestEntry } from '../interfaces.js';

type Link =
  /** A served row of `model` names it in `field` (a list of ids when `list`). */
  | { kind: 'named_by'; model: string; field: string; list: boolean }
  /** It names a served row of `model` in `field`; `required`: the field is never null. */
  | { kind: 'names'; model: string; field: string; required: boolean }
  /** `field` is null: served under any choice. */
  | { kind: 'names_nothing'; field: string }
  /** A generic foreign key: `typeField` holds a model label, `idField` its row. */
  | { kind: 'names_typed'; typeField: string; idField: string; models: readonly string[] };

interface Reach {
  scope: 'owned' | 'referenced';
  /** Empty: served whole under any choice (team-wide). */
  links: readonly Link[];
}

const namedBy = (model: string, field: string, list = false): Link => ({
  kind: 'named_by',
  model,
  field,
  list,
});
/** The link a row belongs by; `required` when the server's field is never null. */
const names = (model: string, field: string, required = false): Link => ({
  kind: 'names',
  model,
  field,
  required,
});
const owned = (...links: Link[]): Reach => ({ scope: 'owned', links });
const referenced = (...links: Link[]): Reach => ({ scope: 'referenced', links });
const teamWide: Reach = { scope: 'referenced', links: [] };

const CHATBOT = 'experiments.experiment';
const SESSION = 'experiments.experimentsession';
const CHAT = 'chat.chat';
const NODE = 'pipelines.node';
const COLLECTION = 'documents.collection';
/** Chats, messages and sessions: what tagged items and comments may point at. */
const CONVERSATION_MODELS = [CHAT, 'chat.chatmessage', SESSION];
const versionsOf = (model: string) => namedBy(model, 'working_version');

/** By model label (the manifest's `model`), as the server's registry has it. */
const CHOICE_REACH: Readonly<Record<string, Reach>> = {
  // --- owned: a chosen chatbot's family and what hangs under it
  [CHATBOT]: owned(names(CHATBOT, 'working_version')),
  'bot_channels.experimentchannel': owned(names(CHATBOT, 'experiment'), {
    kind: 'names_nothing',
    field: 'experiment',
  }),
  'events.statictrigger': owned(names(CHATBOT, 'experiment', true)),
  'events.timeouttrigger': owned(names(CHATBOT, 'experiment', true)),
  'events.scheduledtrigger': owned(names(CHATBOT, 'experiment', true)),
  'events.eventaction': owned(
    namedBy('events.statictrigger', 'action'),
    namedBy('events.timeouttrigger', 'action'),
    namedBy('events.scheduledtrigger', 'action'),
  ),
  'events.scheduledmessage': owned(names(CHATBOT, 'experiment', true)),
  [SESSION]: owned(names(CHATBOT, 'experiment', true)),
  'experiments.participantdata': owned(names(CHATBOT, 'experiment', true)),
  [CHAT]: owned(namedBy(SESSION, 'chat')),
  'chat.chatmessage': owned(names(CHAT, 'chat', true)),
  'chat.chatattachment': owned(names(CHAT, 'chat', true)),
  'trace.trace': owned(names(CHATBOT, 'experiment')),
  'pipelines.pipelinechathistory': owned(names(SESSION, 'session', true)),
  'pipelines.pipelinechatmessages': owned(
    names('pipelines.pipelinechathistory', 'chat_history', true),
  ),
  'cost_tracking.usagerecord': owned(names(CHATBOT, 'experiment')),
  'annotations.customtaggeditem': owned({
    kind: 'names_typed',
    typeField: 'content_type',
    idField: 'object_id',
    models: CONVERSATION_MODELS,
  }),
  'annotations.usercomment': owned({
    kind: 'names_typed',
    typeField: 'content_type',
    idField: 'object_id',
    models: CONVERSATION_MODELS,
  }),
  // The server keeps only some of a session's scores (not those of evaluations or reviews):
  // only a score naming its session is proven.
  'assessments.score': owned(names(SESSION, 'session')),
  // --- referenced: shared rows the chosen chatbots use
  'experiments.participant': referenced(
    namedBy(SESSION, 'participant'),
    namedBy('experiments.participantdata', 'participant'),
    namedBy('events.scheduledmessage', 'participant'),
  ),
  'pipelines.pipeline': referenced(namedBy(CHATBOT, 'pipeline'), versionsOf('pipelines.pipeline')),
  [NODE]: referenced(names('pipelines.pipeline', 'pipeline', true)),
  [COLLECTION]: referenced(
    namedBy(NODE, 'collection'),
    namedBy(NODE, 'collection_indexes', true),
    versionsOf(COLLECTION),
  ),
  'documents.collectionfile': referenced(names(COLLECTION, 'collection', true)),
  'documents.documentsource': referenced(names(COLLECTION, 'collection', true)),
  'files.filechunkembedding': referenced(names(COLLECTION, 'collection', true)),
  'files.file': referenced(
    namedBy('documents.collectionfile', 'file'),
    namedBy('chat.chatattachment', 'files', true),
    namedBy('experiments.syntheticvoice', 'file'),
    versionsOf('files.file'),
  ),
  'custom_actions.customactionoperation': referenced(names(NODE, 'node')),
  'custom_actions.customaction': referenced(
    namedBy('custom_actions.customactionoperation', 'custom_action'),
  ),
  'experiments.sourcematerial': referenced(
    namedBy(NODE, 'source_material'),
    versionsOf('experiments.sourcematerial'),
  ),
  'experiments.consentform': referenced(
    namedBy(CHATBOT, 'consent_form'),
    versionsOf('experiments.consentform'),
  ),
  'experiments.syntheticvoice': referenced(
    namedBy(NODE, 'synthetic_voice'),
    namedBy(CHATBOT, 'synthetic_voice'),
  ),
  'service_providers.llmprovider': referenced(
    namedBy(NODE, 'llm_provider'),
    // Older chatbots name their provider themselves.
    namedBy(CHATBOT, 'llm_provider'),
    namedBy(COLLECTION, 'llm_provider'),
    namedBy(COLLECTION, 'contextualizer_llm_provider'),
    namedBy(COLLECTION, 'reranker_provider'),
  ),
  'service_providers.llmprovidermodel': referenced(
    namedBy(NODE, 'llm_provider_model'),
    namedBy(COLLECTION, 'contextualizer_llm_model'),
  ),
  'service_providers.embeddingprovidermodel': referenced(
    namedBy(COLLECTION, 'embedding_provider_model'),
  ),
  'service_providers.voiceprovider': referenced(
    namedBy(CHATBOT, 'voice_provider'),
    namedBy('experiments.syntheticvoice', 'voice_provider'),
  ),
  'service_providers.messagingprovider': referenced(
    namedBy('bot_channels.experimentchannel', 'messaging_provider'),
  ),
  'service_providers.authprovider': referenced(
    namedBy('custom_actions.customaction', 'auth_provider'),
    namedBy('documents.documentsource', 'auth_provider'),
  ),
  'service_providers.traceprovider': referenced(namedBy(CHATBOT, 'trace_provider')),
  // --- team-wide: served whole under any choice
  'annotations.tag': teamWide,
  'users.customuser': teamWide,
  'cost_tracking.pricingrule': teamWide,
  'ocs_notifications.eventtype': teamWide,
  'ocs_notifications.usernotificationpreferences': teamWide,
  'ocs_notifications.notificationevent': teamWide,
  'ocs_notifications.eventuser': teamWide,
};

/**
 * The proofs that a row of `entry` missing from a complete full refresh under a choice is gone
 * from the server. `entries`: the manifest (models to resources); `walkedCompletely`: resources
 * this run walked from the start to the end under the choice (a parent's absence proves nothing
 * unless its resource was). Empty: no missing row of it can be told deleted.
 */
export function deletionProofs(
  entry: ManifestEntry,
  entries: readonly ManifestEntry[],
  walkedCompletely: ReadonlySet<string>,
): DeletionProof[] {
  const reach = Object.hasOwn(CHOICE_REACH, entry.model) ? CHOICE_REACH[entry.model] : undefined;
  if (!reach || reach.scope !== entry.scope) return [];
  if (reach.links.length === 0) return [{ kind: 'every_row' }];
  const resourceOf = (model: string) => entries.find((other) => other.model === model)?.resource;
  const proofs: DeletionProof[] = [];
  for (const link of reach.links) {
    if (link.kind === 'names_nothing') {
      proofs.push({ kind: 'names_nothing', column: link.field });
      continue;
    }
    if (link.kind === 'names_typed') {
      for (const model of link.models) {
        const table = resourceOf(model);
        if (table === undefined) continue;
        proofs.push({
          kind: 'names_typed',
          typeColumn: link.typeField,
          idColumn: link.idField,
          type: model,
          table,
        });
      }
      continue;
    }
    const table = resourceOf(link.model);
    if (table === undefined) continue;
    if (link.kind === 'named_by') {
      proofs.push({ kind: 'named_by', table, column: link.field, list: link.list });
      continue;
    }
    proofs.push({ kind: 'names', column: link.field, table });
    if (link.required && walkedCompletely.has(table)) {
      proofs.push({ kind: 'parent_gone', column: link.field, table });
    }
  }
  return proofs;
}
