/**
 * The fleet's daemon with injected syncs, a clock and a cron the test drives: teams_at_once, each
 * team's health on its own and together, the metrics labelled with the team, a run that stops
 * moving (stopped, its slot given to the next team, /livez), and SIGTERM for every team. Ordered
 * by events, never by the time things take. The real thing, against fake servers: teams.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startFleet, type FleetTeam, type RunningFleet } from '../src/daemon/fleet.js';
import type { DaemonSyncRequest } from '../src/daemon/daemon.js';
import type { ScheduleFunction } from '../src/daemon/scheduler.js';
import { Slots } from '../src/daemon/slots.js';
import { silentLogger } from '../src/log.js';
import type { SyncReport } from '../src/sync/engine.js';
import { waitFor } from './support.js';

class ManualClock {
  time = Date.parse('2026-01-05T10:00:00Z');
  now = () => this.time;
  advance(ms: number): void {
    this.time += ms;
  }
}

/** A cron whose jobs never fire on their own: only the start-up run happens. */
const noTicks: ScheduleFunction = () => ({ stop: () => undefined });

function report(status: SyncReport['status'] = 'ok'): SyncReport {
  return {
    runId: 1,
    kind: 'incremental',
    status,
    schemaChecksum: 'abc',
    previousSchemaChecksum: 'abc',
    schemaChanges: [],
    resources: [],
    problems: [],
    rows: 0,
    pages: 0,
    requests: 1,
    durationMs: 1,
  };
}

interface Call {
  team: string;
  request: DaemonSyncRequest;
  finish(value: SyncReport | Error): void;
}

/** Teams whose runs stay open until the test finishes them. */
function teamsOf(names: string[], maxAgeSeconds = 60) {
  const calls: Call[] = [];
  const teams: FleetTeam[] = names.map((name) => ({
    name,
    schedule: '*/15 * * * *',
    fullRefreshSchedule: null,
    timezone: 'UTC',
    maxAgeSeconds,
    logger: silentLogger(),
    sync: (request) =>
      new Promise<SyncReport>((resolve, reject) => {
        calls.push({
          team: name,
          request,
          finish: (value) => (value instanceof Error ? reject(value) : resolve(value)),
        });
      }),
  }));
  const call = (team: string) => calls.find((candidate) => candidate.team === team);
  return { teams, calls, call };
}

let running: { fleet: RunningFleet; stop: AbortController } | undefined;
afterEach(async () => {
  if (!running) return;
  running.stop.abort();
  await running.fleet.stopped;
  running = undefined;
});

async function start(
  teams: FleetTeam[],
  teamsAtOnce: number,
  clock = new ManualClock(),
  listen = true,
): Promise<RunningFleet> {
  const stop = new AbortController();
  const fleet = await startFleet({
    teams,
    teamsAtOnce,
    listen: listen ? { host: '127.0.0.1', port: 0 } : null,
    logger: silentLogger(),
    signal: stop.signal,
    scheduleFunction: noTicks,
    clock,
    shutdownGraceMs: 50,
  });
  running = { fleet, stop };
  return fleet;
}

/** /healthz and /livez bodies, as far as the tests read them. */
interface HealthBody {
  status?: string;
  reason?: string;
  unhealthy?: string[];
  teams?: Record<string, Record<string, unknown>>;
  [key: string]: unknown;
}

async function get(
  fleet: RunningFleet,
  path: string,
): Promise<{ status: number; body: HealthBody }> {
  const response = await fetch(`${fleet.healthServer!.url}${path}`);
  return { status: response.status, body: (await response.json()) as HealthBody };
}

async function metricsOf(fleet: RunningFleet): Promise<string> {
  return (await fetch(`${fleet.healthServer!.url}/metrics`)).text();
}

