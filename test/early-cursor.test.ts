/**
 * The early cursor: the real server writes `cursor` and `has_more` first in every page body, so
 * the next request leaves as soon as a body's first bytes are in (src/source/page-head.ts,
 * src/sync/read-ahead.ts). A body that does not start that way falls back to the request after the
 * full parse; a head the full parse contradicts stops the walk before that page is stored.
 */
import { describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import {
  startFakeServer,
  type FakeServer,
  type FakeServerOptions,
} from '../src/fake-server/server.js';
import type { Page } from '../src/interfaces.js';
import { silentLogger } from '../src/log.js';
import { HttpExportSource, parsePage } from '../src/source/http-source.js';
import { HEAD_BYTES, PageHeadReader, scanHead } from '../src/source/page-head.js';
import { checkPageHead } from '../src/sync/cursor-trail.js';
import { readAhead, type PageWalk } from '../src/sync/read-ahead.js';
import {
  CAPTURE_LIMIT,
  REPLAY_KEY,
  hasCapture,
  readCapture,
  startReplay,
} from './real-capture-replay.js';
import {
  createTestWarehouse,
  expectWarehouseEqualsSource,
  runCli,
  syncEnv,
  teamKeys,
  splitDialects,
} from './support.js';

const RESOURCE = 'chat_messages';
const PAGE_SIZE = 5;

/** Feeds `text` to a PageHeadReader `size` bytes at a time; the first answer it gives. */
function readHeadInChunks(text: string, size: number) {
  const bytes = Buffer.from(text, 'utf8');
  const reader = new PageHeadReader();
  for (let at = 0; at < bytes.length; at += size) {
    const answer = reader.push(bytes.subarray(at, at + size));
    if (answer !== undefined) return { answer, at: at + size };
  }
  return { answer: undefined, at: bytes.length };
}

describe('the head of a page body', () => {
  it('reads cursor and has_more as the real server writes them, whatever the chunking', () => {
    const body = '{"cursor":"eyJpZCI6IDEwMjB9","has_more":true,"results":[{"id":1,"content":"é"}]}';
    for (const size of [1, 2, 3, 7, 64, 4096]) {
      const { answer, at } = readHeadInChunks(body, size);
      expect(answer).toEqual({ cursor: 'eyJpZCI6IDEwMjB9', hasMore: true });
      // Known before the rows arrive.
      expect(at).toBeLessThan(body.indexOf('"results"') + size + 1);
    }
    expect(scanHead('{"cursor":null,"has_more":false,"results":[]}')).toEqual({
      head: { cursor: null, hasMore: false },
    });
  });

  it('accepts whitespace, a BOM, escapes, the two keys in either order; an empty cursor is none', () => {
    expect(
      scanHead('\uFEFF \n{ "cursor" :\t"a\\u0062\\"c" ,\r\n "has_more" : true , "results": ['),
    ).toEqual({
      head: { cursor: 'ab"c', hasMore: true },
    });
    expect(scanHead('{"has_more":true,"cursor":"7","results":[')).toEqual({
      head: { cursor: '7', hasMore: true },
    });
    expect(scanHead('{"cursor":"","has_more":false,"results":[')).toEqual({
      head: { cursor: null, hasMore: false },
    });
  });

  it('waits for more bytes while the head is cut short', () => {
    for (const part of [
      '',
      ' ',
      '{',
      '{"cur',
      '{"cursor":',
      '{"cursor":"ab',
      '{"cursor":"a\\',
      '{"cursor":nu',
      '{"cursor":null',
      '{"cursor":null,"has_more":tr',
      '{"cursor":null,"has_more":true',
    ]) {
      expect(scanHead(part), part).toBe('need-more');
    }
  });

  it('says "not a head" for any other start: the walk then falls back to the full parse', () => {
    for (const body of [
      '{"results":[],"cursor":null,"has_more":false}',
      '[{"id":1}]',
      '{"cursor":5,"has_more":true,"results":[',
      '{"cursor":"5","has_more":"yes","results":[',
      '{"cursor":"5","cursor":"6","has_more":true,',
      '{"cursor":"5","has_more":true}',
      '{"cursor":"5" "has_more":true,',
      '{"cursor":"a\u0001b","has_more":true,',
      '<html>Bad gateway</html>',
      '{"cursor":nul,"has_more":true,',
    ]) {
      expect(scanHead(body), body).toBe('not-a-head');
    }
    // A head longer than HEAD_BYTES (a huge cursor) is left to the full parse.
    const huge = `{"cursor":"${'a'.repeat(HEAD_BYTES)}","has_more":true,"results":[]}`;
    expect(readHeadInChunks(huge, 1000).answer).toBe('not-a-head');
  });

  it('is checked against the full parse: a page that contradicts its head stops the walk, naming resource and page', () => {
    const page = (text: string): Page => {
      const parsed = parsePage(JSON.parse(text), RESOURCE, PAGE_SIZE);
      const head = scanHead(text);
      return typeof head === 'object' ? { ...parsed, head: head.head } : parsed;
    };
    expect(() =>
      checkPageHead(RESOURCE, 3, page('{"cursor":"9","has_more":true,"results":[]}')),
    ).not.toThrow();
    expect(() =>
      checkPageHead(RESOURCE, 3, page('{"cursor":"9","has_more":true,"results":[],"cursor":"8"}')),
    ).toThrow(
      'GET chat_messages/ page 3 began with cursor 9 and has_more true but its full body says cursor 8 and has_more true; stopping this resource. Page 3 was not stored; the pages before it are kept.',
    );
    expect(() =>
      checkPageHead(
        RESOURCE,
        4,
        page('{"cursor":"9","has_more":true,"results":[],"has_more":false}'),
      ),
    ).toThrow(
      /page 4 began with cursor 9 and has_more true but its full body says cursor 9 and has_more false/,
    );
  });
});

/** A request readAhead made in the tests below, answered by hand. */
interface Asked {
  cursor: string | null;
  signal: AbortSignal;
  announce: (next: string | undefined) => void;
  answer: (value: string) => void;
  refuse: (error: Error) => void;
}

/** A walk over pages named by their cursors: page "n" says the next is "n+1", up to `last`. */
function manualWalk(last: number) {
  const asked: Asked[] = [];
  let waiter: (() => void) | undefined;
  const walk: PageWalk<string, string> = {
    start: null,
    fetch: (cursor, signal, announce) =>
      new Promise<string>((answer, refuse) => {
        // As a real request: cancelled, it fails.
        signal.addEventListener('abort', () => refuse(new Error('cancelled')));
        asked.push({ cursor, signal, announce, answer, refuse });
        waiter?.();
      }),
    settle: (_cursor, fetched) => {
      const [name, next] = fetched.split('->');
      return { value: name!, next: Number(name) >= last ? undefined : next };
    },
  };
  const requestNumber = async (count: number) => {
    while (asked.length < count) await new Promise<void>((resolve) => (waiter = resolve));
    return asked[count - 1]!;
  };
  return { walk, asked, requestNumber };
}

/** Every value the walk yields, once it ends. */
async function collect(pages: AsyncIterable<string>): Promise<string[]> {
  const values: string[] = [];
  for await (const value of pages) values.push(value);
  return values;
}

describe('reading ahead with the early cursor', () => {
  it('sends the next request when the head announces it, and uses its answer when the page agrees', async () => {
    const { walk, asked, requestNumber } = manualWalk(2);
    const collected = collect(readAhead(walk, 2));
    const first = await requestNumber(1);
    expect(first.cursor).toBeNull();
    first.announce('1');
    // Sent before the first answer is complete.
    const second = await requestNumber(2);
    expect(second.cursor).toBe('1');
    second.announce('2');
    first.answer('0->1');
    const third = await requestNumber(3);
    expect(third.cursor).toBe('2');
    second.answer('1->2');
    third.answer('2->');
    expect(await collected).toEqual(['0', '1', '2']);
    expect(asked.map((request) => request.signal.aborted)).toEqual([false, false, false]);
  });

  it('cancels what was sent from a head the page then contradicts, and asks again with the settled cursor', async () => {
    const { walk, asked, requestNumber } = manualWalk(1);
    const collected = collect(readAhead(walk, 2));
    const first = await requestNumber(1);
    first.announce('wrong');
    const speculative = await requestNumber(2);
    expect(speculative.cursor).toBe('wrong');
    first.answer('0->1');
    const right = await requestNumber(3);
    expect(right.cursor).toBe('1');
    expect(speculative.signal.aborted).toBe(true);
    // Its answer, or failure, is never used.
    speculative.refuse(new Error('Invalid pagination cursor.'));
    right.answer('1->');
    expect(await collected).toEqual(['0', '1']);
    expect(asked).toHaveLength(3);
  });

  it('a retried answer that announces another cursor replaces the request sent from the first', async () => {
    const { walk, requestNumber } = manualWalk(1);
    const collected = collect(readAhead(walk, 2));
    const first = await requestNumber(1);
    first.announce('x');
    const fromFirstTry = await requestNumber(2);
    first.announce('1');
    const fromRetry = await requestNumber(3);
    expect(fromFirstTry.signal.aborted).toBe(true);
    expect(fromRetry.cursor).toBe('1');
    first.answer('0->1');
    fromRetry.answer('1->');
    expect(await collected).toEqual(['0', '1']);
  });

  it('keeps at most `depth` pages received or on their way', async () => {
    const { walk, asked, requestNumber } = manualWalk(5);
    const pages = readAhead(walk, 2)[Symbol.asyncIterator]();
    const next = pages.next();
    const first = await requestNumber(1);
    first.announce('1');
    const second = await requestNumber(2);
    second.announce('2');
    await new Promise((resolve) => setImmediate(resolve));
    // Two on their way: the third waits for room.
    expect(asked).toHaveLength(2);
    first.answer('0->1');
    expect((await next).value).toBe('0');
    // The consumer took page 0: room for the request page 1's head announced.
    const third = await requestNumber(3);
    expect(third.cursor).toBe('2');
    await pages.return(undefined);
    expect(second.signal.aborted).toBe(true);
    expect(third.signal.aborted).toBe(true);
  });

  it('a failed page fails the walk after the pages before it, and cancels what was sent after it', async () => {
    const { walk, requestNumber } = manualWalk(5);
    const values: string[] = [];
    const done = (async () => {
      for await (const value of readAhead(walk, 2)) values.push(value);
    })();
    const first = await requestNumber(1);
    first.announce('1');
    const second = await requestNumber(2);
    second.announce('2');
    first.answer('0->1');
    const third = await requestNumber(3);
    second.refuse(new Error('page 1 failed'));
    await expect(done).rejects.toThrow('page 1 failed');
    expect(values).toEqual(['0']);
    expect(third.signal.aborted).toBe(true);
  });
});

describe.each(splitDialects)('early cursor against the fake server (%s)', (dialect) => {
  /** A server of 30 chat messages; each page event in `events`, in the order the server saw it. */
  async function start(
    options: Partial<FakeServerOptions> = {},
    onRequest?: (pageIndex: number) => void,
  ) {
    const dataset = createSampleDataset({ rowsPerResource: 30, seed: 23 });
    const events: string[] = [];
    const served = new Map<number, { ids: string[]; hasMore: boolean }>();
    const server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      ...options,
      onPageServed: (info) => {
        if (info.resource !== RESOURCE) return;
        events.push(`request ${info.pageIndex}`);
        served.set(info.pageIndex, {
          ids: info.rows.map((row) => String(row.id)),
          hasMore: info.hasMore,
        });
        onRequest?.(info.pageIndex);
      },
    });
    return { dataset, events, served, server };
  }

  const sync = (server: FakeServer, env: Record<string, string>) =>
    runCli(
      ['sync'],
      syncEnv(server.url, env, { OCS_RESOURCES: RESOURCE, OCS_PAGE_SIZE: String(PAGE_SIZE) }),
    );

  it('sends the next request before the body of the page before it has ended', async () => {
    const warehouse = await createTestWarehouse(dialect);
    // Each page's rows are held back until the request for the next page arrives: a client that
    // waited for the whole body would never get it (a fallback timer would, and say so).
    const waiting = new Map<number, () => void>();
    const context = await start(
      {
        beforePageTail: (info) => {
          if (info.resource !== RESOURCE || !info.hasMore) return Promise.resolve();
          return new Promise<void>((resolve) => {
            const timer = setTimeout(() => {
              context.events.push(`timed out holding ${info.pageIndex}`);
              resolve();
            }, 60_000);
            waiting.set(info.pageIndex, () => {
              clearTimeout(timer);
              context.events.push(`tail ${info.pageIndex}`);
              resolve();
            });
          });
        },
      },
      (pageIndex) => waiting.get(pageIndex - 1)?.(),
    );
    try {
      const result = await sync(context.server, warehouse.env);
      expect(result.code, result.stderr).toBe(0);
      expect(context.events.filter((event) => event.startsWith('timed out'))).toEqual([]);
      const pages = context.served.size;
      expect(pages).toBe(30 / PAGE_SIZE);
      for (let page = 0; page < pages - 1; page += 1) {
        expect(context.events.indexOf(`tail ${page}`), context.events.join(', ')).toBeGreaterThan(
          context.events.indexOf(`request ${page + 1}`),
        );
        expect(context.events).toContain(`request ${page + 1}`);
      }
      await expectWarehouseEqualsSource(warehouse, context.dataset, { resources: [RESOURCE] });
    } finally {
      await context.server.close();
      await warehouse.dispose();
    }
  });

  it('falls back to the request after the full parse when the body does not start with the cursor', async () => {
    const warehouse = await createTestWarehouse(dialect);
    const context = await start({
      pageKeyOrder: 'results-first',
      beforePageTail: (info) => {
        if (info.resource === RESOURCE) context.events.push(`tail ${info.pageIndex}`);
        return Promise.resolve();
      },
    });
    try {
      const result = await sync(context.server, warehouse.env);
      expect(result.code, result.stderr).toBe(0);
      const pages = context.served.size;
      expect(pages).toBe(30 / PAGE_SIZE);
      // Each request only after the whole page before it was sent.
      for (let page = 0; page < pages - 1; page += 1) {
        expect(context.events.indexOf(`tail ${page}`)).toBeLessThan(
          context.events.indexOf(`request ${page + 1}`),
        );
      }
      await expectWarehouseEqualsSource(warehouse, context.dataset, { resources: [RESOURCE] });
      // The next run resumes from the stored cursor: one page, nothing new.
      context.events.length = 0;
      expect((await sync(context.server, warehouse.env)).code).toBe(0);
      expect(context.events.filter((event) => event.startsWith('request'))).toHaveLength(1);
    } finally {
      await context.server.close();
      await warehouse.dispose();
    }
  });

  it('stops the walk on a head the full body contradicts, stores nothing from that page on, and the next run completes', async () => {
    const warehouse = await createTestWarehouse(dialect);
    let lying = true;
    const context = await start({
      pageHeadLie: (info) =>
        lying && info.resource === RESOURCE && info.pageIndex === 2
          ? { cursor: 'bm90IHRoZSBjdXJzb3I=' }
          : undefined,
    });
    try {
      const result = await sync(context.server, warehouse.env);
      expect(result.code).not.toBe(0);
      expect(result.stdout + result.logs).toMatch(
        /GET chat_messages\/ page 3 began with cursor bm90IHRoZSBjdXJzb3I= and has_more true but its full body says cursor \S+ and has_more true; stopping this resource\. Page 3 was not stored/,
      );
      // Pages 1 and 2 only: the lie's page, and the request sent from its head, stored nothing.
      const storedIds = (await warehouse.readTable(RESOURCE)).map((row) => String(row.id));
      const expected = [...context.served.get(0)!.ids, ...context.served.get(1)!.ids];
      expect(storedIds.sort()).toEqual(expected.sort());

      lying = false;
      const again = await sync(context.server, warehouse.env);
      expect(again.code, again.stderr).toBe(0);
      await expectWarehouseEqualsSource(warehouse, context.dataset, { resources: [RESOURCE] });
    } finally {
      await context.server.close();
      await warehouse.dispose();
    }
  });
});

