/**
 * How the server's chatbot choice reaches each model's rows, and so what shows that a row a full
 * refresh under the choice did not see is gone from the server rather than out of the choice.
 *
 * An owned row (a chatbot's own: its sessions, chats, messages, traces, ...) belongs to one
 * chatbot for its whole life, and the server serves every owned row of the chosen chatbots
 * (REFERENCE.md, last section): under the same choice it cannot leave, so a complete walk that no
 * longer serves it shows it deleted, whatever links it carries.
 *
 * A shared row is served, under a choice, when the chosen chatbots reach it, one link at a time,
 * always from rows the server serves (upstream `apps/teams/export/chatbot_scope.py`). So a
 * missing shared row is provably deleted when the rows served in the same run still reach it: the
 * server would have served it if it still had it. A row nothing served reaches any more may have
 * left the choice (a chatbot stopped using a provider), so it is only marked out of scope. One
 * more proof holds on any server with referential integrity: a row whose required parent is gone
 * is gone with it.
 *
 * A shared model this table does not know, or one the manifest classes otherwise than the table
 * expects (the server's rules changed), gets no proof: its missing rows are out of scope.
 */
import type { DeletionProof, ManifestEntry } from '../interfaces.js';
import { scopeClassOf } from './chatbot-choice.js';

type Link =
  /** A served row of `model` names it in `field` (a list of ids when `list`). */
  | { kind: 'named_by'; model: string; field: string; list: boolean }
  /** It names a served row of `model` in `field`; `required`: the field is never null. */
  | { kind: 'names'; model: string; field: string; required: boolean };

/** The links the choice reaches a shared model's rows by; none: served whole (team-wide). */
type Reach = readonly Link[];

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
const referenced = (...links: Link[]): Reach => links;
/** Served whole under any choice. */
const teamWide: Reach = [];

const CHATBOT = 'experiments.experiment';
const SESSION = 'experiments.experimentsession';
const NODE = 'pipelines.node';
const COLLECTION = 'documents.collection';
const versionsOf = (model: string) => namedBy(model, 'working_version');

/**
 * The shared models (the manifest's `referenced`), by model label as the server's registry has
 * them. Owned ones need no links (deletionProofs).
 */
const CHOICE_REACH: Readonly<Record<string, Reach>> = {
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
 * from the server, when it was last served under this same choice. `entries`: the manifest
 * (models to resources); `walkedCompletely`: resources this run walked from the start to the end
 * under the choice (a parent's absence proves nothing unless its resource was). Empty: no missing
 * row of it can be told deleted.
 */
export function deletionProofs(
  entry: ManifestEntry,
  entries: readonly ManifestEntry[],
  walkedCompletely: ReadonlySet<string>,
): DeletionProof[] {
  if (scopeClassOf(entry) === 'owned') return [{ kind: 'owned' }];
  const reach = Object.hasOwn(CHOICE_REACH, entry.model) ? CHOICE_REACH[entry.model] : undefined;
  if (!reach || entry.scope !== 'referenced') return [];
  if (reach.length === 0) return [{ kind: 'every_row' }];
  const resourceOf = (model: string) => entries.find((other) => other.model === model)?.resource;
  const proofs: DeletionProof[] = [];
  for (const link of reach) {
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
