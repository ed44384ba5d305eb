/**
 * The cursor-chasing loop (issue 47): the limit of a walk at a page latency. It sends the next
 * request the moment the page's head names its cursor (`{"cursor": …, "has_more": …`, read by the
 * sync's own PageHeadReader) and drains each body alongside, parsing nothing: no sync that waits
 * for a cursor can walk faster.
 */
import { Pool } from 'undici';
import { PageHeadReader } from '../src/source/page-head.js';
import type { PageHead } from '../src/interfaces.js';

export interface ChaseResult {
  pages: number;
  bytes: number;
  requests: number;
}

/** Reads a body to its end; resolves `head` as soon as its head is read. */
function readHead(body: AsyncIterable<Uint8Array> & NodeJS.ReadableStream): {
  head: Promise<PageHead>;
  drained: Promise<number>;
} {
  const reader = new PageHeadReader();
  let settleHead!: (head: PageHead) => void;
  let failHead!: (error: Error) => void;
  const head = new Promise<PageHead>((resolve, reject) => {
    settleHead = resolve;
    failHead = reject;
  });
  const drained = (async () => {
    let bytes = 0;
    try {
      for await (const chunk of body) {
        bytes += chunk.length;
        const read = reader.push(chunk);
        if (read === 'not-a-head') throw new Error('A page body did not start with its head.');
        if (read !== undefined) settleHead(read);
      }
      failHead(new Error('A page body ended before its head.'));
      return bytes;
    } catch (error) {
      failHead(error as Error);
      throw error;
    }
  })();
  drained.catch(() => undefined);
  return { head, drained };
}

export async function chaseCursors(
  server: { url: string; apiKey: string },
  resource: string,
  pageSize: number,
): Promise<ChaseResult> {
  // A body still draining holds its connection: the next request takes another.
  const pool = new Pool(server.url, { connections: 4 });
  const drains: Array<Promise<number>> = [];
  try {
    let cursor: string | null = null;
    for (;;) {
      const query = new URLSearchParams({ limit: String(pageSize) });
      if (cursor !== null) query.set('cursor', cursor);
      const response = await pool.request({
        method: 'GET',
        path: `/api/export/${resource}/?${query.toString()}`,
        headers: { 'x-api-key': server.apiKey },
      });
      if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
      const { head, drained } = readHead(response.body);
      drains.push(drained);
      const next = await head;
      if (!next.hasMore || next.cursor === null || next.cursor === '') break;
      cursor = next.cursor;
    }
    const bytes = (await Promise.all(drains)).reduce((sum, value) => sum + value, 0);
    return { pages: drains.length, bytes, requests: drains.length };
  } finally {
    await Promise.allSettled(drains);
    await pool.close();
  }
}
