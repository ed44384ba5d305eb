/**
 * The sample fixture: 32 resources modelled on the real export's names, order, cursor kinds and
 * sealed fields, covering every field kind the real schema uses (and `date`, which it may). Used
 * by tests, `ocs-sync demo` and the benchmark. The OpenAPI/manifest builders and the builder from
 * a real OpenAPI document live beside it and are re-exported here.
 */
import { datasetFromFixture, type DatasetFromFixtureOptions } from './field-values.js';
import type { FieldSpec, FixtureResource, JsonShape, TextStyle } from './fixture-schema.js';
import type { FakeDataset } from './dataset.js';

export type {
  FieldKind,
  FieldSpec,
  FixtureResource,
  JsonShape,
  TextStyle,
} from './fixture-schema.js';
export type { DatasetFromFixtureOptions } from './field-values.js';
export { datasetFromFixture, rowGeneratorFor, ValueGenerator } from './field-values.js';
export {
  datasetFromOpenApi,
  fixtureFromOpenApi,
  manifestFromFixture,
  openApiFromFixture,
  schemaChecksum,
  type FakeManifestDocument,
} from './openapi.js';

const integer = (nullable = false): FieldSpec => ({ kind: 'integer', nullable });
const ref = (resource: string, nullable = false): FieldSpec => ({
  kind: 'integer',
  references: resource,
  nullable,
});
const number = (nullable = false): FieldSpec => ({ kind: 'number', nullable });
const boolean = (nullable = false): FieldSpec => ({ kind: 'boolean', nullable });
const string = (text?: TextStyle, nullable = false): FieldSpec => ({
  kind: 'string',
  text,
  nullable,
});
const datetime = (nullable = false): FieldSpec => ({ kind: 'datetime', nullable });
const date = (nullable = false): FieldSpec => ({ kind: 'date', nullable });
const uuid = (nullable = false): FieldSpec => ({ kind: 'uuid', nullable });
const decimal = (digits: number, places: number, nullable = false): FieldSpec => ({
  kind: 'decimal',
  decimalDigits: digits,
  decimalPlaces: places,
  nullable,
});
const choice = (values: Array<string | number>, nullable = false): FieldSpec => ({
  kind: 'enum',
  values,
  nullable,
});
const json = (shape: JsonShape = 'any', nullable = false): FieldSpec => ({
  kind: 'json',
  json: shape,
  nullable,
});
const embedding = (dimensions: number): FieldSpec => ({ kind: 'float_array', dimensions });
const integers = (nullable = false): FieldSpec => ({ kind: 'integer_array', nullable });
const strings = (nullable = false): FieldSpec => ({ kind: 'string_array', nullable });
const timestamps = { created_at: datetime(), updated_at: datetime() };

function resource(
  name: string,
  model: string,
  cursor: FixtureResource['cursor'],
  fields: Record<string, FieldSpec>,
  sealedFields: string[] = [],
): FixtureResource {
  return { resource: name, model, cursor, sealedFields, fields };
}

const providerTypes = ['openai', 'azure', 'anthropic', 'groq', 'google'];

