/**
 * Kill and restart, again and again, as a container platform does: each sync runs as pid 1 of its
 * own PID namespace on the same host name, is killed with -9 after a random number of pages while
 * the server keeps changing, and the next one starts at once. At the end one sync runs to its
 * end: the warehouse equals the server, every killed run is closed as `interrupted` by the start
 * after it, and none is left `running`. And a full refresh killed half-way is run again by the
 * daemon's next start (found by the chaos soak). (`npm run test:long`.)
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { SeededRandom } from '../src/fake-server/random.js';
import {
  closeCliTestBed,
  expectWarehouseEqualsSource,
  openCliTestBed,
  runCli,
  syncEnv,
  teamKeys,
  testDialects,
  type CliTestBed,
} from './support.js';
import {
  expectDaemonStartToRedoFullRefresh,
  holdAPage,
  pidNamespaceUnavailable,
  startCliProcess,
} from './crash-support.js';

const KILLS = 8;
const noPidNamespace = pidNamespaceUnavailable();
if (noPidNamespace) console.warn(noPidNamespace);

describe.each(testDialects)(`kill -9 and restart as pid 1 (%s)`, (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let bed: CliTestBed;

  beforeEach(async () => {
    dataset = createSampleDataset({ rowsPerResource: 40, seed: 341 });
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    // The restarts must not wait for the lock: a dead holder is never waited for.
    bed = await openCliTestBed(dialect, 'lock:\n  wait_seconds: 0\n');
  });
  afterEach(async () => {
    server.options.onPageServed = undefined;
    await closeCliTestBed(bed, server);
  });

  it.skipIf(noPidNamespace)(
    `${KILLS} times over: every restart runs at once and resumes; the end is exact and no run is left running`,
    { timeout: 600_000 },
    async () => {
      const random = new SeededRandom(34);
      const env = {
        ...syncEnv(server.url, bed.warehouse.env, { OCS_PAGE_SIZE: '5' }),
        OCS_CONFIG: bed.configFile,
        OCS_LOG_LEVEL: 'warn',
      };
      for (let kill = 1; kill <= KILLS; kill += 1) {
        // The server moves on between runs: new rows, edited rows.
        dataset.insert('chat_messages', 3);
        dataset.edit('participants', [dataset.ids('participants')[kill]!]);
        const killAfter = 1 + Math.floor(random.next() * 12);
        let served = 0;
        let reached!: () => void;
        const killNow = new Promise<void>((resolve) => (reached = resolve));
        server.options.onPageServed = () => {
          served += 1;
          if (served === killAfter) reached();
        };
        const cli = startCliProcess(['sync'], env, { pidNamespace: true });
        const ended = await Promise.race([
          killNow.then(() => false),
          cli.finished.then(() => true),
        ]);
        if (ended) {
          // It finished before its moment came: a run like any other.
          expect((await cli.finished).code).toBe(0);
        } else {
          await cli.killHard();
        }
        server.options.onPageServed = undefined;
        const [lastRun] = await bed.warehouse.query(
          'SELECT status FROM "_ocs_runs" ORDER BY id DESC LIMIT 1',
        );
        expect(['running', 'ok', undefined]).toContain(lastRun?.status);
      }
      const last = startCliProcess(['sync'], env, { pidNamespace: true });
      const result = await last.finished;
      expect(result.code, result.stderr).toBe(0);
      await expectWarehouseEqualsSource(bed.warehouse, dataset);
      const runs = await bed.warehouse.query('SELECT status, error FROM "_ocs_runs" ORDER BY id');
      expect(runs.at(-1)?.status).toBe('ok');
      expect(runs.filter((run) => run.status === 'running')).toEqual([]);
      for (const run of runs.filter((row) => row.status === 'interrupted')) {
        expect(String(run.error)).toMatch(/^Closed by the next start \(pid 1 on /);
      }
      expect(runs.filter((run) => run.status === 'interrupted').length).toBeGreaterThan(KILLS / 2);
    },
  );

  it.skipIf(noPidNamespace)(
    "a full refresh killed half-way: the daemon's next start runs it again, so the deletions it was to mark are not left for a week",
    { timeout: 300_000 },
    async () => {
      const env = {
        ...syncEnv(server.url, bed.warehouse.env, { OCS_PAGE_SIZE: '5' }),
        OCS_CONFIG: bed.configFile,
        OCS_LOG_LEVEL: 'info',
      };
      expect((await runCli(['sync'], env)).code).toBe(0);
      const gone = dataset.ids('chat_messages').slice(0, 3);
      dataset.remove('chat_messages', gone);
      const { reached } = holdAPage(server);
      const killed = startCliProcess(['sync', '--full-refresh'], env, { pidNamespace: true });
      await reached;
      await killed.killHard();
      server.options.onPageServed = undefined;
      await expectDaemonStartToRedoFullRefresh(env, bed.warehouse, dataset, gone);
    },
  );
});
