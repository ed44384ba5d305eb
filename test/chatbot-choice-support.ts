/**
 * Shared plumbing of the chatbot-choice suites: a scoped fake server, a warehouse opened through
 * the engine's public API, and what the fake served (the ground truth the warehouse is held to).
 */
import { afterEach } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { ChatbotScopeView } from '../src/fake-server/chatbot-scope.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import {
  startFakeServer,
  type FakeServer,
  type FakeServerOptions,
} from '../src/fake-server/server.js';
import type { Row, Warehouse } from '../src/interfaces.js';
import { silentLogger } from '../src/log.js';
import { runSync, type SyncOptions, type SyncReport } from '../src/sync/engine.js';
import { openWarehouse } from '../src/warehouse/open.js';
import { createTestWarehouse, teamKeys, testSource, type TestWarehouse } from './support.js';

export interface ScopedBed {
  server: FakeServer;
  dataset: FakeDataset;
  stored: TestWarehouse;
  /** Opened through the public API (a test may close and reopen it). */
  warehouse: Warehouse;
  /** Every row the fake ever served: `resource/id`. */
  served: Set<string>;
  /** Each row's last serving (`resource/id`): the choice's key then, and the row as served. */
  lastServed: Map<string, { key: string; row: Row }>;
  /** Serves the same rows from a new server: without choices, unless the options give one. */
  replaceServer(options?: Partial<FakeServerOptions>): Promise<FakeServer>;
  /** One run through the engine; the source is opened and closed around it. */
  sync(options?: Partial<SyncOptions>): Promise<SyncReport>;
  /** Public ids of the dataset's working-version chatbots, in id order. */
  chatbots(): string[];
  close(): Promise<void>;
}

/**
 * A describe block's scoped beds: `open` one (closed after the test, or by `close`), and the ids a
 * choice serves of a resource of the bed's server now.
 */
export function scopedBeds(dialect: 'sqlite' | 'postgres') {
  let bed: ScopedBed | undefined;
  const close = async () => {
    await bed?.close();
    bed = undefined;
  };
  afterEach(close);
  return {
    open: async (options: Parameters<typeof openScopedBed>[1] = {}) =>
      (bed = await openScopedBed(dialect, options)),
    close,
    inScope: (current: ScopedBed, chosen: string[], resource: string) =>
      idsInScope(
        current.dataset,
        chosen,
        resource,
        current.server.manifest().entries.find((entry) => entry.resource === resource)!.model,
      ),
  };
}

export async function openScopedBed(
  dialect: 'sqlite' | 'postgres',
  options: {
    seed?: number;
    rowsPerResource?: number;
    chosen?: string[];
  } & Partial<FakeServerOptions> = {},
): Promise<ScopedBed> {
  const dataset = options.dataset ?? scopedDataset(options.seed ?? 3, options.rowsPerResource ?? 8);
  const served = new Set<string>();
  const lastServed = new Map<string, { key: string; row: Row }>();
  const chatbots = () => workingChatbots(dataset);
  const start = (serverOptions: Partial<FakeServerOptions>) =>
    startFakeServer({
      teamPublicKeyPem: teamKeys().publicKey,
      ...serverOptions,
      dataset,
      onPageServed: (info) => {
        const key = bed.server.choice?.key() ?? 'all';
        for (const row of info.rows) {
          served.add(`${info.resource}/${String(row.id)}`);
          lastServed.set(`${info.resource}/${String(row.id)}`, { key, row });
        }
      },
    });
  const server = await start({ ...options, chatbotChoice: { chosen: options.chosen ?? [] } });
  const stored = await createTestWarehouse(dialect);
  const warehouse = await openWarehouse({
    url: stored.env.OCS_WAREHOUSE_URL!,
    ...(stored.env.OCS_WAREHOUSE_SCHEMA ? { schema: stored.env.OCS_WAREHOUSE_SCHEMA } : {}),
  });
  const bed: ScopedBed = {
    server,
    dataset,
    stored,
    warehouse,
    served,
    lastServed,
    chatbots,
    async replaceServer(serverOptions = {}) {
      await bed.server.close();
      bed.server = await start(serverOptions);
      return bed.server;
    },
    async sync(overrides = {}) {
      const source = testSource(bed.server.url);
      try {
        return await runSync({
          source,
          warehouse: bed.warehouse,
          logger: silentLogger(),
          pageSize: 5,
          secrets: { keys: {}, policyFor: () => 'sealed' },
          onSchemaChange: 'evolve',
          history: true,
          deletes: 'mark',
          pagesInFlight: 3,
          concurrency: 2,
          lockWaitMs: 0,
          ...overrides,
        });
      } finally {
        await source.close();
      }
    },
    async close() {
      await bed.warehouse.close();
      await bed.server.close();
      await stored.dispose();
    },
  };
  return bed;
}

/**
 * The scoped sample: a few chatbots with many conversations each, so every choice serves some of
 * everything. `rowCounts` adds to or overrides the counts.
 */
export function scopedDataset(
  seed: number,
  rowsPerResource = 8,
  rowCounts: Record<string, number> = {},
): FakeDataset {
  return createSampleDataset({
    scoped: true,
    seed,
    rowsPerResource,
    rowCounts: {
      chatbots: 3,
      sessions: 24,
      chats: 20,
      chat_messages: 40,
      participants: 12,
      participant_data: 16,
      chat_attachments: 10,
      traces: 10,
      scheduled_messages: 10,
      usage_records: 10,
      custom_tagged_items: 10,
      user_comments: 10,
      scores: 10,
      ...rowCounts,
    },
  });
}

