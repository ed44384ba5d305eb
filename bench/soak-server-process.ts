/**
 * Child process of the soak (soak.ts): the built-in fake export server with the sample team (every
 * resource kind, sealed fields, file contents), the team's rate limit, faults at a steady rate,
 * and rows that change on a timer (new rows and files, edits, deletions a full refresh finds).
 * Run by the soak, never by hand; it answers requests from its parent over IPC.
 */
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { SeededRandom } from '../src/fake-server/random.js';
import {
  DEFAULT_ADMIN_API_KEY,
  startFakeServer,
  type FakeServer,
} from '../src/fake-server/server.js';
import { REAL_FAULTS } from './bench-dataset.js';
import { serveParent } from './child-process.js';

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
    }
  /** Rounds of changes made so far. */
  | { type: 'changes' }
  | { type: 'close' };

export interface SoakServerStarted {
  url: string;
  apiKey: string;
}

let server: FakeServer | undefined;
let timer: NodeJS.Timeout | undefined;
let changes = 0;

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
  dataset.remove('chat_messages', some('chat_messages', 1));
  dataset.remove('usage_records', some('usage_records', 1));
  // The request log would grow for the whole soak; nothing reads it here.
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
        rateLimit: { limit: 2000, windowSeconds: 300 },
        randomFaults:
          request.faultRate > 0
            ? { seed: request.seed, rate: request.faultRate, kinds: REAL_FAULTS }
            : undefined,
      });
      server = started;
      const random = new SeededRandom(request.seed);
      timer = setInterval(() => change(started, random), request.changeSeconds * 1000);
      return { url: started.url, apiKey: DEFAULT_ADMIN_API_KEY } satisfies SoakServerStarted;
    }
    case 'changes':
      return changes;
    case 'close':
      clearInterval(timer);
      await server?.close();
      server = undefined;
      setImmediate(() => process.exit(0));
      return undefined;
  }
}

serveParent(handle);
