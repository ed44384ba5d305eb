/**
 * Child process of the soak (soak.ts): the built-in fake export server with the sample team (every
 * resource kind, sealed fields, file contents), the team's rate limit, faults at a steady rate,
 * and rows that change on a timer (new rows and files, edits, deletions a full refresh finds).
 * The chaos soak (chaos.ts) changes its faults as it goes, quiets it, and asks for the truth a
 * warehouse must equal. Run by the soaks, never by hand; it answers its parent over IPC.
 */
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { contentDigest } from '../src/fake-server/file-contents.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { SeededRandom } from '../src/fake-server/random.js';
import {
  DEFAULT_ADMIN_API_KEY,
  FILE_CONTENT_ENDPOINT,
  startFakeServer,
  type FakeFault,
  type FakeServer,
} from '../src/fake-server/server.js';
import { REAL_FAULTS } from './bench-dataset.js';
import { serveParent } from './child-process.js';
import { storedFormOf, type Dialect, type StoredRow } from './warehouse-rows.js';

export type SoakServerRequest =
  | {
      type: 'start';
      rowsPerResource: number;
      seed: number;
      /** Share of requests answered with a fault instead. */
      faultRate: number;
      /** Seconds between two rounds of changes. */
      changeSeconds: number;
      /** Where to write the team's private key (PEM). */
      privateKeyFile: string;
      /** The team's API budget per 5-minute window. */
      rateLimit: number;
    }
  /** Rounds of changes made so far. */
  | { type: 'changes' }
  /**
   * Faults from now on, instead of the ones before: `kinds` at `rate`, headers a proxy sets on
   * every answer, and faults for the next file content requests.
   */
  | {
      type: 'faults';
      kinds: FakeFault[];
      rate: number;
      proxyHeaders?: Record<string, string>;
      nextFiles?: { count: number; fault: FakeFault };
    }
  /** No more changes, no more faults: what the final runs of the chaos soak read. */
  | { type: 'quiet' }
  /** What a warehouse of `dialect` must hold now (ServerTruth). */
  | { type: 'truth'; dialect: Dialect }
  | { type: 'close' };

export interface SoakServerStarted {
  url: string;
  apiKey: string;
}

/** What the server holds, for the chaos soak's final comparison. */
export interface ServerTruth {
  /** Each resource's rows, in id order, as a warehouse of the dialect should hold them. */
  tables: Record<string, StoredRow[]>;
  /** Ids (as text) of the rows the server deleted, by resource. */
  removed: Record<string, string[]>;
  /** Ids of `files` rows whose file was replaced (their `content_size` changed under them). */
  replacedFiles: string[];
  /** The bytes served for each `files` row now (null: none, a 404). */
  fileContents: Record<string, { sha256: string; size: number } | null>;
}

let server: FakeServer | undefined;
let timer: NodeJS.Timeout | undefined;
let changes = 0;
let faultSeed = 0;
const removed = new Map<string, Set<string>>();
const replacedFiles = new Set<string>();

/** Files replaced by a `replace_file` fault, read off the request log before it is cleared. */
function noteReplacedFiles(fake: FakeServer): void {
  for (const request of fake.requests) {
    if (request.fault !== 'replace_file' || request.endpoint !== FILE_CONTENT_ENDPOINT) continue;
    const id = /\/api\/files\/(\d+)\/content$/.exec(request.path)?.[1];
    if (id && request.status === 200) replacedFiles.add(id);
  }
}

function remove(fake: FakeServer, resource: string, ids: Array<string | number | bigint>): void {
  const gone = removed.get(resource) ?? new Set<string>();
  for (const id of ids) if (fake.dataset.get(resource, String(id))) gone.add(String(id));
  removed.set(resource, gone);
  fake.dataset.remove(resource, ids);
}

