/**
 * `serve` on every dialect: paging as the server pages (limit default and cap, both cursor kinds,
 * `Z` or `+00:00` in a cursor), the HTTP answers around it, file contents, the secrets policies
 * (reseal opened with the archive key, sealed served as stored, drop refused), every refusal,
 * and the `serve` command itself.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { main } from '../src/cli/main.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { blobPath } from '../src/files/blob-store.js';
import { generateArchiveKeyPair, loadArchiveSecretKey } from '../src/sealing/keys.js';
import { isSealedToken } from '../src/sealing/detect.js';
import { openSealedValue } from '../src/sealing/open.js';
import { FailedKeyThrottle } from '../src/serve/failed-keys.js';
import {
  SERVE_KEY,
  get,
  restoreKeyPair,
  serveWarehouse,
  walk,
  type ServedWarehouse,
} from './serve-support.js';
import {
  ADMIN_KEY,
  createTestWarehouse,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  startCli,
  waitFor,
  type TestWarehouse,
} from './support.js';

type Row = Record<string, unknown>;
interface PageBody {
  cursor: string | null;
  has_more: boolean;
  results: Row[];
}

const BIG = 1_150;

describe.each(splitDialects)('serve (%s)', (dialect) => {
  let dataset: FakeDataset;
  let fake: FakeServer;
  let warehouse: TestWarehouse;
  let served: ServedWarehouse;
  const directory = temporaryDirectory();
  const restorePublicKey = () => createPublicKey(restoreKeyPair().publicKey);
  const sealedResource = 'llm_providers';

  beforeAll(async () => {
    dataset = createSampleDataset({
      rowsPerResource: 12,
      seed: 7,
      rowCounts: { chat_messages: BIG, participants: BIG },
    });
    fake = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    warehouse = await createTestWarehouse(dialect);
    const result = await runCli(['sync'], { ...syncEnv(fake.url, warehouse.env) });
    expect(result.code, result.logs.slice(-1500)).toBe(0);
    served = await serveWarehouse(warehouse, { sealing: { publicKey: restorePublicKey() } });
  }, 120_000);

  afterAll(async () => {
    await served?.close();
    await fake?.close();
    await warehouse?.dispose();
    directory.remove();
  });

  const page = async (resource: string, query = '') => {
    const response = await get(`${served.url}/api/export/${resource}/${query}`);
    expect(response.status, response.text.slice(0, 200)).toBe(200);
    return response.json() as PageBody;
  };

  it('pages 100 rows by default and at most 1000, has_more and a null cursor at the end', async () => {
    for (const resource of ['chat_messages', 'participants']) {
      const first = await page(resource);
      expect(first.results).toHaveLength(100);
      expect(first.has_more).toBe(true);
      const capped = await page(resource, '?limit=5000');
      expect(capped.results).toHaveLength(1000);
      const rest = await page(resource, `?limit=1000&cursor=${encodeURIComponent(capped.cursor!)}`);
      expect(rest.results).toHaveLength(BIG - 1000);
      expect(rest.has_more).toBe(false);
      expect(rest.cursor).toBeNull();
      const all = (await walk(served.url, resource, 100)).flatMap((body) => body.results);
      expect(all.map((row) => row.id)).toEqual(dataset.ids(resource));
    }
  });

  it('takes an updated_at_id cursor with Z or +00:00, and a pk cursor as a decimal id', async () => {
    const first = await page('chat_messages', '?limit=3');
    const last = first.results[2]!;
    expect(JSON.parse(Buffer.from(first.cursor!, 'base64').toString('utf8'))).toEqual({
      updated_at: String(last.updated_at).replace('Z', '+00:00'),
      id: last.id,
    });
    const cursorWith = (updatedAt: string) =>
      encodeURIComponent(
        Buffer.from(JSON.stringify({ updated_at: updatedAt, id: last.id })).toString('base64'),
      );
    const zulu = await page(
      'chat_messages',
      `?limit=3&cursor=${cursorWith(String(last.updated_at))}`,
    );
    const offset = await page('chat_messages', `?limit=3&cursor=${first.cursor!}`);
    expect(zulu).toEqual(offset);
    expect(zulu.results[0]!.id).not.toBe(last.id);

    const pk = await page('users', '?limit=2');
    expect(pk.cursor).toBe(String(pk.results[1]!.id));
    const next = await page('users', `?limit=2&cursor=${pk.cursor!}`);
    expect(next.results[0]!.id).toBe(dataset.ids('users')[2]);
  });

  it('answers wrong keys in turns, a few a second for the whole process, 429 past the cap; the right key never waits', async () => {
    const now = 0;
    const turns: Array<() => void> = [];
    // The clock stands still while wrong keys wait their turns: as when many arrive at once.
    const failedKeys = new FailedKeyThrottle({
      now: () => now,
      sleep: (ms) => {
        expect(ms).toBeGreaterThan(0);
        return new Promise<void>((resolve) => turns.push(resolve));
      },
      perSecond: 2,
      maxDelayMs: 2000,
    });
    const guarded = await serveWarehouse(warehouse, {
      sealing: { publicKey: restorePublicKey() },
      failedKeys,
    });
    try {
      const team = (key: string) => get(`${guarded.url}/api/export/team/`, { 'x-api-key': key });
      expect((await team('guess')).status).toBe(401);
      const waiting = [1, 2, 3, 4].map(() => team('guess'));
      await waitFor(() => turns.length === 4, 'four wrong keys waiting their turns');
      const refused = await team('guess');
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.headers['cache-control']).toBe('no-store');
      expect(refused.json()).toEqual({ detail: 'Too many wrong API keys; try again later.' });
      // The right key, while they wait and past the cap: answered at once.
      expect((await team(SERVE_KEY)).status).toBe(200);
      expect(turns).toHaveLength(4);
      for (const turn of turns) turn();
      expect((await Promise.all(waiting)).map((answer) => answer.status)).toEqual([
        401, 401, 401, 401,
      ]);
    } finally {
      await guarded.close();
    }
  });

  it('answers like the server around the pages', async () => {
    const post = await fetch(`${served.url}/api/export/users/`, {
      method: 'POST',
      headers: { 'x-api-key': SERVE_KEY },
    });
    expect(post.status).toBe(405);
    expect(await post.json()).toEqual({ detail: 'Method "POST" not allowed.' });
    const noSlash = await fetch(`${served.url}/api/export/users?limit=2`, { redirect: 'manual' });
    expect(noSlash.status).toBe(301);
    expect(noSlash.headers.get('location')).toBe('/api/export/users/?limit=2');
    expect((await get(`${served.url}/elsewhere`)).status).toBe(404);
    const negative = await get(`${served.url}/api/export/users/?limit=-4`);
    expect(negative.status).toBe(400);
    expect(negative.json()).toEqual(['`limit` must be a positive integer.']);
  });

  it('serves the stored OpenAPI document, JSON as fetched and YAML by default', async () => {
    const json = await get(`${served.url}/api/export/schema/?format=json`, {});
    expect(json.status).toBe(200);
    const fromServer = await get(`${fake.url}/api/export/schema/?format=json`, {});
    expect(json.json()).toEqual(fromServer.json());
    const yaml = await get(`${served.url}/api/export/schema/`, {});
    expect(parseYaml(yaml.text)).toEqual(JSON.parse(fromServer.text));
  });

  it('serves file contents from the blob store, 404 when there is none, 401 without a key', async () => {
    const ledger = (await warehouse.query(
      `SELECT file_id, sha256, status FROM "_ocs_files" ORDER BY file_id`,
    )) as Array<{ file_id: unknown; sha256: string | null; status: string }>;
    const stored = ledger.find((row) => row.status === 'ok');
    expect(stored).toBeDefined();
    const response = await get(`${served.url}/api/files/${String(stored!.file_id)}/content`);
    expect(response.status).toBe(200);
    expect(response.bytes.equals(readFileSync(blobPath(warehouse.filesDir, stored!.sha256!)))).toBe(
      true,
    );
    expect(String(response.headers['content-disposition'])).toMatch(/^attachment; filename/);
    const unknown = await get(`${served.url}/api/files/999999999/content`);
    expect(unknown.status).toBe(404);
    const missing = ledger.find((row) => row.status === 'missing');
    if (missing) {
      expect((await get(`${served.url}/api/files/${String(missing.file_id)}/content`)).status).toBe(
        404,
      );
    }
    const anonymous = await get(`${served.url}/api/files/${String(stored!.file_id)}/content`, {});
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toBe('Api-Key');
  });

  it('refuses, naming them, resources it cannot serve faithfully; --allow-incomplete serves them empty', async () => {
    const drop = serveWarehouse(warehouse, {
      sealing: { publicKey: restorePublicKey() },
      policyFor: (resource) => (resource === sealedResource ? 'drop' : 'plaintext'),
    });
    await expect(drop).rejects.toThrow(
      /"drop" secrets policy: llm_providers\..*--allow-incomplete/s,
    );
    await expect(
      serveWarehouse(warehouse, {
        sealing: { publicKey: restorePublicKey() },
        excludedFields: { users: ['email'] },
      }),
    ).rejects.toThrow(/fields left out by exclude_fields: users\.email/);
    await expect(serveWarehouse(warehouse)).rejects.toThrow(
      /Sealed fields of .*llm_providers.* --public-key/s,
    );
    await expect(
      serveWarehouse(warehouse, {
        asOf: new Date().toISOString(),
        sealing: { publicKey: restorePublicKey() },
      }),
    ).rejects.toThrow(/--as-of needs history, and these resources have none: team, users, /);

    const incomplete = await serveWarehouse(warehouse, {
      sealing: { publicKey: restorePublicKey() },
      policyFor: (resource) => (resource === sealedResource ? 'drop' : 'plaintext'),
      allowIncomplete: true,
    });
    try {
      const body = (await get(`${incomplete.url}/api/export/${sealedResource}/`)).json();
      expect(body).toEqual({ cursor: null, has_more: false, results: [] });
    } finally {
      await incomplete.close();
    }
  });

  it('reseal: values stored for the archive are opened with --archive-key and sealed to the restore key', async () => {
    const archiveDir = join(directory.path, `archive-${dialect}`);
    const archive = await generateArchiveKeyPair(archiveDir);
    const resealed = await createTestWarehouse(dialect);
    try {
      const result = await runCli(['sync', '--resources', `users,${sealedResource}`], {
        ...syncEnv(fake.url, resealed.env),
        OCS_SECRETS_DEFAULT: 'reseal',
        OCS_ARCHIVE_PUBLIC_KEY: archive.publicKey,
      });
      expect(result.code, result.logs.slice(-1500)).toBe(0);
      const reseal = () => (resource: string) =>
        (resource === sealedResource ? 'reseal' : 'plaintext') as 'reseal';
      await expect(
        serveWarehouse(resealed, {
          sealing: { publicKey: restorePublicKey() },
          policyFor: reseal(),
          allowIncomplete: true,
        }),
      ).rejects.toThrow(/resealed to the archive key: pass --archive-key/);
      const resealServe = await serveWarehouse(resealed, {
        sealing: {
          publicKey: restorePublicKey(),
          archiveSecretKey: loadArchiveSecretKey(archive.secretKeyPath),
        },
        policyFor: reseal(),
        allowIncomplete: true,
      });
      try {
        const rows = (await walk(resealServe.url, sealedResource, 100)).flatMap((b) => b.results);
        const original = (
          await walk(fake.url, sealedResource, 1000, { 'x-api-key': ADMIN_KEY })
        ).flatMap((b) => b.results);
        expect(rows.map((row) => openSealedValue(row.config as string, restoreKey()))).toEqual(
          original.map((row) => openSealedValue(row.config as string, teamKey())),
        );
      } finally {
        await resealServe.close();
      }
    } finally {
      await resealed.dispose();
    }
  });

  it('sealed: tokens kept as the server sent them are served as they are', async () => {
    const kept = await createTestWarehouse(dialect);
    try {
      const result = await runCli(['sync', '--resources', `users,${sealedResource}`], {
        ...syncEnv(fake.url, kept.env),
        OCS_SECRETS_DEFAULT: 'sealed',
      });
      expect(result.code, result.logs.slice(-1500)).toBe(0);
      const keptServe = await serveWarehouse(kept, {
        policyFor: () => 'sealed',
        allowIncomplete: true,
      });
      try {
        const rows = (await walk(keptServe.url, sealedResource, 100)).flatMap((b) => b.results);
        const stored = await kept.readTable(sealedResource);
        expect(rows.every((row) => isSealedToken(row.config))).toBe(true);
        expect(rows.map((row) => row.config)).toEqual(stored.map((row) => row.config));
      } finally {
        await keptServe.close();
      }
    } finally {
      await kept.dispose();
    }
  });

  it('the serve command: serves until stopped, needs an API key, checks its flags', async () => {
    const publicKeyFile = join(directory.path, `restore-${dialect}.pem`);
    writeFileSync(publicKeyFile, restoreKeyPair().publicKey);
    const env = { ...warehouse.env, OCS_LOG_LEVEL: 'error' };

    const withoutKey = await runCli(['serve', '--public-key', publicKeyFile], env);
    expect(withoutKey.code).toBe(2);
    expect(withoutKey.stderr).toMatch(/OCS_SERVE_API_KEY or pass --api-key-file/);

    // A key that can be guessed is refused, naming where it came from.
    const short = await runCli(['serve'], { ...env, OCS_SERVE_API_KEY: 'x' });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain(
      'The serve API key (OCS_SERVE_API_KEY) has 1 characters; serve refuses keys shorter than 32',
    );
    expect(short.stderr).toContain('openssl rand -hex 32');
    const shortFile = join(directory.path, `short-key-${dialect}`);
    writeFileSync(shortFile, 'a'.repeat(31));
    const shortFromFile = await runCli(['serve', '--api-key-file', shortFile], env);
    expect(shortFromFile.code).toBe(2);
    expect(shortFromFile.stderr).toContain(
      `The serve API key (--api-key-file ${shortFile}) has 31`,
    );

    const keyed = { ...env, OCS_SERVE_API_KEY: SERVE_KEY };
    const badAsOf = await runCli(['serve', '--as-of', 'yesterday'], keyed);
    expect(badAsOf.code).toBe(2);
    expect(badAsOf.stderr).toMatch(/--as-of "yesterday" is not an ISO 8601 time/);
    const badListen = await runCli(['serve', '--listen', 'nowhere'], keyed);
    expect(badListen.code).toBe(2);

    const refused = await runCli(['serve', '--listen', '127.0.0.1:0'], keyed);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/serve refuses to start[\s\S]*--public-key/);
    expect(refused.stderr).not.toContain(SERVE_KEY);

    const busy = await runCli(
      ['serve', '--listen', new URL(fake.url).host, '--public-key', publicKeyFile],
      keyed,
    );
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(
      /serve --listen 127\.0\.0\.1:\d+ cannot be opened: the address is already in use/,
    );

    const apiKeyFile = join(directory.path, `serve-key-${dialect}`);
    writeFileSync(apiKeyFile, `${SERVE_KEY}\n`);
    const controller = new AbortController();
    let stdout = '';
    const running = main(
      [
        'serve',
        '--listen',
        '127.0.0.1:0',
        '--public-key',
        publicKeyFile,
        '--api-key-file',
        apiKeyFile,
      ],
      {
        env: { ...env },
        output: { out: (line) => (stdout += `${line}\n`), err: () => undefined },
        signal: controller.signal,
      },
    );
    let url: string | undefined;
    for (let tries = 0; tries < 200 && !url; tries++) {
      url = /at (http:\/\/\S+)/.exec(stdout)?.[1];
      if (!url) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(url).toBeDefined();
    expect(stdout).toMatch(/manage\.py sync_team --source-url/);
    const team = await get(`${url!}/api/export/team/`);
    expect(team.status).toBe(200);
    expect(team.json()).toMatchObject({ is_migrating: true, has_public_key: true });
    // No answer may be kept by a cache on the way: rows, files, refusals alike.
    const answers = [
      team,
      await get(`${url!}/api/export/manifest/`),
      await get(`${url!}/api/export/team/`, { 'x-api-key': 'wrong' }),
      await get(`${url!}/api/export/nothing_here/`),
      await get(`${url!}/api/files/1/content`),
      await get(`${url!}/elsewhere`),
    ];
    for (const answer of answers) expect(answer.headers['cache-control']).toBe('no-store');
    expect(stdout).not.toContain('beyond loopback');
    controller.abort();
    expect(await running).toBe(0);

    // Beyond loopback, over plain HTTP: it starts, and says what that exposes.
    const wide = new AbortController();
    let logs = '';
    let wideOut = '';
    const wideRunning = main(['serve', '--listen', '0.0.0.0:0', '--public-key', publicKeyFile], {
      env: { ...keyed, OCS_LOG_LEVEL: 'warn' },
      output: { out: (line) => (wideOut += `${line}\n`), err: () => undefined },
      logStream: new Writable({
        write(chunk, _encoding, callback) {
          logs += chunk.toString();
          callback();
        },
      }),
      signal: wide.signal,
    });
    for (let tries = 0; tries < 200 && !wideOut.includes('Serving'); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    wide.abort();
    expect(await wideRunning).toBe(0);
    expect(logs).toContain(
      "serve listens on 0.0.0.0:0, beyond loopback, and speaks plain HTTP: the API key and the team's data",
    );
    expect(logs).toContain('unless a TLS proxy sits in front of it');
  });

  it('serve through the CLI: wrong keys from its one address never slow the right key, and make one log line; a malformed escape is a quiet 400; a key file others may read is warned about', async () => {
    const publicKeyFile = join(directory.path, `restore-guarded-${dialect}.pem`);
    writeFileSync(publicKeyFile, restoreKeyPair().publicKey);
    const apiKeyFile = join(directory.path, `serve-key-open-${dialect}`);
    writeFileSync(apiKeyFile, `${SERVE_KEY}\n`);
    chmodSync(apiKeyFile, 0o644);
    const serve = startCli(
      [
        'serve',
        '--listen',
        '127.0.0.1:0',
        '--public-key',
        publicKeyFile,
        '--api-key-file',
        apiKeyFile,
      ],
      { ...warehouse.env, OCS_LOG_LEVEL: 'info' },
    );
    try {
      const url = await waitFor(() => / at (http:\/\/\S+)/.exec(serve.logs())?.[1], 'serve');
      expect(serve.logs()).toContain(
        `serve API key file (--api-key-file) ${apiKeyFile} is accessible to group or others (mode 0644); restrict it with: chmod 600 ${apiKeyFile}`,
      );
      const malformed = await get(`${url}/api/export/%E0/`);
      expect(malformed.status).toBe(400);
      expect(malformed.json()).toEqual({ detail: 'Malformed percent-escape in the path.' });

      // Sixty wrong keys at once, every one from 127.0.0.1 (as behind a TLS proxy or a tunnel):
      // ten a second are answered 401 in turn, for 5 s at most; the rest 429 at once.
      const team = (key: string) => get(`${url}/api/export/team/`, { 'x-api-key': key });
      const answered: number[] = [];
      const wrong = Array.from({ length: 60 }, () =>
        team('guess').then((answer) => {
          answered.push(answer.status);
          return answer.status;
        }),
      );
      await waitFor(() => answered.includes(429), 'a wrong key refused past the cap');
      const right = await team(SERVE_KEY);
      expect(right.status).toBe(200);
      // Answered while wrong keys still wait their turns.
      expect(answered.length).toBeLessThan(60);
      expect(await serve.stop()).toBe(0);
      const statuses = (await Promise.allSettled(wrong)).flatMap((outcome) =>
        outcome.status === 'fulfilled' ? [outcome.value] : [],
      );
      expect(new Set(statuses)).toEqual(new Set([401, 429]));
      const lines = serve
        .logs()
        .split('\n')
        .filter((line) => line.includes('wrong API key'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain('serve: 60 wrong API keys');
      expect(lines[0]).toContain('127.0.0.1');
      expect(serve.logs()).not.toMatch(/"level":50|cannot answer/);
    } finally {
      await serve.stop();
    }
  });

  function restoreKey() {
    return createPrivateKey(restoreKeyPair().privateKey);
  }
  function teamKey() {
    return createPrivateKey(teamKeys().privateKey);
  }
});

describe.each(splitDialects)('serve gives back values a column changes (%s)', (dialect) => {
  it('date-times in another form, NUL characters and key order come back as the server sent them', async () => {
    const dataset = createSampleDataset({ rowsPerResource: 4, seed: 3 });
    const odd = {
      created_at: '2026-01-01T12:00:00.250+02:00',
      summary: 'before\u0000after',
      metadata: { zebra: 1, a: { y: 'nul\u0000', b: [2, { d: 1, c: 2 }] }, big: 1e21 },
    };
    const fake = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      transformRow: (resource, row) => (resource === 'collections' ? { ...row, ...odd } : row),
    });
    const warehouse = await createTestWarehouse(dialect);
    try {
      const result = await runCli(['sync', '--resources', 'users,collections'], {
        ...syncEnv(fake.url, warehouse.env),
      });
      expect(result.code, result.logs.slice(-1500)).toBe(0);
      const served = await serveWarehouse(warehouse, {
        sealing: { publicKey: createPublicKey(restoreKeyPair().publicKey) },
        allowIncomplete: true,
      });
      try {
        const fromServe = (await walk(served.url, 'collections', 100)).flatMap((b) => b.results);
        const fromServer = (
          await walk(fake.url, 'collections', 1000, { 'x-api-key': ADMIN_KEY })
        ).flatMap((b) => b.results);
        expect(fromServe.length).toBeGreaterThan(0);
        const text = (rows: Row[]) =>
          rows.map((row) =>
            JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)),
          );
        expect(text(fromServe)).toEqual(text(fromServer));
        expect(fromServe[0]!.created_at).toBe(odd.created_at);
      } finally {
        await served.close();
      }
    } finally {
      await fake.close();
      await warehouse.dispose();
    }
  });
});