describe('Slots', () => {
  it('hands out at most its size, first come first served, each slot back once', async () => {
    const slots = new Slots(2);
    const order: string[] = [];
    const a = await slots.acquire();
    const b = await slots.acquire();
    const c = slots.acquire().then((slot) => (order.push('c'), slot));
    const d = slots.acquire().then((slot) => (order.push('d'), slot));
    expect([slots.inUse, slots.waiting]).toEqual([2, 2]);
    a.release();
    a.release();
    await c;
    expect(order).toEqual(['c']);
    b.release();
    await d;
    expect(order).toEqual(['c', 'd']);
    expect([slots.inUse, slots.waiting]).toEqual([2, 0]);
  });

  it('lets a waiter go when its signal aborts', async () => {
    const slots = new Slots(1);
    await slots.acquire();
    const stop = new AbortController();
    const waiting = slots.acquire(stop.signal);
    stop.abort(new Error('stopping'));
    await expect(waiting).rejects.toThrow('stopping');
    expect(slots.waiting).toBe(0);
  });
});

describe('startFleet', () => {
  it('syncs at most teams_at_once teams together; the others wait, visibly, in order', async () => {
    const { teams, calls, call } = teamsOf(['a', 'b', 'c']);
    const fleet = await start(teams, 2);
    await waitFor(() => calls.length === 2, 'two runs');
    expect(calls.map((run) => run.team)).toEqual(['a', 'b']);
    const waiting = await get(fleet, '/healthz?team=c');
    expect(waiting.body).toMatchObject({
      team: 'c',
      running: true,
      stage: 'waiting for a free slot (teams_at_once)',
    });
    expect(await metricsOf(fleet)).toContain('ocs_sync_waiting_for_slot{team="c"} 1');
    call('b')!.finish(report());
    await waitFor(() => call('c'), 'c to start once b is done');
    expect(await metricsOf(fleet)).toContain('ocs_sync_waiting_for_slot{team="c"} 0');
    call('a')!.finish(report());
    call('c')!.finish(report());
    await waitFor(() => fleet.teams.get('c')!.scheduler.status().lastRun, 'c to finish');
  });

  it('answers /healthz for all teams (503 naming the unhealthy), one team, or 404 for no such team', async () => {
    const { teams, calls, call } = teamsOf(['kenya', 'malawi', 'uganda']);
    const fleet = await start(teams, 3);
    await waitFor(() => calls.length === 3, 'three runs');
    call('kenya')!.finish(report());
    call('malawi')!.finish(new Error('The server refused the API key (HTTP 401): Invalid token.'));
    call('uganda')!.finish(report('partial'));
    await waitFor(
      () => [...fleet.teams.values()].every((team) => team.scheduler.status().lastRun),
      'every run to end',
    );
    const all = await get(fleet, '/healthz');
    expect(all.status).toBe(503);
    expect(all.body).toMatchObject({
      status: 'unhealthy',
      unhealthy: ['malawi'],
      teams: {
        kenya: { status: 'ok', lastRunStatus: 'ok' },
        malawi: { status: 'unhealthy', lastRunStatus: 'failed' },
        uganda: { status: 'ok', lastRunStatus: 'partial' },
      },
    });
    expect(all.body.reason).toMatch(
      /^1 of 3 teams unhealthy: malawi \(The last run failed: The server refused the API key/,
    );
    expect(await get(fleet, '/healthz?team=kenya')).toMatchObject({
      status: 200,
      body: { team: 'kenya', status: 'ok' },
    });
    expect((await get(fleet, '/healthz?team=malawi')).status).toBe(503);
    expect(await get(fleet, '/healthz?team=zambia')).toEqual({
      status: 404,
      body: { error: 'no team "zambia" runs here; this daemon runs kenya, malawi, uganda' },
    });
    expect(await get(fleet, '/livez')).toEqual({ status: 200, body: { status: 'ok' } });
    const metrics = await metricsOf(fleet);
    for (const [team, status] of [
      ['kenya', 'ok'],
      ['malawi', 'failed'],
      ['uganda', 'partial'],
    ]) {
      expect(metrics).toContain(
        `ocs_sync_runs_total{kind="incremental",status="${status}",team="${team}"} 1`,
      );
    }
    // Every series of ours names its team; the process's own appear once, without one.
    const ours = metrics.split('\n').filter((line) => line.startsWith('ocs_sync_'));
    expect(ours.length).toBeGreaterThan(20);
    for (const line of ours) expect(line).toMatch(/team="(kenya|malawi|uganda)"/);
    expect(metrics.match(/^process_start_time_seconds /gm)).toHaveLength(1);
    expect(metrics.match(/^# HELP ocs_sync_runs_total /gm)).toHaveLength(1);
  });

  it('stops a run that has not moved for max_age_seconds; its slot goes to the next team', async () => {
    const clock = new ManualClock();
    // A max age of 1 s: the fleet looks every 100 ms (a tenth of it).
    const { teams, calls, call } = teamsOf(['stuck', 'next'], 1);
    const fleet = await start(teams, 1, clock);
    await waitFor(() => calls.length === 1, 'the first run');
    const stuck = call('stuck')!;
    // It moves (a page), then nothing for longer than the max age.
    stuck.request.events.onProgress?.({ stage: 'syncing chats', unit: 'rows', done: 10 });
    clock.advance(1_000);
    await waitFor(() => fleet.teams.get('stuck')!.health().running, 'the run');
    expect(stuck.request.signal.aborted).toBe(false);
    clock.advance(1_000);
    await waitFor(() => stuck.request.signal.aborted, 'the stalled run to be told to stop');
    expect(String(stuck.request.signal.reason)).toMatch(
      /The run stopped moving: nothing moved for 2 s \(stuck at syncing chats: 10 rows\), longer than health\.max_age_seconds \(1 s\)/,
    );
    // It stops as a run does on its signal; the next team gets the slot.
    stuck.finish(new Error('interrupted'));
    await waitFor(() => call('next'), 'the next team to start');
    const health = await get(fleet, '/healthz?team=stuck');
    expect(health.status).toBe(503);
    expect(health.body.reason).toMatch(/^The last run failed: stopped: nothing moved for 2 s/);
    expect(await metricsOf(fleet)).toContain('ocs_sync_stalled_runs_total{team="stuck"} 1');
    call('next')!.finish(report());
  });

  it('gives the slot away when a stopped run does not end, and is not live once it has not for max age', async () => {
    const clock = new ManualClock();
    const { teams, calls, call } = teamsOf(['stuck', 'next'], 1);
    const fleet = await start(teams, 1, clock);
    await waitFor(() => calls.length === 1, 'the first run');
    clock.advance(2_000);
    // The run ignores its signal (a request no signal reaches); after the grace, the slot goes.
    await waitFor(() => call('next'), 'the next team to start without waiting for it');
    expect(fleet.teams.get('stuck')!.scheduler.status().running).not.toBeNull();
    expect((await get(fleet, '/livez')).status).toBe(200);
    clock.advance(61_000);
    const live = await get(fleet, '/livez');
    expect(live.status).toBe(503);
    expect(live.body.reason).toMatch(
      /^stuck: a run told to stop 61 s ago .* has not ended; only a restart frees it$/,
    );
    call('stuck')!.finish(new Error('gave up at last'));
    await waitFor(
      () => !fleet.teams.get('stuck')!.scheduler.status().running,
      'the stuck run to end',
    );
    expect((await get(fleet, '/livez')).status).toBe(200);
    call('next')!.finish(report());
  });

  it('stops every team on the signal: runs aborted, waiting teams never start', async () => {
    const { teams, calls } = teamsOf(['a', 'b', 'c']);
    const stop = new AbortController();
    const fleet = await startFleet({
      teams,
      teamsAtOnce: 2,
      listen: null,
      logger: silentLogger(),
      signal: stop.signal,
      scheduleFunction: noTicks,
      shutdownGraceMs: 5_000,
    });
    await waitFor(() => calls.length === 2, 'two runs');
    for (const run of calls) {
      run.request.signal.addEventListener('abort', () => run.finish(new Error('interrupted')));
    }
    stop.abort();
    expect(await fleet.stopped).toEqual({ abandonedRun: false });
    expect(calls.map((run) => [run.team, run.request.signal.aborted])).toEqual([
      ['a', true],
      ['b', true],
    ]);
  });
});
