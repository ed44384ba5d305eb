/**
 * Candidate designs for overlapping the network, the JSON parse and the write (issue 16), each a
 * walk of the bench resource into a fresh SQLite warehouse, every page committed with its cursor.
 * They run as benchmark stages (stages.ts, kind `design`); overlap.ts compares them with the
 * floors and the sync in interleaved rounds.
 *
 * - `worker-bytes`: this thread only fetches; the raw page bytes are transferred (not cloned) to a
 *   writer thread that parses and writes them with the warehouse's writePage.
 * - `worker-rows`: this thread fetches, parses and encodes; the encoded rows are cloned to a
 *   writer thread that only runs the prepared upserts (each thread owns one half).
 * - `json-each`: one thread; SQLite parses the page itself (`json_each` over the page's bytes).
 * - `json-each-worker`: this thread only fetches; a writer thread hands the bytes to `json_each`.
 *
 * The fetching side reads the next cursor from the page's head (the server writes `cursor` and
 * `has_more` first), so fetching never waits for the writer's parse.
 */
import { Worker } from 'node:worker_threads';
import { Agent, request } from 'undici';
import type { ColumnSpec, Page, Row } from '../src/interfaces.js';
import type { Logger } from '../src/log.js';
import { encodeValue, type SqliteValue } from '../src/warehouse/sqlite/values.js';
import { assertValueFits, checkedRowId } from '../src/warehouse/values.js';
import { cursorAfterPage, hasNextPage } from '../src/sync/plan.js';
import { readAhead } from '../src/sync/read-ahead.js';
import type { HttpExportSource } from '../src/source/http-source.js';
import { openWriter, type WriterDesign, type WriterMessage } from './overlap-writer.js';
import type { WriterReply } from './overlap-worker.js';
import { BENCH_RESOURCE } from './bench-dataset.js';

export type OverlapDesign = 'worker-bytes' | 'worker-rows' | 'json-each' | 'json-each-worker';

export const OVERLAP_DESIGNS: OverlapDesign[] = [
  'worker-bytes',
  'worker-rows',
  'json-each',
  'json-each-worker',
];

export interface DesignContext {
  design: OverlapDesign;
  server: { url: string; apiKey: string };
  path: string;
  columns: ColumnSpec[];
  runId: number;
  pageSize: number;
  /** Pages fetched ahead of the writer. */
  depth: number;
  source: HttpExportSource;
  logger: Logger;
}

/** The rows-per-statement of the sync's SQLite upsert (src/warehouse/sqlite/page-writes.ts). */
const ROWS_PER_BATCH = 16;

const HEAD = /^\{"cursor":(null|"((?:[^"\\]|\\.)*)"),"has_more":(true|false)/;

/** The page's cursor and has_more from its first bytes; undefined when they are not first. */
function readHead(bytes: Uint8Array): { cursor: string | null; hasMore: boolean } | undefined {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 2048));
  const match = HEAD.exec(head.toString('latin1'));
  if (!match) return undefined;
  return {
    cursor: match[1] === 'null' ? null : (JSON.parse(match[1]!) as string),
    hasMore: match[3] === 'true',
  };
}

/** Fetches raw pages, one request at a time, each starting as soon as the previous one ended. */
class PageFetcher {
  private readonly agent = new Agent({ connections: 2, keepAliveTimeout: 30_000 });
  requests = 0;

  constructor(private readonly context: DesignContext) {}

