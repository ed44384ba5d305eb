/**
 * Child process of the benchmark: the fake export server with the benchmark's one resource.
 * Run by bench.ts, never by hand; it answers requests from its parent over IPC.
 */
import {
  startFakeServer,
  DEFAULT_ADMIN_API_KEY,
  serializeJson,
  type FakeServer,
} from '../src/fake-server/server.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { BENCH_RESOURCE, createBenchDataset } from './bench-dataset.js';
import { serveParent } from './child-process.js';

export type ServerRequest =
  | {
      type: 'start';
      rows: number;
      seed: number;
      pageLatencyMs: number;
      /**
       * The sample team (every resource, sealed fields sealed to this key) instead of the one
       * bench resource: rows per resource (20 where not named); `rows` is not used.
       */
      sample?: {
        rowCounts: Record<string, number>;
        teamPublicKeyPem: string;
        /** Rows of each resource not named in rowCounts (default 20). */
        rowsPerResource?: number;
      };
      /**
       * Build every page of these resources at this page size now and serve them as built (the
       * server then costs next to nothing); kept until the data changes.
       */
      prebuild?: { resources: string[]; pageSize: number };
    }
  /** Values of `resource`'s sealed fields that are sealed when served (neither null nor ''). */
  | { type: 'sealed-values'; resource: string }
  /** Add `count` new rows (a later `updated_at`: an incremental sync must fetch them). */
  | { type: 'insert'; count: number }
  /**
   * Delete `count` rows spread evenly over the rows the server started with, so every warehouse
   * synced from it holds them (a full refresh must mark them).
   */
  | { type: 'remove'; count: number }
  /** Requests served since the last `requests` call. */
  | { type: 'requests' }
  /** The requests served since the last call, as a client would send them again (a replay). */
  | { type: 'request-log' }
  /** The delay before every page from now on. */
  | { type: 'latency'; ms: number }
  /** CPU seconds (user + system) the server process has used so far. */
  | { type: 'cpu' }
  | { type: 'close' };

/** A request as the server saw it: enough to send it again. */
export interface LoggedRequest {
  method: string;
  /** Path and query. */
  path: string;
}

export interface ServerStarted {
  url: string;
  apiKey: string;
  /** Mean JSON size of a row as served. */
  bytesPerRow: number;
}

let server: FakeServer | undefined;
let startRows = 0;

async function handle(request: ServerRequest): Promise<unknown> {
  switch (request.type) {
    case 'start': {
      if (server) throw new Error('The fake server is already started.');
      const { sample: team } = request;
      const dataset = team
        ? createSampleDataset({
            seed: request.seed,
            rowCounts: team.rowCounts,
            ...(team.rowsPerResource ? { rowsPerResource: team.rowsPerResource } : {}),
          })
        : createBenchDataset(request.rows, request.seed);
      startRows = request.rows;
      server = await startFakeServer({
        dataset,
        pageLatencyMs: request.pageLatencyMs,
        teamPublicKeyPem: team?.teamPublicKeyPem,
        ...(request.prebuild ? { pageBodies: new Map<string, Buffer>() } : {}),
      });
      if (request.prebuild) {
        // Asked for as a client would, so each body is exactly the one the walk will get.
        const latencyMs = server.options.pageLatencyMs;
        server.options.pageLatencyMs = 0;
        for (const resource of request.prebuild.resources) {
          await walkPages(server.url, DEFAULT_ADMIN_API_KEY, resource, request.prebuild.pageSize);
        }
        server.options.pageLatencyMs = latencyMs;
        server.requests.length = 0;
      }
      const sample = dataset.pageAfter(BENCH_RESOURCE, 'updated_at_id', null, 1000).rows;
      const bytesPerRow = sample.length === 0 ? 0 : serializeJson(sample).length / sample.length;
      return {
        url: server.url,
        apiKey: DEFAULT_ADMIN_API_KEY,
        bytesPerRow,
      } satisfies ServerStarted;
    }
    case 'insert':
      requireServer().options.pageBodies?.clear();
      requireServer().dataset.insert(BENCH_RESOURCE, request.count);
      return requireServer().dataset.count(BENCH_RESOURCE);
    case 'remove': {
      requireServer().options.pageBodies?.clear();
      const dataset = requireServer().dataset;
      const ids = dataset.ids(BENCH_RESOURCE).slice(0, startRows);
      const step = Math.max(1, Math.floor(ids.length / Math.max(1, request.count)));
      const gone = ids.filter((_, index) => index % step === 0).slice(0, request.count);
      return dataset.remove(BENCH_RESOURCE, gone);
    }
    case 'sealed-values': {
      const dataset = requireServer().dataset;
      const fields =
        dataset.fixture?.find((entry) => entry.resource === request.resource)?.sealedFields ?? [];
      return dataset
        .rows(request.resource)
        .reduce(
          (count, row) =>
            count + fields.filter((field) => row[field] !== null && row[field] !== '').length,
          0,
        );
    }
    case 'requests': {
      const served = requireServer().requests.length;
      requireServer().requests.length = 0;
      return served;
    }
    case 'request-log': {
      const served = requireServer().requests.map(({ method, path, query }) => ({
        method,
        path: `${path}${Object.keys(query).length > 0 ? `?${new URLSearchParams(query).toString()}` : ''}`,
      }));
      requireServer().requests.length = 0;
      return served satisfies LoggedRequest[];
    }
    case 'latency':
      requireServer().options.pageLatencyMs = request.ms;
      return request.ms;
    case 'cpu': {
      const used = process.cpuUsage();
      return (used.user + used.system) / 1e6;
    }
    case 'close':
      await server?.close();
      server = undefined;
      setImmediate(() => process.exit(0));
      return undefined;
  }
}

/** Every page of `resource` at `limit`, one after another (each kept by the server as built). */
async function walkPages(url: string, apiKey: string, resource: string, limit: number) {
  let cursor: string | null = null;
  for (;;) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor !== null) query.set('cursor', cursor);
    const response = await fetch(`${url}/api/export/${resource}/?${query.toString()}`, {
      headers: { 'x-api-key': apiKey },
    });
    const page = (await response.json()) as { cursor: string | null; has_more: boolean };
    if (!page.has_more || page.cursor === null) return;
    cursor = page.cursor;
  }
}

function requireServer(): FakeServer {
  if (!server) throw new Error('The fake server is not started.');
  return server;
}

serveParent(handle);
