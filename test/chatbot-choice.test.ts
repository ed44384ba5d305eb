/**
 * Following an export scoped to chosen chatbots (REFERENCE.md, "The next server version"): the
 * selection key, the fake's scoped protocol, and the sync against it on every dialect: narrowing,
 * widening, a change mid-run, history. The walk plan is tested in walk-plan.test.ts, the
 * randomized runs in chatbot-choice-randomized.long.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FULL_REFRESH_ALL } from '../src/sync/engine.js';
import { SELECTION_CHANGED_DETAIL, selectionKey } from '../src/export-api/selection.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { openWarehouse } from '../src/warehouse/open.js';
import type { ManifestEntry } from '../src/interfaces.js';
import { readServerScope } from '../src/sync/chatbot-choice.js';
import {
  idsInScope,
  openScopedBed,
  scopedBeds,
  storedFlags,
  type ScopedBed,
} from './chatbot-choice-support.js';
import { SERVE_KEY, get, serveWarehouse, type ServedWarehouse } from './serve-support.js';
import {
  ADMIN_KEY,
  closeCliTestBed,
  openCliTestBed,
  docsSqlBlocks,
  runCli,
  syncEnv,
  teamKeys,
  splitDialects,
  testSource,
  type CliTestBed,
} from './support.js';

// ------------------------------------------------------------------------------ the key

describe('the selection key', () => {
  it('is what the server computes, checked against keys computed independently', () => {
    // python3: hashlib.sha256('\n'.join(sorted(ids)).encode()).hexdigest()[:32], 'all' for none
    expect(selectionKey([])).toBe('all');
    expect(selectionKey(['3f2b8c1e-5a4d-4e6f-9b7a-0c1d2e3f4a5b'])).toBe(
      '3184818cade0b5461938db1f93bda226',
    );
    expect(
      selectionKey([
        'b1e0c9a2-0000-4000-8000-000000000002',
        'a7d3f1c4-0000-4000-8000-000000000001',
      ]),
    ).toBe('34184b47a77928712085c9acda9c0839');
    // Python sorts str by code point: U+FFFF before U+1F600, where UTF-16 order says otherwise.
    expect(selectionKey(['é', 'e', '\u{1F600}', '\uffff'])).toBe(
      '1eb3f1e1c582a505451ef27a4980b828',
    );
  });

  it('follows the upstream rule: order does not matter, the set does', () => {
    expect(selectionKey(['b', 'a'])).toBe(selectionKey(['a', 'b']));
    expect(selectionKey(['a'])).not.toBe(selectionKey(['a', 'b']));
    expect(selectionKey(['a'])).toMatch(/^[0-9a-f]{32}$/);
  });
});

// ------------------------------------------------------------------------------ what the server says

const entry = (resource: string, scope?: string, model = `app.${resource}`): ManifestEntry => ({
  model,
  resource,
  cursor: 'pk',
  secret: false,
  ...(scope === undefined ? {} : { scope }),
});

describe("reading the server's chatbot choice", () => {
  it('is unscoped for a server without the protocol', () => {
    expect(readServerScope({ id: 1 }, [entry('users')])).toEqual({ kind: 'unscoped' });
  });

  it('is the whole team when exportable_chatbots is present but empty, scope or not', () => {
    expect(readServerScope({ id: 1, exportable_chatbots: [] }, [entry('users')])).toEqual({
      kind: 'choice',
      choice: { key: 'all', chatbots: [] },
    });
  });

  it('sorts the chosen chatbots and keys them by public id', () => {
    const scope = readServerScope(
      {
        exportable_chatbots: [
          { public_id: 'b', name: 'Sales' },
          { public_id: 'a', name: 'Support' },
        ],
      },
      [],
    );
    expect(scope).toEqual({
      kind: 'choice',
      choice: {
        key: selectionKey(['a', 'b']),
        chatbots: [
          { publicId: 'a', name: 'Support' },
          { publicId: 'b', name: 'Sales' },
        ],
      },
    });
  });

  it('is unknown when the manifest classes resources but team/ does not say the choice', () => {
    expect(readServerScope({ id: 1 }, [entry('users', 'referenced')]).kind).toBe('unknown');
    expect(readServerScope({ exportable_chatbots: 'x' }, []).kind).toBe('unknown');
    expect(readServerScope({ exportable_chatbots: [{ name: 'no id' }] }, []).kind).toBe('unknown');
  });
});

// ------------------------------------------------------------------------------ the fake's protocol

describe("the fake server's scoped protocol", () => {
  let server: FakeServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  const get = async (path: string) => {
    const response = await fetch(`${server!.url}/api/export/${path}`, {
      headers: { 'x-api-key': ADMIN_KEY },
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('is off by default: no scope, no exportable_chatbots, no selection check', async () => {
    server = await startFakeServer({ dataset: createSampleDataset({ rowsPerResource: 3 }) });
    const manifest = (await get('manifest/')).body as { entries: Array<Record<string, unknown>> };
    expect(Object.keys(manifest.entries[0]!).sort()).toEqual([
      'cursor',
      'model',
      'resource',
      'secret',
    ]);
    const team = (await get('team/')).body;
    expect(team).not.toHaveProperty('exportable_chatbots');
    expect(team).not.toHaveProperty('require_mfa');
    expect((await get('users/?selection=whatever')).status).toBe(200);
  });

  it('classes every entry, lists the choice, checks the key and serves the choice only', async () => {
    const dataset = createSampleDataset({ scoped: true, rowsPerResource: 6, seed: 4 });
    const [first, second] = dataset.rows('chatbots');
    server = await startFakeServer({ dataset, chatbotChoice: { chosen: [] } });
    const manifest = (await get('manifest/')).body as {
      entries: Array<{ resource: string; scope: string }>;
    };
    const scopeOf = Object.fromEntries(manifest.entries.map((e) => [e.resource, e.scope]));
    expect(scopeOf).toMatchObject({
      chatbots: 'owned',
      sessions: 'owned',
      participants: 'referenced',
      llm_providers: 'referenced',
      users: 'referenced',
      evaluators: 'excluded',
      scheduled_triggers: 'owned',
    });
    const order = manifest.entries.map((e) => e.resource);
    expect(order.indexOf('scheduled_triggers')).toBe(order.indexOf('timeout_triggers') + 1);
    expect((await get('team/')).body).toMatchObject({
      exportable_chatbots: [],
      require_mfa: false,
    });
    expect((await get('evaluators/?selection=all')).body.results).not.toEqual([]);

    server.choice!.set([String(second!.public_id), String(first!.public_id)]);
    const key = selectionKey([String(first!.public_id), String(second!.public_id)]);
    expect(server.choice!.key()).toBe(key);
    const team = (await get('team/')).body as { exportable_chatbots: Array<{ public_id: string }> };
    expect(team.exportable_chatbots.map((chatbot) => chatbot.public_id)).toEqual(
      [String(first!.public_id), String(second!.public_id)].sort(),
    );
    expect(await get('chatbots/?selection=all')).toEqual({
      status: 409,
      body: { detail: SELECTION_CHANGED_DETAIL },
    });
    const chatbots = await get(`chatbots/?selection=${key}`);
    expect((chatbots.body.results as Array<{ id: number }>).map((row) => row.id)).toEqual([
      first!.id,
      second!.id,
    ]);
    // No parameter, no check; an excluded resource is an empty last page.
    expect((await get('chatbots/')).status).toBe(200);
    expect((await get(`evaluators/?selection=${key}`)).body).toEqual({
      cursor: null,
      has_more: false,
      results: [],
    });

    server.choice!.changeAfter(1, []);
    expect((await get(`chatbots/?selection=${key}`)).status).toBe(200);
    expect((await get(`chatbots/?selection=${key}`)).status).toBe(409);
    expect(server.choice!.key()).toBe('all');
  });
});

// ------------------------------------------------------------------------------ the sync

describe.each(splitDialects)('following a chatbot choice (%s)', (dialect) => {
  const { open, inScope } = scopedBeds(dialect);

  it('sends nothing new to a server without the protocol: exactly the pages the server has', async () => {
    const current = await open();
    // The bed turns the protocol on; serve the same rows from a plain server instead (whose
    // team has no public key: its sealed resources are not asked for).
    const plain = await current.replaceServer({ teamPublicKeyPem: undefined });
    const report = await current.sync({ concurrency: 1, pagesInFlight: 1, pageSize: 4 });
    expect(report.choice).toBeUndefined();

    const expected: string[] = ['manifest/ {}', 'schema/ {"format":"json"}', 'team/ {}'];
    for (const { resource, cursor: kind, secret } of plain.manifest().entries) {
      if (secret) continue; // not requested: the team has no public key
      let cursor: string | null = null;
      for (;;) {
        expected.push(
          `${resource}/ ${JSON.stringify({ limit: '4', ...(cursor ? { cursor } : {}) })}`,
        );
        const page = current.dataset.pageAfter(resource, kind, cursor, 4);
        if (!page.hasMore) break;
        cursor = page.cursor;
      }
    }
    const sent = plain.requests.map(
      (request) => `${request.path.replace('/api/export/', '')} ${JSON.stringify(request.query)}`,
    );
    expect(sent).toEqual(expected);
    expect(await current.warehouse.bookkeeping.chatbotChoices()).toEqual(new Map());
  });

  it('never takes absence for deletion when the server classes resources but hides its choice', async () => {
    const current = await open();
    await current.replaceServer({
      // The least such a server could send: `scope` in the manifest, nothing in team/.
      transformManifest: (manifest) => ({
        ...manifest,
        entries: manifest.entries.map((item) => ({ ...item, scope: 'owned' as const })),
      }),
    });
    expect((await current.sync()).status).toBe('ok');
    const [gone] = current.dataset.ids('sessions');
    current.dataset.remove('sessions', [gone!]);
    current.server.requests.length = 0;
    const report = await current.sync({ fullRefresh: FULL_REFRESH_ALL });
    expect(report.status).toBe('ok');
    expect(report.choice).toBeUndefined();
    const flags = await storedFlags(current.stored, 'sessions');
    expect(flags.find((row) => row.id === String(gone))).toMatchObject({
      deleted: false,
      outOfScope: true,
      servedUnder: 'unknown',
    });
    expect(current.server.requests.some((request) => 'selection' in request.query)).toBe(false);
    // Every run reads every resource from the start: nothing it cannot see is skipped.
    current.server.requests.length = 0;
    await current.sync();
    const firstPages = current.server.requests.filter(
      (request) => request.resource === 'sessions' && request.query.cursor === undefined,
    );
    expect(firstPages).toHaveLength(1);
  });

  it('sends the key with every resource request and never asks for excluded resources', async () => {
    const current = await open();
    const [a] = current.chatbots();
    current.server.choice!.set([a!]);
    const report = await current.sync();
    expect(report.status).toBe('ok');
    expect(report.choice?.key).toBe(selectionKey([a!]));
    const pages = current.server.requests.filter((request) => request.resource !== undefined);
    expect(pages.length).toBeGreaterThan(20);
    for (const request of pages) expect(request.query.selection).toBe(selectionKey([a!]));
    expect(pages.some((request) => request.resource === 'evaluators')).toBe(false);
    expect(report.resources.find((r) => r.resource === 'evaluators')).toMatchObject({
      status: 'excluded',
      error: "excluded by the team's chatbot choice",
    });
    const state = await current.warehouse.bookkeeping.getResourceState('evaluators');
    expect(state?.excludedAt).not.toBeNull();
    expect(state?.lastError).toBeNull();
  });

  it('narrowing then a full refresh: out-of-scope rows stay undeleted, an in-scope deletion is marked', async () => {
    const current = await open();
    const [a, b] = current.chatbots();
    current.server.choice!.set([a!, b!]);
    expect((await current.sync()).status).toBe('ok');
    const bothSessions = inScope(current, [a!, b!], 'sessions');
    const onlyA = inScope(current, [a!], 'sessions');
    expect(onlyA.size).toBeGreaterThan(0);
    expect(bothSessions.size).toBeGreaterThan(onlyA.size);

    current.server.choice!.set([a!]);
    current.server.requests.length = 0;
    expect((await current.sync()).status).toBe('ok');
    // Narrowing: owned walks go on from their cursor, shared ones are read from the start.
    const firstPage = (resource: string) =>
      current.server.requests.find((request) => request.resource === resource)!.query;
    expect(firstPage('sessions').cursor).toBeDefined();
    expect(firstPage('participants').cursor).toBeUndefined();

    expect((await current.sync({ fullRefresh: FULL_REFRESH_ALL })).status).toBe('ok');
    let flags = await storedFlags(current.stored, 'sessions');
    expect(flags.filter((row) => row.deleted)).toEqual([]);
    expect(new Set(flags.filter((row) => row.outOfScope).map((row) => row.id))).toEqual(
      new Set([...bothSessions].filter((id) => !onlyA.has(id))),
    );

    const [gone] = [...onlyA];
    current.dataset.remove('sessions', [gone!]);
    const report = await current.sync({ fullRefresh: FULL_REFRESH_ALL });
    expect(report.resources.find((r) => r.resource === 'sessions')?.deleted).toBe(1);
    flags = await storedFlags(current.stored, 'sessions');
    expect(flags.filter((row) => row.deleted).map((row) => row.id)).toEqual([gone]);
    expect(flags.filter((row) => row.outOfScope && !row.deleted).length).toBe(
      bothSessions.size - onlyA.size,
    );
    // The whole team again: out-of-scope rows come back; only real deletions stay marked.
    current.server.choice!.set([]);
    expect((await current.sync({ fullRefresh: FULL_REFRESH_ALL })).status).toBe('ok');
    flags = await storedFlags(current.stored, 'sessions');
    expect(flags.filter((row) => row.outOfScope)).toEqual([]);
    expect(flags.filter((row) => row.deleted).map((row) => row.id)).toEqual([gone]);
  });

  it('widening brings back rows whose updated_at did not change', async () => {
    const current = await open();
    const [a, b] = current.chatbots();
    current.server.choice!.set([a!]);
    expect((await current.sync()).status).toBe('ok');
    const beforeWidening = current.dataset.now();
    current.server.choice!.set([a!, b!]);
    expect((await current.sync()).status).toBe('ok');
    for (const resource of ['chatbots', 'sessions', 'chats', 'chat_messages', 'participants']) {
      const wanted = inScope(current, [a!, b!], resource);
      const stored = new Set(
        (await storedFlags(current.stored, resource))
          .filter((row) => !row.deleted && !row.outOfScope)
          .map((row) => row.id),
      );
      expect(stored, resource).toEqual(wanted);
    }
    // Nothing on the server changed: the rows came back with their old updated_at.
    const newest = current.dataset
      .rows('sessions')
      .map((row) => Date.parse(String(row.updated_at)) * 1000);
    expect(Math.max(...newest)).toBeLessThanOrEqual(beforeWidening);
  });

  it('reads a participant who joins the choice without a new updated_at', async () => {
    const current = await open();
    const [a, b] = current.chatbots();
    current.server.choice!.set([a!]);
    expect((await current.sync()).status).toBe('ok');
    const outside = [...inScope(current, [a!, b!], 'participants')].find(
      (id) => !inScope(current, [a!], 'participants').has(id),
    );
    expect(outside).toBeDefined();
    const chatbotA = current.dataset.rows('chatbots').find((row) => row.public_id === a)!;
    const [chat] = current.dataset.ids('chats');
    current.dataset.insert('sessions', [
      { experiment: chatbotA.id, participant: Number(outside), chat },
    ]);
    expect((await current.sync()).status).toBe('ok');
    const stored = await storedFlags(current.stored, 'participants');
    expect(stored.find((row) => row.id === outside)).toMatchObject({ outOfScope: false });
  });

  it('a second change in one run ends it partial, keeping what was committed', async () => {
    const current = await open();
    const [a, b] = current.chatbots();
    current.server.choice!.set([a!]);
    current.server.choice!.changeAfter(8, [b!]);
    current.server.choice!.changeAfter(30, [a!, b!]);
    // One request at a time: each change meets exactly one request under the old key.
    const report = await current.sync({ pageSize: 3, concurrency: 1, pagesInFlight: 1 });
    expect(report.status).toBe('partial');
    expect(report.problems.join('\n')).toMatch(/chatbot choice changed again during this run/);
    expect(current.server.requests.filter((request) => request.status === 409).length).toBe(2);
    for (const resource of ['chatbots', 'sessions', 'users']) {
      for (const row of await storedFlags(current.stored, resource)) {
        const chosen = row.servedUnder === selectionKey([a!]) ? [a!] : [b!];
        expect(inScope(current, chosen, resource).has(row.id)).toBe(true);
      }
    }
    // The next run follows the choice as it is now.
    const next = await current.sync();
    expect(next.status).toBe('ok');
    expect(next.choice?.key).toBe(selectionKey([a!, b!]));
  });

  it('keeps scope exits and returns in history as their own kind of version', async () => {
    const current = await open();
    const [a, b] = current.chatbots();
    current.server.choice!.set([a!, b!]);
    await current.sync();
    current.server.choice!.set([a!]);
    await current.sync({ fullRefresh: FULL_REFRESH_ALL });
    const chatbotB = current.dataset.rows('chatbots').find((row) => row.public_id === b)!;
    const versions = async () =>
      (
        await current.stored.query(
          `SELECT _ocs_version_kind AS kind, _valid_to IS NULL AS open FROM chatbots__history
           WHERE id = ${String(chatbotB.id)} ORDER BY _version_id`,
        )
      ).map((row) => `${String(row.kind)}${Number(row.open) ? ' (open)' : ''}`);
    expect(await versions()).toEqual(['served', 'scope_exit (open)']);
    current.server.choice!.set([a!, b!]);
    await current.sync();
    expect(await versions()).toEqual(['served', 'scope_exit', 'scope_return (open)']);
    expect((await storedFlags(current.stored, 'chatbots')).every((row) => !row.outOfScope)).toBe(
      true,
    );
  });
});

// ------------------------------------------------------------------------------ serve

describe.each(splitDialects)('serve speaks the scoped protocol (%s)', (dialect) => {
  let bed: ScopedBed | undefined;
  let copy: ScopedBed | undefined;
  let served: ServedWarehouse | undefined;
  afterEach(async () => {
    await served?.close();
    await copy?.close();
    await bed?.close();
    served = copy = bed = undefined;
  });

  it('lists the chatbots it serves, checks the key, serves excluded resources empty, and our own client follows it', async () => {
    bed = await openScopedBed(dialect);
    const [a, b] = bed.chatbots();
    bed.server.choice!.set([a!, b!]);
    expect((await bed.sync()).status).toBe('ok');
    bed.server.choice!.set([a!]);
    expect((await bed.sync({ fullRefresh: FULL_REFRESH_ALL })).status).toBe('ok');

    served = await serveWarehouse(bed.stored, { policyFor: () => 'sealed' });
    const manifest = (await get(`${served.url}/api/export/manifest/`)).json();
    expect(manifest).toEqual(bed.server.manifest());
    const team = (await get(`${served.url}/api/export/team/`)).json() as Record<string, unknown>;
    // Every chatbot it holds, B too: its rows left the choice but are still in the archive.
    const expected = [a!, b!].sort().map((publicId) => ({
      public_id: publicId,
      name: String(bed!.dataset.rows('chatbots').find((row) => row.public_id === publicId)!.name),
    }));
    expect(team).toMatchObject({ exportable_chatbots: expected, require_mfa: false });
    const key = selectionKey([a!, b!]);
    const page = (resource: string, selection: string) =>
      get(`${served!.url}/api/export/${resource}/?limit=100&selection=${selection}`);
    expect((await page('chatbots', 'all')).json()).toEqual({ detail: SELECTION_CHANGED_DETAIL });
    expect((await page('chatbots', 'all')).status).toBe(409);
    expect((await page('evaluators', key)).json()).toEqual({
      cursor: null,
      has_more: false,
      results: [],
    });
    expect((await get(`${served.url}/api/export/chatbots/?limit=100`)).status).toBe(200);

    // A client of the scoped protocol (ours) restores from it: every served row, and what it
    // serves points only at rows it serves.
    copy = await openScopedBed(dialect);
    const source = testSource(served.url, { apiKey: SERVE_KEY });
    const restore = await copy.sync({ source, concurrency: 1 }).finally(() => source.close());
    expect(restore.status).toBe('ok');
    expect(restore.choice?.key).toBe(key);
    const live = async (current: ScopedBed, table: string) =>
      (await storedFlags(current.stored, table)).filter((row) => !row.deleted).map((row) => row.id);
    for (const resource of ['chatbots', 'sessions', 'chats', 'chat_messages', 'participants']) {
      expect(await live(copy, resource), resource).toEqual(await live(bed, resource));
    }
    const ids = async (table: string, column: string) =>
      new Set(
        (
          await copy!.stored.query(
            `SELECT ${column} AS v FROM "${table}" WHERE ${column} IS NOT NULL`,
          )
        ).map((row) => String(row.v)),
      );
    const chatbots = new Set(await live(copy, 'chatbots'));
    for (const experiment of await ids('sessions', 'experiment')) {
      expect(chatbots.has(experiment)).toBe(true);
    }
    const chats = new Set(await live(copy, 'chats'));
    for (const chat of await ids('chat_messages', 'chat')) expect(chats.has(chat)).toBe(true);
  });

  it('stays the old server for a warehouse of a server without the protocol', async () => {
    bed = await openScopedBed(dialect);
    await bed.replaceServer();
    expect((await bed.sync()).status).toBe('ok');
    served = await serveWarehouse(bed.stored, { policyFor: () => 'sealed' });
    const team = (await get(`${served.url}/api/export/team/`)).json() as Record<string, unknown>;
    expect(team).not.toHaveProperty('exportable_chatbots');
    expect((await get(`${served.url}/api/export/users/?selection=anything`)).status).toBe(200);
  });
});

// ------------------------------------------------------------------------------ status and runs

describe.each(splitDialects)('status and runs show the chatbot choice (%s)', (dialect) => {
  let server: FakeServer | undefined;
  let testBed: CliTestBed | undefined;
  afterEach(async () => {
    if (testBed) await closeCliTestBed(testBed, server);
    server = testBed = undefined;
  });

  it('names the chosen chatbots and the key, counts rows out of scope, and says what is excluded', async () => {
    testBed = await openCliTestBed(dialect);
    const dataset = createSampleDataset({ scoped: true, seed: 9, rowCounts: { chatbots: 2 } });
    const [a, b] = dataset.rows('chatbots');
    server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      chatbotChoice: { chosen: [String(a!.public_id), String(b!.public_id)] },
    });
    const cli = (...args: string[]) =>
      runCli(
        ['--config', testBed!.configFile, ...args],
        syncEnv(server!.url, testBed!.warehouse.env),
      );
    const first = await cli('sync');
    expect(first.code).toBe(0);
    const both = [a!, b!]
      .sort((left, right) => (String(left.public_id) < String(right.public_id) ? -1 : 1))
      .map((row) => String(row.name));
    expect(first.stdout).toContain(`Chatbot choice: ${both.join(', ')} (key `);
    server.choice!.set([String(a!.public_id)]);
    const second = await cli('sync', '--full-refresh');
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(
      /Out of scope: \d+ row\(s\) of \d+ resource\(s\) the choice no longer serves/,
    );
    expect(second.stdout).toContain(
      "excluded evaluators, evaluation_results: excluded by the team's chatbot choice",
    );

    const key = selectionKey([String(a!.public_id)]);
    const status = await cli('status');
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`Chatbot choice: ${String(a!.name)} (key ${key})`);
    expect(status.stdout).toContain('out of scope');
    const evaluators = status.stdout.split('\n').find((line) => line.startsWith('evaluators '));
    expect(evaluators).toContain("excluded by the team's chatbot choice");
    const json = JSON.parse((await cli('status', '--json')).stdout) as {
      chatbot_choice: unknown;
      resources: Array<Record<string, unknown>>;
    };
    expect(json.chatbot_choice).toEqual({
      selection_key: key,
      chatbots: [{ public_id: a!.public_id, name: a!.name }],
    });
    expect(json.resources.find((r) => r.resource === 'evaluators')).toMatchObject({
      excluded_by_chatbot_choice: true,
      last_error: null,
    });
    expect(json.resources.find((r) => r.resource === 'chatbots')).toMatchObject({
      rows_out_of_scope: 1,
      rows_deleted: 0,
      cursor_selection: key,
    });

    const runs = await cli('runs');
    expect(runs.stdout).toContain('chatbot choice');
    expect(runs.stdout).toContain(`(${key.slice(0, 8)})`);
    const show = await cli('runs', 'show', '2');
    expect(show.stdout).toContain(`chatbots  ${String(a!.name)} (key ${key})`);
    const runsJson = JSON.parse((await cli('runs', '--json')).stdout) as Array<
      Record<string, unknown>
    >;
    expect(runsJson[0]).toMatchObject({ selectionKey: key, choice: { key } });
  });

  it('says nothing of choices for a server without them', async () => {
    testBed = await openCliTestBed(dialect);
    server = await startFakeServer({
      dataset: createSampleDataset({ rowsPerResource: 4 }),
      teamPublicKeyPem: teamKeys().publicKey,
    });
    const cli = (...args: string[]) =>
      runCli(
        ['--config', testBed!.configFile, ...args],
        syncEnv(server!.url, testBed!.warehouse.env),
      );
    expect((await cli('sync')).stdout).not.toContain('Chatbot choice');
    const status = await cli('status');
    expect(status.stdout).not.toContain('Chatbot choice');
    expect(status.stdout).not.toContain('out of scope');
    expect((await cli('runs')).stdout).not.toContain('chatbot choice');
    expect(JSON.parse((await cli('status', '--json')).stdout)).toMatchObject({
      chatbot_choice: null,
    });
  });
});

// ------------------------------------------------------------------------------ migration 008

describe.each(splitDialects)('migration 008 (%s)', (dialect) => {
  let bed: ScopedBed | undefined;
  afterEach(async () => {
    await bed?.close();
    bed = undefined;
  });

  it('upgrades a warehouse from before choices: status reads it first, then a scoped sync follows it', async () => {
    bed = await openScopedBed(dialect);
    await bed.replaceServer();
    expect((await bed.sync()).status).toBe('ok');
    await bed.warehouse.close();
    // Back to what an older ocs-sync left: no 008 and none of its columns or tables.
    const drop = async (table: string, ...columns: string[]) => {
      for (const column of columns) {
        await bed!.stored.query(`ALTER TABLE "${table}" DROP COLUMN "${column}"`);
      }
    };
    const tables = await bed.stored.query('SELECT DISTINCT table_name AS name FROM _ocs_columns');
    for (const { name } of tables) {
      await bed.stored.query(`DROP VIEW "${String(name)}__live"`);
      await drop(String(name), '_ocs_out_of_scope_since', '_ocs_served_under');
    }
    await drop('sessions__history', '_ocs_version_kind');
    await drop('_ocs_runs', 'selection_key');
    await drop('_ocs_resources', 'cursor_selection', 'excluded_at');
    await bed.stored.query('DROP TABLE "_ocs_chatbot_choices"');
    await bed.stored.query('DELETE FROM "_ocs_migrations" WHERE version = 8');
    const status = await runCli(['status'], bed.stored.env);
    expect(status.stderr).toBe('');
    expect(status.stdout).not.toContain('Chatbot choice');

    bed.warehouse = await openWarehouse({
      url: bed.stored.env.OCS_WAREHOUSE_URL!,
      schema: bed.stored.env.OCS_WAREHOUSE_SCHEMA,
    }); // migrates
    const versions = await bed.stored.query(
      `SELECT DISTINCT _ocs_version_kind AS kind FROM "sessions__history"`,
    );
    expect(versions.map((row) => row.kind)).toEqual(['served']);
    const live = await bed.stored.query('SELECT * FROM "sessions__live"');
    expect(Object.keys(live[0]!)).toContain('_ocs_out_of_scope_since');

    await bed.replaceServer({ chatbotChoice: { chosen: [bed.chatbots()[0]!] } });
    const report = await bed.sync({ fullRefresh: FULL_REFRESH_ALL });
    expect(report.status).toBe('ok');
    const flags = await storedFlags(bed.stored, 'sessions');
    expect(flags.some((row) => row.outOfScope)).toBe(true);
    expect(flags.some((row) => row.deleted)).toBe(false);
  });
});

// -------------------------------------------------------------------------------- the docs

describe.each(splitDialects)("the docs' chatbot-choice queries (%s)", (dialect) => {
  it('run as written and find what they say', async () => {
    const queries = docsSqlBlocks('chatbot-choice-queries');
    expect(queries.length).toBe(4);
    const bed = await openScopedBed(dialect);
    try {
      const [a, b] = bed.chatbots();
      bed.server.choice!.set([a!, b!]);
      await bed.sync();
      bed.server.choice!.set([a!]);
      await bed.sync({ fullRefresh: FULL_REFRESH_ALL });
      // A session of B comes back: its exit and its return are both in history.
      const [back] = [
        ...idsInScope(bed.dataset, [b!], 'sessions', 'experiments.experimentsession'),
      ];
      bed.server.choice!.set([a!, b!]);
      await bed.sync();
      bed.server.choice!.set([a!]);
      await bed.sync({ fullRefresh: FULL_REFRESH_ALL });
      // A participant of A deleted on the server, found by the next full refresh under [a].
      const [gone] = [...idsInScope(bed.dataset, [a!], 'participants', 'experiments.participant')];
      bed.dataset.remove('participants', [gone!]);
      await bed.sync({ fullRefresh: FULL_REFRESH_ALL });
      for (const query of queries) {
        const rows = await bed.stored.query(query);
        expect(rows.length, query).toBeGreaterThan(0);
      }
      expect((await bed.stored.query(queries[1]!)).map((row) => String(row.id))).toEqual([gone]);
      const history = await bed.stored.query(queries[2]!);
      expect(
        history.filter((row) => String(row.id) === back).map((row) => row._ocs_version_kind),
      ).toEqual(['scope_exit', 'scope_return', 'scope_exit']);
    } finally {
      await bed.close();
    }
  });
});
