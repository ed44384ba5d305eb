/**
 * The pool of threads that opens sealed values (src/sealing/open-pool.ts): threads start with the
 * first batch and stop on close, a batch comes back whole and in order or not at all (aborted, a
 * thread that stopped, the pool closed), and the built CLI starts its threads from dist/.
 */
import { spawn } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import nacl from 'tweetnacl';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer } from '../src/fake-server/server.js';
import { openArchived } from '../src/sealing/archive.js';
import { OpenThreadPool, createSealedValueOpener } from '../src/sealing/open-pool.js';
import { sealValue } from '../src/sealing/seal.js';
import {
  createTestWarehouse,
  expectWarehouseEqualsSource,
  syncEnv,
  teamKeys,
  temporaryDirectory,
} from './support.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

let privateKey: KeyObject;
let publicKey: KeyObject;
let otherPublic: KeyObject;

beforeAll(() => {
  ({ privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 }));
  ({ publicKey: otherPublic } = generateKeyPairSync('rsa', { modulusLength: 2048 }));
});

const sealedNumbers = (count: number) =>
  Array.from({ length: count }, (_, n) => sealValue({ n, secret: `s-${n}` }, publicKey));

describe('the pool of threads that opens sealed values', () => {
  let pools: OpenThreadPool[] = [];
  const pool = (size: number, threadModule?: URL) => {
    const created = new OpenThreadPool({ privateKey }, size, threadModule);
    pools.push(created);
    return created;
  };
  afterEach(async () => {
    await Promise.all(pools.map((created) => created.close()));
    pools = [];
  });

  it('starts no thread before the first batch, no more than its size, none after close', async () => {
    const opener = pool(2);
    expect(opener.running).toBe(0);
    // A few values: one thread opens them (starting another would cost more than it saves).
    expect((await opener.open('plaintext', sealedNumbers(30))).failures).toEqual([]);
    expect(opener.running).toBe(1);
    const tokens = sealedNumbers(200);
    const opened = await opener.open('plaintext', tokens);
    // Cut into chunks: both threads had work, and every value came back in its place.
    expect(opener.running).toBe(2);
    expect(opened).toEqual({
      values: tokens.map((_, n) => ({ n, secret: `s-${n}` })),
      failures: [],
    });
    await opener.close();
    expect(opener.running).toBe(0);
    // A later batch starts them again.
    expect((await opener.open('plaintext', tokens.slice(0, 2))).values).toEqual([
      { n: 0, secret: 's-0' },
      { n: 1, secret: 's-1' },
    ]);
    expect(opener.running).toBeGreaterThan(0);
    expect(await opener.open('plaintext', [])).toEqual({ values: [], failures: [] });
  });

  it('reseals on the threads: the archive key reaches them with the private key', async () => {
    const archive = nacl.box.keyPair();
    const opener = new OpenThreadPool({ privateKey, archivePublicKey: archive.publicKey }, 2);
    pools.push(opener);
    const { values, failures } = await opener.open('reseal', sealedNumbers(5));
    expect(failures).toEqual([]);
    expect(values.map((text) => openArchived(text as string, archive.secretKey))).toEqual(
      [0, 1, 2, 3, 4].map((n) => ({ n, secret: `s-${n}` })),
    );
  });

  it('names each value that does not open by its index, lowest first, never by its text', async () => {
    const tokens = sealedNumbers(40);
    tokens[31] = sealValue('other key', otherPublic);
    tokens[7] = sealValue('other key too', otherPublic);
    const opened = await pool(2).open('plaintext', tokens);
    expect(opened.failures).toEqual([
      { index: 7, reason: 'key does not match (RSA-OAEP failed)' },
      { index: 31, reason: 'key does not match (RSA-OAEP failed)' },
    ]);
    expect(opened.values[8]).toEqual({ n: 8, secret: 's-8' });
    // A thread without the private key refuses every value, saying why.
    const keyless = new OpenThreadPool({}, 1);
    pools.push(keyless);
    expect((await keyless.open('plaintext', tokens.slice(0, 1))).failures).toEqual([
      { index: 0, reason: 'a private key is needed to open sealed values' },
    ]);
  });

  it('an aborted batch rejects with the reason, leaves no listener, and the pool goes on', async () => {
    const opener = pool(1);
    const controller = new AbortController();
    const batch = opener.open('plaintext', sealedNumbers(60), controller.signal);
    controller.abort(new Error('the run was interrupted'));
    await expect(batch).rejects.toThrow('the run was interrupted');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await expect(opener.open('plaintext', [], controller.signal)).resolves.toEqual({
      values: [],
      failures: [],
    });
    await expect(opener.open('plaintext', sealedNumbers(1), controller.signal)).rejects.toThrow(
      'the run was interrupted',
    );
    // A batch that ends normally takes its listener away too.
    const quiet = new AbortController();
    await opener.open('plaintext', sealedNumbers(3), quiet.signal);
    expect(getEventListeners(quiet.signal, 'abort')).toHaveLength(0);
  });

  it('a thread that stops fails the batch it held; the next batch gets a new thread', async () => {
    const opener = pool(1, new URL('./open-thread-that-stops.mjs', import.meta.url));
    await expect(opener.open('plaintext', [...sealedNumbers(1), 'stop'])).rejects.toThrow(
      'A thread that opens sealed values stopped (it exited with code 7); the page was not stored.',
    );
    expect(opener.running).toBe(0);
    expect((await opener.open('plaintext', sealedNumbers(2))).values).toEqual([
      { n: 0, secret: 's-0' },
      { n: 1, secret: 's-1' },
    ]);
  });

  it('close refuses the batches still waiting', async () => {
    const opener = pool(1);
    const waiting = expect(opener.open('plaintext', sealedNumbers(40))).rejects.toThrow(
      'The threads that open sealed values were stopped.',
    );
    await opener.close();
    await waiting;
    expect(opener.running).toBe(0);
  });

  it('open_threads 0 opens on this thread; anything else is a pool of that size', async () => {
    const here = createSealedValueOpener({ privateKey }, 0);
    expect(here).not.toBeInstanceOf(OpenThreadPool);
    expect((await here.open('plaintext', sealedNumbers(2))).values).toHaveLength(2);
    const threads = createSealedValueOpener({ privateKey }, 3);
    expect(threads).toBeInstanceOf(OpenThreadPool);
    expect((threads as OpenThreadPool).size).toBe(3);
    expect(() => new OpenThreadPool({}, 0)).toThrow(RangeError);
    expect(() => new OpenThreadPool({}, 65)).toThrow(RangeError);
  });
});