describe.skipIf(!hasCapture)('the early cursor on the real server responses (real-capture)', () => {
  it('every captured page starts with the cursor and has_more its full parse finds', async () => {
    const capture = readCapture();
    let pages = 0;
    for (const [resource, walk] of capture.pages) {
      for (const page of walk.values()) {
        const parsed = parsePage(JSON.parse(page.body), resource, Number(CAPTURE_LIMIT));
        const head = readHeadInChunks(page.body, 64).answer;
        expect(head, resource).toEqual({ cursor: parsed.cursor, hasMore: parsed.hasMore });
        pages += 1;
      }
    }
    expect(pages).toBeGreaterThan(61);

    // Through the real HTTP source: the head of every chat_messages page is told before its page.
    const replay = await startReplay(capture, { schema: true });
    const source = new HttpExportSource({
      baseUrl: replay.url,
      apiKey: REPLAY_KEY,
      authScheme: 'api-key',
      requestTimeoutMs: 30_000,
      maxAttempts: 1,
      minRetryDelayMs: 1,
      maxRetryDelayMs: 1,
      maxRequestsPerMinute: 0,
      userAgent: 'ocs-sync-test',
      logger: silentLogger(),
    });
    try {
      let cursor: string | null = null;
      let walked = 0;
      for (;;) {
        const heads: unknown[] = [];
        const page: Page = await source.page(
          RESOURCE,
          cursor,
          Number(CAPTURE_LIMIT),
          undefined,
          undefined,
          (head) => heads.push(head),
        );
        expect(heads).toEqual([{ cursor: page.cursor, hasMore: page.hasMore }]);
        expect(page.head).toEqual(heads[0]);
        walked += 1;
        if (!page.hasMore) break;
        cursor = page.cursor;
      }
      expect(walked).toBe(capture.pages.get(RESOURCE)!.size);
    } finally {
      await source.close();
      await replay.close();
    }
  });
});
