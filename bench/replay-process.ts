/**
 * Child process of the benchmark: a plain keep-alive client sending again the requests a run
 * made (small-team.ts), one after another on one connection, each body read to its end. Its time
 * is the floor of what those requests cost, with none of the sync's machinery. Run by
 * small-team.ts, never by hand.
 */
import { Client } from 'undici';
import { serveParent } from './child-process.js';
import type { LoggedRequest } from './fake-server-process.js';

export interface ReplayRequest {
  url: string;
  apiKey: string;
  requests: LoggedRequest[];
}

export interface ReplayResult {
  /** Wall time of the replay, from the first request sent to the last body read. */
  seconds: number;
  bytes: number;
}

serveParent<ReplayRequest>(async ({ url, apiKey, requests }) => {
  const client = new Client(url, { pipelining: 1 });
  try {
    const started = performance.now();
    let bytes = 0;
    for (const { method, path } of requests) {
      const response = await client.request({
        method: method as 'GET',
        path,
        headers: { 'x-api-key': apiKey },
      });
      for await (const chunk of response.body) bytes += (chunk as Buffer).length;
    }
    return { seconds: (performance.now() - started) / 1000, bytes } satisfies ReplayResult;
  } finally {
    await client.close();
  }
});