/** One round of changes: what a busy team does between two syncs. */
function change(fake: FakeServer, random: SeededRandom): void {
  const { dataset } = fake;
  const some = (resource: string, count: number) =>
    Array.from({ length: count }, () => dataset.randomId(resource, random)).filter(
      (id) => id !== undefined,
    );
  dataset.insert('chats', 1);
  dataset.insert('sessions', 1);
  dataset.insert('chat_messages', 5);
  dataset.insert('files', 1);
  dataset.insert('usage_records', 2);
  dataset.edit('participants', some('participants', 2));
  dataset.edit('participant_data', some('participant_data', 1));
  dataset.edit('chat_messages', some('chat_messages', 2));
  remove(fake, 'chat_messages', some('chat_messages', 1));
  remove(fake, 'usage_records', some('usage_records', 1));
  // The request log would grow for the whole soak; only replaced files are read from it.
  noteReplacedFiles(fake);
  fake.requests.length = 0;
  changes += 1;
}

async function handle(request: SoakServerRequest): Promise<unknown> {
  switch (request.type) {
    case 'start': {
      if (server) throw new Error('The fake server is already started.');
      const { publicKey, privateKey } = generateKeyPairSync('rsa', {
        modulusLength: 2048,
        publicKeyEncoding: { type: 'spki', format: 'pem' },
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      });
      writeFileSync(request.privateKeyFile, privateKey, { mode: 0o600 });
      const started = await startFakeServer({
        dataset: createSampleDataset({
          rowsPerResource: request.rowsPerResource,
          seed: request.seed,
        }),
        teamPublicKeyPem: publicKey,
        rateLimit: { limit: request.rateLimit, windowSeconds: 300 },
        randomFaults:
          request.faultRate > 0
            ? { seed: request.seed, rate: request.faultRate, kinds: REAL_FAULTS }
            : undefined,
      });
      server = started;
      faultSeed = request.seed;
      const random = new SeededRandom(request.seed);
      timer = setInterval(() => change(started, random), request.changeSeconds * 1000);
      return { url: started.url, apiKey: DEFAULT_ADMIN_API_KEY } satisfies SoakServerStarted;
    }
    case 'changes':
      return changes;
    case 'faults': {
      const fake = started();
      fake.options.randomFaults =
        request.rate > 0 && request.kinds.length > 0
          ? { seed: faultSeed, rate: request.rate, kinds: request.kinds }
          : undefined;
      fake.options.proxyHeaders = request.proxyHeaders;
      if (request.nextFiles) {
        fake.faults.failNext(request.nextFiles.count, request.nextFiles.fault, {
          resource: FILE_CONTENT_ENDPOINT,
        });
      }
      return undefined;
    }
    case 'quiet': {
      const fake = started();
      clearInterval(timer);
      fake.options.randomFaults = undefined;
      fake.options.proxyHeaders = undefined;
      fake.faults.clear();
      return undefined;
    }
    case 'truth': {
      const fake = started();
      noteReplacedFiles(fake);
      const { dataset } = fake;
      const tables: ServerTruth['tables'] = {};
      for (const resource of dataset.resources()) {
        tables[resource] = dataset.rows(resource).map((row) => storedFormOf(row, request.dialect));
      }
      const fileContents: ServerTruth['fileContents'] = {};
      for (const row of dataset.hasResource('files') ? dataset.rows('files') : []) {
        const content = fake.fileContent(row);
        fileContents[String(row.id)] = content === null ? null : contentDigest(content);
      }
      return {
        tables,
        removed: Object.fromEntries([...removed].map(([resource, ids]) => [resource, [...ids]])),
        replacedFiles: [...replacedFiles],
        fileContents,
      } satisfies ServerTruth;
    }
    case 'close':
      clearInterval(timer);
      await server?.close();
      server = undefined;
      setImmediate(() => process.exit(0));
      return undefined;
  }
}

function started(): FakeServer {
  if (!server) throw new Error('The fake server is not started.');
  return server;
}

serveParent(handle);