/** A fresh copy of the sample fixture, in dependency order. */
export function sampleFixture(): FixtureResource[] {
  return [
    resource('users', 'users.customuser', 'pk', {
      groups: strings(),
      last_login: datetime(true),
      username: string('slug'),
      first_name: string('name'),
      last_name: string('name'),
      email: string('email'),
      is_active: boolean(),
      date_joined: datetime(),
      language: string('word', true),
    }),
    resource(
      'llm_providers',
      'service_providers.llmprovider',
      'pk',
      { config: json('config'), ...timestamps, type: choice(providerTypes), name: string('title') },
      ['config'],
    ),
    resource(
      'voice_providers',
      'service_providers.voiceprovider',
      'pk',
      {
        config: json('config'),
        ...timestamps,
        type: choice(['aws', 'azure', 'openai']),
        name: string('title'),
      },
      ['config'],
    ),
    resource(
      'messaging_providers',
      'service_providers.messagingprovider',
      'pk',
      {
        config: json('config'),
        ...timestamps,
        type: choice(['twilio', 'turnio', 'meta_cloud_api']),
        name: string('title'),
      },
      ['config'],
    ),
    resource(
      'trace_providers',
      'service_providers.traceprovider',
      'pk',
      {
        config: json('config'),
        ...timestamps,
        type: choice(['langfuse', 'langsmith']),
        name: string('title'),
      },
      ['config'],
    ),
    resource('llm_provider_models', 'service_providers.llmprovidermodel', 'pk', {
      ...timestamps,
      type: choice(providerTypes),
      name: string('slug'),
      max_token_limit: integer(),
      deprecated: boolean(),
      is_global: boolean(),
    }),
    resource('embedding_provider_models', 'service_providers.embeddingprovidermodel', 'pk', {
      ...timestamps,
      type: choice(providerTypes),
      name: string('slug'),
      is_global: boolean(),
    }),
    resource('pricing_rules', 'cost_tracking.pricingrule', 'pk', {
      provider_type: choice(providerTypes),
      model_name: string('slug'),
      service_kind: choice(['llm', 'tts', 'stt', 'embedding']),
      unit_price: decimal(6, 8),
      currency: choice(['USD', 'EUR']),
      effective_from: datetime(),
      effective_to: datetime(true),
      notes: string('paragraph'),
      created_at: datetime(),
      created_by: ref('users', true),
    }),
    resource('collections', 'documents.collection', 'pk', {
      ...timestamps,
      name: string('title'),
      is_index: boolean(),
      summary: string('paragraph'),
      search_dense_weight: number(),
      enable_contextual_retrieval: boolean(true),
      llm_provider: ref('llm_providers', true),
      embedding_provider_model: ref('embedding_provider_models', true),
    }),
    resource('files', 'files.file', 'pk', {
      ...timestamps,
      name: string('title'),
      file: string('url'),
      external_id: string('code'),
      content_size: integer(true),
      content_type: choice(['application/pdf', 'text/plain', 'image/png']),
      summary: string('paragraph'),
      metadata: json('object', true),
      expiry_date: datetime(true),
      is_archived: boolean(),
    }),
    resource('source_materials', 'experiments.sourcematerial', 'pk', {
      ...timestamps,
      topic: string('title'),
      description: string('paragraph'),
      material: string('message'),
      owner: ref('users', true),
    }),
    resource('consent_forms', 'experiments.consentform', 'pk', {
      ...timestamps,
      name: string('title'),
      consent_text: string('message'),
      capture_identifier: boolean(),
      identifier_type: choice(['email', 'text']),
      is_default: boolean(),
    }),
    resource('tags', 'annotations.tag', 'pk', {
      ...timestamps,
      name: string('word'),
      slug: string('slug'),
      is_system_tag: boolean(),
      category: choice(['', 'bot_response', 'safety_layer_response', 'experiment_version']),
      color: string('word'),
    }),
    resource(
      'document_sources',
      'documents.documentsource',
      'pk',
      {
        ...timestamps,
        collection: ref('collections'),
        source_type: choice(['github', 'confluence']),
        config: json('config'),
        auto_sync_enabled: boolean(),
        last_sync: datetime(true),
      },
      ['config'],
    ),
    resource('collection_files', 'documents.collectionfile', 'pk', {
      collection: ref('collections'),
      file: ref('files'),
      status: choice(['', 'pending', 'in_progress', 'completed', 'failed']),
      metadata: json('any', true),
    }),
    resource('file_chunk_embeddings', 'files.filechunkembedding', 'pk', {
      ...timestamps,
      chunk_number: integer(),
      text: string('paragraph'),
      page_number: integer(),
      embedding: embedding(16),
      file: ref('files'),
      collection: ref('collections'),
    }),
    resource('pipelines', 'pipelines.pipeline', 'pk', {
      ...timestamps,
      name: string('title'),
      data: json('object'),
      version_number: integer(),
      is_archived: boolean(),
    }),
    resource('pipeline_nodes', 'pipelines.node', 'pk', {
      flow_id: uuid(),
      type: choice(['LLMResponseWithPrompt', 'RouterNode', 'StartNode', 'EndNode']),
      label: string('title'),
      params: json('object'),
      pipeline: ref('pipelines'),
      position_x: number(true),
      position_y: number(true),
    }),
    resource('chatbots', 'experiments.experiment', 'pk', {
      ...timestamps,
      public_id: uuid(),
      name: string('title'),
      description: string('paragraph'),
      temperature: number(),
      version_number: integer(),
      is_default_version: boolean(),
      participant_allowlist: strings(),
      llm_provider: ref('llm_providers', true),
      pipeline: ref('pipelines', true),
      consent_form: ref('consent_forms', true),
      owner: ref('users'),
    }),
    resource(
      'chatbot_channels',
      'bot_channels.experimentchannel',
      'pk',
      {
        ...timestamps,
        name: string('title'),
        platform: choice(['web', 'telegram', 'whatsapp', 'slack', 'api']),
        external_id: uuid(),
        extra_data: json('object'),
        deleted: boolean(),
        experiment: ref('chatbots', true),
        messaging_provider: ref('messaging_providers', true),
      },
      ['extra_data'],
    ),
    resource('participants', 'experiments.participant', 'updated_at_id', {
      ...timestamps,
      public_id: uuid(),
      identifier: string('email'),
      name: string('name', true),
      platform: choice(['web', 'telegram', 'whatsapp', 'api']),
      remote_id: string('code'),
      user: ref('users', true),
    }),
    resource(
      'participant_data',
      'experiments.participantdata',
      'updated_at_id',
      {
        data: json('object'),
        encryption_key: string('code'),
        ...timestamps,
        system_metadata: json('any'),
        participant: ref('participants'),
        experiment: ref('chatbots'),
      },
      ['data', 'encryption_key'],
    ),
    resource('chats', 'chat.chat', 'updated_at_id', {
      ...timestamps,
      name: string('title'),
      translated_languages: strings(true),
      metadata: json('object'),
    }),
    resource('sessions', 'experiments.experimentsession', 'updated_at_id', {
      ...timestamps,
      external_id: uuid(),
      status: choice(['setup', 'pending', 'active', 'complete', 'unknown']),
      ended_at: datetime(true),
      experiment_versions: integers(true),
      state: json('object'),
      chat: ref('chats'),
      participant: ref('participants'),
      experiment: ref('chatbots'),
    }),
    resource('chat_attachments', 'chat.chatattachment', 'pk', {
      tool_type: choice(['code_interpreter', 'file_search', 'ocs_attachments']),
      extra: json('object'),
      chat: ref('chats'),
      files: integers(),
    }),
    resource('chat_messages', 'chat.chatmessage', 'updated_at_id', {
      updated_at: datetime(),
      created_at: datetime(),
      message_type: choice(['human', 'ai', 'system']),
      content: string('message'),
      summary: { ...string('paragraph', true), nullChance: 0.9 },
      translations: json('translations'),
      metadata: json('message_metadata'),
      chat: ref('chats'),
    }),
    resource('traces', 'trace.trace', 'pk', {
      timestamp: datetime(),
      trace_id: uuid(),
      duration: integer(),
      status: choice(['pending', 'success', 'error']),
      error: string('paragraph', true),
      experiment: ref('chatbots'),
      session: ref('sessions'),
      participant: ref('participants', true),
      input_message: ref('chat_messages', true),
      output_message: ref('chat_messages', true),
    }),
    resource('scheduled_messages', 'events.scheduledmessage', 'updated_at_id', {
      ...timestamps,
      external_id: string('code'),
      name: string('title'),
      next_trigger_date: datetime(true),
      last_triggered_at: datetime(true),
      total_triggers: integer(),
      is_complete: boolean(),
      custom_schedule_params: json('object'),
      participant: ref('participants'),
      experiment: ref('chatbots'),
    }),
    resource('evaluators', 'evaluations.evaluator', 'updated_at_id', {
      ...timestamps,
      name: string('title'),
      type: choice(['LlmEvaluator', 'PythonEvaluator']),
      params: json('object'),
    }),
    resource('evaluation_results', 'evaluations.evaluationresult', 'pk', {
      ...timestamps,
      output: json('any'),
      evaluator: ref('evaluators'),
      session: ref('sessions', true),
      score: number(true),
    }),
    resource('usage_records', 'cost_tracking.usagerecord', 'pk', {
      created_at: datetime(),
      usage_date: date(),
      service_kind: choice(['llm', 'tts', 'stt', 'embedding']),
      quantity: decimal(12, 2),
      cost: decimal(10, 6, true),
      metadata: json('scalar', true),
      experiment: ref('chatbots'),
      session: ref('sessions', true),
    }),
    resource('custom_tagged_items', 'annotations.customtaggeditem', 'pk', {
      tag: ref('tags'),
      object_id: integer(),
      content_type_id: integer(),
      user: ref('users', true),
    }),
    resource('user_comments', 'annotations.usercomment', 'updated_at_id', {
      ...timestamps,
      comment: string('message'),
      object_id: integer(),
      content_type_id: integer(),
      user: ref('users'),
    }),
    resource('scores', 'assessments.score', 'updated_at_id', {
      ...timestamps,
      name: string('title'),
      value_numeric: decimal(14, 6, true),
      value_text: string('word', true),
      source: choice(['human', 'llm', 'api'], true),
      session: ref('sessions', true),
      trace: ref('traces', true),
    }),
  ];
}

