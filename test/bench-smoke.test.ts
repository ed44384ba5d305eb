/**
 * The benchmark end to end on a tiny dataset: the fake server and every stage run in their own
 * child processes (from source, through vite-node), and the report names every stage and ratio.
 * No timing assertions: only that it runs and says everything it should.
 */
import { describe, expect, it } from 'vitest';
import { main, parseBenchArgs } from '../bench/bench.js';
import { STAGE_LABELS, resultsAsJson, type BenchResults } from '../bench/report.js';

const postgresUrl = process.env.OCS_BENCH_POSTGRES_URL ?? process.env.OCS_TEST_POSTGRES_URL;

let captured: BenchResults | undefined;

async function runBench(argv: string[]): Promise<{ code: number; out: string; progress: string }> {
  let out = '';
  let progress = '';
  const code = await main(argv, {
    out: (text) => (out += `${text}\n`),
    progress: (text) => (progress += `${text}\n`),
    results: (results) => (captured = results),
  });
  return { code, out, progress };
}

describe('benchmark smoke run', () => {
  it('runs every stage on 2,000 rows and prints the table and the ratios', async () => {
    const { code, out, progress } = await runBench(['--rows', '2000', '--page-size', '100']);
    expect(progress).not.toMatch(/failed/);
    expect(code).toBe(0);
    const stages = [
      STAGE_LABELS['sync-sqlite'],
      STAGE_LABELS['fetch-only'],
      STAGE_LABELS['write-only-sqlite'],
      STAGE_LABELS.baseline,
      STAGE_LABELS['rerun-unchanged'],
      STAGE_LABELS['rerun-incremental'],
      STAGE_LABELS['sync-sqlite-tenth'],
      ...(postgresUrl ? [STAGE_LABELS['sync-postgres'], STAGE_LABELS['write-only-postgres']] : []),
    ];
    for (const label of stages) {
      const line = out.split('\n').find((candidate) => candidate.startsWith(label));
      expect(line, label).toBeDefined();
      // stage | rows | seconds | CPU s | rows/s | peak RSS MB | requests
      expect(line!.split('|')).toHaveLength(7);
    }
    expect(out).toMatch(/^full sync -> SQLite +\| +2,000 \|/m);
    expect(out).toMatch(/^full sync -> SQLite at N\/10 +\| +200 \|/m);
    expect(out).toMatch(/^rerun, nothing changed +\| +0 \|.*\| +3$/m);
    expect(out).toMatch(/^rerun after 1% new rows +\| +20 \|/m);
    expect(out).toMatch(/^baseline: limit 100, one at a time +\| +2,000 \|/m);
    for (const check of [
      'sync / floor, SQLite (time)',
      'peak RSS(N) / RSS(N/10)',
      'peak RSS of the full sync at N',
      'speed-up over the baseline',
      'requests of an unchanged rerun',
      'requests of the 1% incremental rerun',
      ...(postgresUrl ? ['sync / floor, PostgreSQL (time)'] : []),
    ]) {
      expect(out).toMatch(new RegExp(`^${check.replace(/[()/%]/g, '\\$&')} .* target .* (met|NOT MET) `, 'm'));
    }
    // Reruns cost what they should, whatever the timing.
    expect(out).toMatch(/^requests of an unchanged rerun +3 +target <= 3 +met /m);
    expect(out).toMatch(/^requests of the 1% incremental rerun +3 +target <= 4 +met /m);
  }, 240_000);

  it('gives the same results as JSON', () => {
    expect(captured).toBeDefined();
    const results = JSON.parse(resultsAsJson(captured!)) as {
      settings: { rows: number; insertedRows: number };
      stages: Record<string, { rows: number; peakRssMb: number; serverRequests: number; rowsPerSecond: number }>;
      checks: Array<{ name: string; met: boolean }>;
    };
    expect(results.settings).toMatchObject({ rows: 2000, insertedRows: 20 });
    expect(results.stages['sync-sqlite']?.rows).toBe(2000);
    expect(results.stages['fetch-only']?.rows).toBe(2000);
    expect(results.stages['write-only-sqlite']?.rows).toBe(2000);
    expect(results.stages['sync-sqlite-tenth']?.rows).toBe(200);
    expect(results.stages['rerun-incremental']?.rows).toBe(20);
    // manifest, schema and 20 pages of 100.
    expect(results.stages['baseline']?.serverRequests).toBe(2 + 20);
    // manifest, team, schema and 20 pages.
    expect(results.stages['sync-sqlite']?.serverRequests).toBe(3 + 20);
    expect(results.stages['sync-sqlite']?.peakRssMb).toBeGreaterThan(0);
    expect(results.stages['sync-sqlite']?.rowsPerSecond).toBeGreaterThan(0);
    expect(results.checks.map((check) => check.name)).toContain('speed-up over the baseline');
  });

  it('refuses bad flags with a usage message', async () => {
    expect(() => parseBenchArgs(['--rows', 'many'], {})).toThrow(/--rows must be a positive integer/);
    expect(() => parseBenchArgs(['--page-size', '5000'], {})).toThrow(/at most 1000/);
    expect(() => parseBenchArgs(['--frobnicate'], {})).toThrow(/Unknown option/);
    expect(parseBenchArgs([], { OCS_TEST_POSTGRES_URL: 'postgres://x@127.0.0.1/db' })).toMatchObject({
      rows: 1_000_000,
      latencyMs: 0,
      pageSize: 1000,
      postgresUrl: 'postgres://x@127.0.0.1/db',
      json: false,
    });
    const { code, progress } = await runBench(['--latency', '-3']);
    expect(code).toBe(2);
    expect(progress).toMatch(/--latency/);
  });
});