/**
 * Denser shared rows: three pipelines with many nodes each, so each chatbot reaches several rows
 * of every provider, collection and source.
 */
export const SHARED_ROWS: Readonly<Record<string, number>> = {
  pipelines: 3,
  pipeline_nodes: 40,
  collections: 10,
  collection_files: 30,
  document_sources: 20,
  file_chunk_embeddings: 30,
  chatbot_channels: 15,
  source_materials: 8,
};

/**
 * Whether the choice would serve `row` were it back on the server, every other row as it is now:
 * then the rows served show it is gone (a deletion a full refresh under the choice must record).
 */
export function wouldServe(
  dataset: FakeDataset,
  chosen: readonly string[],
  resource: string,
  model: string,
  row: Row,
): boolean {
  const id = String(row.id);
  dataset.insert(resource, [row]);
  try {
    return idsInScope(dataset, chosen, resource, model).has(id);
  } finally {
    dataset.remove(resource, [id]);
  }
}

/**
 * The links an owned row belongs to its chatbot by that a database would not cascade on its own:
 * an owned row never outlives its place in a chatbot (docs/chatbot-choice.md), so the server
 * deletes it with its owner. `[resource, field]`: a row of `resource` goes with the row its
 * nullable `field` names (a score with its session).
 */
const OWNED_BY: ReadonlyArray<readonly [resource: string, field: string]> = [['scores', 'session']];

/**
 * The other way round: deleting a row of `resource` deletes the owned row it names in `field` (a
 * session takes its chat with it, a trigger its event action).
 */
const OWNS: ReadonlyArray<readonly [resource: string, field: string]> = [
  ['sessions', 'chat'],
  ['static_triggers', 'action'],
  ['timeout_triggers', 'action'],
  ['scheduled_triggers', 'action'],
];

/**
 * Deletes rows as the server's database does: a row whose required (non-null) reference names a
 * deleted row goes with it, and so does an owned row with its owner (OWNED_BY, OWNS); any other
 * nullable reference is set to null (`nullify`) or left naming the gone row (a reference the
 * database does not hold, as in a JSON field). Returns every row deleted, `resource/id`.
 */
export function deleteAsServer(
  dataset: FakeDataset,
  resource: string,
  ids: readonly string[],
  nullify: boolean,
): string[] {
  const fixture = dataset.fixture ?? [];
  const deleted: string[] = [];
  const queue = ids.map((id) => ({ resource, id }));
  for (let next = queue.shift(); next; next = queue.shift()) {
    const row = dataset.rows(next.resource).find((candidate) => String(candidate.id) === next.id);
    if (dataset.remove(next.resource, [next.id]) === 0) continue;
    deleted.push(`${next.resource}/${next.id}`);
    for (const [owner, field] of OWNS) {
      const target = fixture.find((entry) => entry.resource === owner)?.fields[field]?.references;
      if (owner === next.resource && target && row?.[field] != null) {
        queue.push({ resource: target, id: String(row[field]) });
      }
    }
    for (const referring of fixture) {
      if (!dataset.hasResource(referring.resource)) continue;
      for (const [field, spec] of Object.entries(referring.fields)) {
        if (spec.references !== next.resource) continue;
        const naming = dataset
          .rows(referring.resource)
          .filter((row) => String(row[field]) === next.id)
          .map((row) => String(row.id));
        const owned = OWNED_BY.some(([name, by]) => name === referring.resource && by === field);
        if (!spec.nullable || owned) {
          queue.push(...naming.map((id) => ({ resource: referring.resource, id })));
        } else if (nullify && naming.length > 0) {
          dataset.edit(referring.resource, naming, { [field]: null });
        }
      }
    }
  }
  return deleted;
}

/** Public ids of the dataset's working-version chatbots (the ones a choice names), in id order. */
export function workingChatbots(dataset: FakeDataset): string[] {
  return dataset
    .rows('chatbots')
    .filter((row) => row.working_version === null || row.working_version === undefined)
    .map((row) => String(row.public_id));
}

/** The ids the choice serves of one resource now, as the fake computes them. */
export function idsInScope(
  dataset: FakeDataset,
  chosen: readonly string[],
  resource: string,
  model: string,
): Set<string> {
  const view = new ChatbotScopeView(dataset, chosen);
  const include = view.chatbots.length > 0 ? view.includes(resource, model) : undefined;
  return new Set(
    dataset
      .rows(resource)
      .filter((row) => include === undefined || include(row))
      .map((row) => String(row.id)),
  );
}

export interface StoredFlags {
  id: string;
  deleted: boolean;
  outOfScope: boolean;
  servedUnder: string | null;
}

/** Every row of a table with our flags, whatever the dialect (none: no such table yet). */
export async function storedFlags(stored: TestWarehouse, table: string): Promise<StoredFlags[]> {
  const exists = await stored.query(
    `SELECT count(*) AS n FROM _ocs_columns WHERE table_name = '${table}'`,
  );
  if (Number(exists[0]?.n ?? 0) === 0) return [];
  const rows = await stored.query(
    `SELECT id, _deleted_at, _ocs_out_of_scope_since, _ocs_served_under FROM "${table}" ORDER BY id`,
  );
  return rows.map((row) => ({
    id: String(row.id),
    deleted: row._deleted_at !== null,
    outOfScope: row._ocs_out_of_scope_since !== null,
    servedUnder: (row._ocs_served_under as string | null) ?? null,
  }));
}