/**
 * The sample fixture as the next server version exports it, for the fake's `chatbotChoice`: the
 * references the chatbot scope follows (a chatbot's versions, providers and pipeline; a node's
 * collection, provider, model and source material; tagged items and comments pointing at messages
 * and sessions), a chatbot's triggers and their event actions, and the new `scheduled_triggers`
 * after `timeout_triggers`.
 */
export function scopedSampleFixture(): FixtureResource[] {
  const fixture = sampleFixture();
  const fieldsOf = (name: string) => fixture.find((entry) => entry.resource === name)!.fields;
  Object.assign(fieldsOf('chatbots'), {
    working_version: { ...ref('chatbots', true), nullChance: 1 },
    voice_provider: ref('voice_providers', true),
    trace_provider: ref('trace_providers', true),
  });
  Object.assign(fieldsOf('pipeline_nodes'), {
    collection: ref('collections', true),
    llm_provider: ref('llm_providers', true),
    llm_provider_model: ref('llm_provider_models', true),
    source_material: ref('source_materials', true),
  });
  // Generic foreign keys at rows the scope can follow, as the server sends them: the target's
  // model label in `content_type` (chatbot-scope.ts).
  for (const [resource, target, model] of [
    ['custom_tagged_items', 'chat_messages', 'chat.chatmessage'],
    ['user_comments', 'sessions', 'experiments.experimentsession'],
  ] as const) {
    const fields = fieldsOf(resource);
    delete fields.content_type_id;
    Object.assign(fields, { content_type: choice([model]), object_id: ref(target) });
  }
  // A chatbot's triggers, and the event action each runs: an owned row with no link to its
  // chatbot, reached only through the trigger naming it.
  const triggers = [
    resource('event_actions', 'events.eventaction', 'pk', {
      ...timestamps,
      action_type: choice(['log', 'send_message_to_bot', 'end_conversation', 'pipeline_start']),
      params: json('object'),
    }),
    resource('static_triggers', 'events.statictrigger', 'pk', {
      ...timestamps,
      type: choice(['conversation_start', 'new_human_message', 'participant_joined']),
      is_active: boolean(),
      action: ref('event_actions'),
      experiment: ref('chatbots'),
    }),
    resource('timeout_triggers', 'events.timeouttrigger', 'pk', {
      ...timestamps,
      delay: integer(),
      total_num_triggers: integer(),
      is_active: boolean(),
      action: ref('event_actions'),
      experiment: ref('chatbots'),
    }),
    resource('scheduled_triggers', 'events.scheduledtrigger', 'pk', {
      ...timestamps,
      name: string('title'),
      cron_expression: choice(['0 9 * * *', '*/30 * * * *']),
      is_active: boolean(),
      action: ref('event_actions'),
      experiment: ref('chatbots'),
    }),
  ];
  const after = fixture.findIndex((entry) => entry.resource === 'chatbot_channels');
  fixture.splice(after + 1, 0, ...triggers);
  return fixture;
}