  async bytes(cursor: string | null): Promise<Uint8Array> {
    const query = new URLSearchParams({ limit: String(this.context.pageSize) });
    if (cursor !== null) query.set('cursor', cursor);
    this.requests += 1;
    const response = await request(
      `${this.context.server.url}/api/export/${BENCH_RESOURCE}/?${query.toString()}`,
      {
        dispatcher: this.agent,
        headers: { accept: 'application/json', 'x-api-key': this.context.server.apiKey },
      },
    );
    const body = new Uint8Array(await response.body.arrayBuffer());
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
    return body;
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** A writer thread with at most `depth` pages handed over and not yet written. */
class WriterThread {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;
  private failure: Error | undefined;
  private ready = false;
  /** Pages handed over and not yet written. */
  private unwritten = 0;
  private wake: (() => void) | undefined;
  rowsWritten = 0;

  constructor(setup: Parameters<typeof openWriter>[0]) {
    this.worker = new Worker(new URL('./overlap-worker.js', import.meta.url), {
      workerData: setup,
    });
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.on('message', (reply: WriterReply) => {
      if (reply.type === 'failed') this.failure = new Error(reply.error);
      else if (!this.ready) this.ready = true;
      else {
        this.unwritten -= 1;
        this.rowsWritten += reply.rows;
      }
      this.wake?.();
    });
    this.worker.on('error', (error) => {
      this.failure = error;
      this.wake?.();
    });
  }

  private async until(condition: () => boolean): Promise<void> {
    while (!condition()) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    if (this.failure) throw this.failure;
  }

  async send(message: WriterMessage, transfer: ArrayBuffer[], depth: number): Promise<void> {
    await this.until(() => this.ready);
    this.unwritten += 1;
    this.worker.postMessage(message, transfer);
    await this.until(() => this.unwritten < depth);
  }

  async finish(): Promise<void> {
    await this.until(() => this.ready && this.unwritten === 0);
    this.worker.postMessage({ type: 'end' } satisfies WriterMessage);
    await this.exited;
  }
}

/** Lets a request just started go out before synchronous work blocks this thread. */
async function requestOnTheWire(): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
  await new Promise<void>((resolve) => setImmediate(resolve));
}

function encodeRows(rows: Row[], columns: ColumnSpec[]): SqliteValue[][] {
  return rows.map((row) => {
    const id = checkedRowId(row.id, BENCH_RESOURCE);
    const values: SqliteValue[] = [id];
    for (const column of columns) {
      const value = row[column.name];
      assertValueFits(value, column.type, BENCH_RESOURCE, column.name, id);
      values.push(encodeValue(column.type, value));
    }
    return values;
  });
}

/** Runs one design; returns the rows written, pages and requests. */
export async function runDesign(
  context: DesignContext,
): Promise<{ rows: number; pages: number; requests: number }> {
  const setup = (design: WriterDesign) => ({
    design,
    path: context.path,
    resource: BENCH_RESOURCE,
    columns: context.columns,
    runId: context.runId,
    pageSize: context.pageSize,
    rowsPerBatch: ROWS_PER_BATCH,
  });
  let rows = 0;
  let pages = 0;

  if (context.design === 'worker-rows') {
    // This thread: HTTP + parse + encode (the real source); the writer: bind + insert.
    const writer = new WriterThread(setup('rows'));
    // The next page is fetched while this one is parsed and encoded, as the sync does.
    const walk = readAhead<Page, { page: Page; cursor: string | null }>(
      {
        start: null,
        fetch: (cursor, signal) =>
          context.source.page(BENCH_RESOURCE, cursor, context.pageSize, signal),
        settle: (from, page) => {
          const cursor = cursorAfterPage(page, 'updated_at_id', from);
          const last = !hasNextPage(page, context.pageSize) || cursor === null;
          return { value: { page, cursor }, next: last ? undefined : cursor };
        },
      },
      context.depth,
    );
    for await (const { page, cursor } of walk) {
      await writer.send(
        { type: 'rows', rows: encodeRows(page.rows, context.columns), cursor },
        [],
        context.depth,
      );
      rows += page.rows.length;
      pages += 1;
    }
    await writer.finish();
    // The source's requests are counted by the caller.
    return { rows, pages, requests: 0 };
  }

  const fetcher = new PageFetcher(context);
  try {
    if (context.design === 'json-each') {
      // One thread: the next request goes out before SQLite parses and writes this page.
      const writer = await openWriter(setup('json-each'));
      let bytes = await fetcher.bytes(null);
      for (;;) {
        const head = readHead(bytes);
        if (!head) throw new Error('The page does not start with its cursor.');
        const next = head.hasMore ? fetcher.bytes(head.cursor) : undefined;
        if (next) await requestOnTheWire();
        rows += await writer.page({
          type: 'bytes',
          bytes: bytes.buffer as ArrayBuffer,
          cursor: head.cursor,
        });
        pages += 1;
        if (!next) break;
        bytes = await next;
      }
      await writer.close();
      return { rows, pages, requests: fetcher.requests };
    }

    // worker-bytes and json-each-worker: this thread fetches only.
    const writer = new WriterThread(
      setup(context.design === 'worker-bytes' ? 'bytes' : 'json-each'),
    );
    let cursor: string | null = null;
    for (;;) {
      const bytes = await fetcher.bytes(cursor);
      const head = readHead(bytes);
      if (!head) throw new Error('The page does not start with its cursor.');
      const buffer = bytes.buffer as ArrayBuffer;
      await writer.send(
        { type: 'bytes', bytes: buffer, cursor: head.cursor },
        [buffer],
        context.depth,
      );
      pages += 1;
      if (!head.hasMore) break;
      cursor = head.cursor;
    }
    await writer.finish();
    return { rows: writer.rowsWritten, pages, requests: fetcher.requests };
  } finally {
    await fetcher.close();
  }
}
