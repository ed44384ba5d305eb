/**
 * Child process of `npm run bench -- teams` (teams.ts): one fake export server per team, each
 * with its own sample team (its own size), its own API budget and its own faults, all in this one
 * process so that their CPU never shares the syncing process's. Run by teams.ts, never by hand;
 * it answers requests from its parent over IPC.
 */
import { createSampleDataset } from '../src/fake-server/fixture.js';
import {
  DEFAULT_ADMIN_API_KEY,
  startFakeServer,
  type FakeServer,
} from '../src/fake-server/server.js';
import { REAL_FAULTS } from './bench-dataset.js';
import { serveParent } from './child-process.js';
import type { LoggedRequest } from './fake-server-process.js';

export interface TeamServerSpec {
  name: string;
  seed: number;
  /** Rows per resource (rowsPerResource, or 20, where not named). */
  rowCounts: Record<string, number>;
  rowsPerResource?: number;
}

export type TeamServersRequest =
  | {
      type: 'start';
      teams: TeamServerSpec[];
      /** Each team's budget: this many requests per `windowSeconds`, as the real server counts. */
      budget: { limit: number; windowSeconds: number };
      /** Share of requests answered with a fault instead. */
      faultRate: number;
      pageLatencyMs: number;
      teamPublicKeyPem: string;
    }
  /** Requests each server answered since the last call, by team. */
  | { type: 'requests' }
  /** The requests each server answered since the last call, by team, to send them again. */
  | { type: 'request-log' }
  | { type: 'close' };

export interface TeamServersStarted {
  apiKey: string;
  /** Base URL by team. */
  urls: Record<string, string>;
  /** Rows served (every resource), by team. */
  rows: Record<string, number>;
}

const servers = new Map<string, FakeServer>();

async function handle(request: TeamServersRequest): Promise<unknown> {
  switch (request.type) {
    case 'start': {
      if (servers.size > 0) throw new Error('The fake servers are already started.');
      for (const [index, team] of request.teams.entries()) {
        const server = await startFakeServer({
          dataset: createSampleDataset({
            seed: team.seed,
            rowCounts: team.rowCounts,
            ...(team.rowsPerResource ? { rowsPerResource: team.rowsPerResource } : {}),
          }),
          teamPublicKeyPem: request.teamPublicKeyPem,
          rateLimit: request.budget,
          pageLatencyMs: request.pageLatencyMs || undefined,
          randomFaults:
            request.faultRate > 0
              ? { seed: 1000 + index, rate: request.faultRate, kinds: REAL_FAULTS }
              : undefined,
        });
        servers.set(team.name, server);
      }
      return {
        apiKey: DEFAULT_ADMIN_API_KEY,
        urls: Object.fromEntries([...servers].map(([name, server]) => [name, server.url])),
        rows: Object.fromEntries(
          [...servers].map(([name, server]) => [
            name,
            server.dataset
              .resources()
              .reduce((sum, resource) => sum + server.dataset.count(resource), 0),
          ]),
        ),
      } satisfies TeamServersStarted;
    }
    case 'requests':
      return Object.fromEntries(
        [...servers].map(([name, server]) => {
          const count = server.requests.length;
          server.requests.length = 0;
          return [name, count];
        }),
      );
    case 'request-log':
      return Object.fromEntries(
        [...servers].map(([name, server]) => {
          const logged: LoggedRequest[] = server.requests.map(({ method, path, query }) => ({
            method,
            path: `${path}${Object.keys(query).length > 0 ? `?${new URLSearchParams(query).toString()}` : ''}`,
          }));
          server.requests.length = 0;
          return [name, logged];
        }),
      );
    case 'close':
      await Promise.all([...servers.values()].map((server) => server.close()));
      servers.clear();
      return null;
  }
}

serveParent<TeamServersRequest>(handle);