describe('from a build', () => {
  it('the CLI (bin/ocs-sync.js) opens sealed values on threads started from dist/', async (context) => {
    const built = join(root, 'dist/src/sealing/open-pool.js');
    if (!existsSync(built)) context.skip('the built CLI is needed: run `npm run build` first');
    if (statSync(built).mtimeMs < statSync(join(root, 'src/sealing/open-pool.ts')).mtimeMs) {
      context.skip('dist/ is older than src/: run `npm run build` first');
    }
    const dataset = createSampleDataset({ rowsPerResource: 15, seed: 31 });
    const server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const warehouse = await createTestWarehouse('sqlite');
    const directory = temporaryDirectory();
    try {
      const env = {
        ...process.env,
        ...syncEnv(server.url, warehouse.env, {
          OCS_PAGE_SIZE: '4',
          OCS_SECRETS_OPEN_THREADS: '2',
          OCS_FILES_DIR: join(directory.path, 'files'),
        }),
      };
      const result = await new Promise<{ code: number | null; output: string }>((resolve) => {
        let output = '';
        const child = spawn(process.execPath, [join(root, 'bin/ocs-sync.js'), 'sync'], { env });
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.on('close', (code) => resolve({ code, output }));
      });
      expect(result.code, result.output).toBe(0);
      await expectWarehouseEqualsSource(warehouse, dataset);
    } finally {
      await server.close();
      await warehouse.dispose();
      directory.remove();
    }
  }, 120_000);
});