export interface SampleDatasetOptions {
  /** PRNG seed (default 42): the same seed gives the same rows. */
  seed?: number;
  /** Rows per resource (default 20). */
  rowsPerResource?: number;
  /** One resource with many rows (the benchmark: `chat_messages` with 1,000,000). */
  bigResource?: { resource: string; rows: number };
  /** Put `\u0000` in some text values. */
  nulChars?: boolean;
  /** First ids per resource, e.g. `{ chat_messages: 2n ** 60n }` for 64-bit ids. */
  firstIds?: DatasetFromFixtureOptions['firstIds'];
  /** Rows per resource overriding rowsPerResource. */
  rowCounts?: Record<string, number>;
  /** The scoped sample fixture (for the fake's `chatbotChoice`). */
  scoped?: boolean;
}

/** The sample fixture filled with generated rows. `dataset.fixture` is the fixture used. */
export function createSampleDataset(options: SampleDatasetOptions = {}): FakeDataset {
  const fixture = options.scoped ? scopedSampleFixture() : sampleFixture();
  const rowCounts: Record<string, number> = { ...options.rowCounts };
  if (options.bigResource) {
    if (!fixture.some((entry) => entry.resource === options.bigResource?.resource)) {
      throw new Error(`The sample fixture has no resource ${options.bigResource.resource}.`);
    }
    rowCounts[options.bigResource.resource] = options.bigResource.rows;
  }
  return datasetFromFixture(fixture, {
    seed: options.seed,
    rowsPerResource: options.rowsPerResource,
    rowCounts,
    nulChars: options.nulChars,
    firstIds: options.firstIds,
  });
}
