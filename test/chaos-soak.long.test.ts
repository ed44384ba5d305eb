/**
 * `npm run bench -- soak --chaos` end to end at a tiny size, on every dialect: the daemon is
 * killed and restarted for half a minute while the server rotates through its faults, then the
 * final quiet runs, and the report says all it should; the warehouse equals the server, no run is
 * left running, nothing is left behind. (`npm run test:long`: about a minute per dialect.)
 */
import { describe, expect, it } from 'vitest';
import { main } from '../bench/bench.js';
import type { ChaosResults } from '../bench/chaos.js';
import { testDialects } from './support.js';

const postgresUrl = process.env.OCS_TEST_POSTGRES_URL;

describe.each(testDialects)('soak --chaos (%s)', (dialect) => {
  it(
    'kills and restarts the daemon, then finds the warehouse equal to the server and nothing left behind',
    { timeout: 600_000 },
    async () => {
      let results: ChaosResults | undefined;
      let out = '';
      let progress = '';
      const code = await main(
        [
          'soak',
          '--chaos',
          '--minutes',
          '0.5',
          '--schedule-seconds',
          '2',
          '--rows',
          '5',
          '--page-size',
          '5',
          '--change-seconds',
          '1',
          '--phase-seconds',
          '4',
          '--kill-seconds',
          '6',
          // Its first daemon is ended while it starts, whatever the server lets it do by then.
          '--seed',
          '1',
          ...(dialect === 'postgres' ? ['--postgres', postgresUrl!] : ['--audit']),
        ],
        {
          out: (text) => (out += `${text}\n`),
          progress: (text) => (progress += `${text}\n`),
          chaos: (soaked) => (results = soaked),
        },
      );
      expect(results?.problems, `${out}\n${progress}`).toEqual([]);
      expect(code, progress).toBe(0);
      const { final, runs, restartToOk } = results!;

      // The chaos happened: processes ended at their moments and were restarted.
      expect(results!.processes).toBeGreaterThanOrEqual(2);
      expect(results!.restarts).toBe(results!.processes - 1);
      expect(results!.kills + results!.stops).toBeGreaterThanOrEqual(1);
      expect(results!.died + results!.stuck).toBe(0);
      expect(restartToOk.measured + restartToOk.endedBefore).toBe(results!.restarts);
      if (restartToOk.measured > 0) {
        expect(restartToOk.longestSeconds).toBeGreaterThanOrEqual(restartToOk.medianSeconds!);
      }
      expect(results!.phaseTurns).toBeGreaterThanOrEqual(2);
      expect(results!.changes).toBeGreaterThan(0);
      expect(runs.ok).toBeGreaterThanOrEqual(1);
      expect(runs.running).toBe(0);

      // The final runs: nothing lost by the incremental one, everything exact after the full refresh.
      expect(final.sync.exitCode).toBe(0);
      expect(final.fullRefresh.exitCode).toBe(0);
      expect(final.fullRefresh.comparison.tables).toBeGreaterThan(30);
      expect(final.fullRefresh.comparison.rows).toBeGreaterThan(100);
      expect(final.fullRefresh.comparison.deletedMarked).toBeGreaterThan(0);
      expect(final.files.files).toBeGreaterThan(0);
      expect(final.finalRuns).toEqual(['incremental ok', 'full_refresh ok']);
      expect(final).toMatchObject({
        runsLeftRunning: 0,
        lockHeld: false,
        lockRecord: null,
        leftBehind: [],
      });
      if (dialect === 'sqlite') expect(final.auditVerified?.versions).toBeGreaterThan(0);

      // The report says it all.
      expect(out).toMatch(/^ocs-sync chaos soak: `ocs-sync daemon` ended at random moments/m);
      expect(out).toContain(
        dialect === 'postgres' ? ', PostgreSQL;' : ', SQLite with the audit chain;',
      );
      expect(out).toMatch(
        /^processes: \d+ \(\d+ restarts, after back-offs of up to \d+ s\); \d+ killed with -9 \(\d+ during a run\), \d+ stopped with SIGTERM/m,
      );
      expect(out).toMatch(
        /^restart to its first run ended ok: longest (\d+\.\d s|n\/a), median (\d+\.\d s|n\/a) \(\d+ restarts; \d+ more were ended before one\)$/m,
      );
      expect(out).toMatch(
        /^runs as the warehouse records them: \d+ ok, \d+ partial, \d+ failed, \d+ interrupted \(\d+ of them closed by the next start\), 0 running; /m,
      );
      expect(out).toMatch(/^ {2}sync: exit 0; every row the server has is there as it has it: /m);
      expect(out).toMatch(/^ {2}sync --full-refresh: exit 0; the warehouse equals the server: /m);
      expect(out).toMatch(
        /^ {2}recorded as incremental ok, full_refresh ok; runs left running: 0; writer lock: free, no record left; left behind: nothing$/m,
      );
      expect(out).toMatch(/^PASSED: /m);
    },
  );
});
