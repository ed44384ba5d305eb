/**
 * Start-up time of the CLI: the wall time of `ocs-sync --help` and of `ocs-sync status` on a demo
 * warehouse against `node -e 0`, measured pairwise (each round runs the three back to back, so
 * machine noise hits them alike) and compared by the median of the per-round ratios.
 * Goals: --help at most 2x node, status at most 3x.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const STARTUP_GOALS = { help: 2, status: 3 } as const;

export interface StartupResults {
  rounds: number;
  /** Median wall seconds of each command. */
  medianSeconds: { node: number; help: number; status: number };
  /** Median of the per-round ratios against `node -e 0`. */
  ratio: { help: number; status: number };
  ratiosByRound: Array<{ help: number; status: number }>;
  ok: { help: boolean; status: boolean };
}

/** The built launcher (`bin/ocs-sync.js` needs dist/bundle, which `npm run bench` builds first). */
export function launcher(): string {
  let directory = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(directory, 'bin', 'ocs-sync.js');
    if (existsSync(candidate) && existsSync(join(directory, 'dist', 'bundle', 'main.js'))) {
      return candidate;
    }
    const parent = dirname(directory);
    if (parent === directory) {
      throw new Error('The start-up stage needs the build: run `npm run build` first.');
    }
    directory = parent;
  }
}

function wallSeconds(args: string[], cwd: string): number {
  const started = performance.now();
  const result = spawnSync(process.execPath, args, { cwd, stdio: 'ignore' });
  const seconds = (performance.now() - started) / 1000;
  if (result.status !== 0) {
    throw new Error(`node ${args.join(' ')} exited ${String(result.status ?? result.signal)}`);
  }
  return seconds;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export function measureStartup(options: { rounds: number }): StartupResults {
  const bin = resolve(launcher());
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-startup-'));
  try {
    const database = join(directory, 'demo.db');
    // The demo's warehouse: 35 resources, a few rows each.
    wallSeconds([bin, 'demo', '--rows', '20', '--db', database], directory);
    const commands = {
      node: ['-e', '0'],
      help: [bin, '--help'],
      status: [bin, 'status', '-w', database],
    };
    // One unmeasured round warms the file cache.
    for (const args of Object.values(commands)) wallSeconds(args, directory);
    const samples = { node: [] as number[], help: [] as number[], status: [] as number[] };
    const ratiosByRound: StartupResults['ratiosByRound'] = [];
    for (let round = 0; round < options.rounds; round++) {
      const node = wallSeconds(commands.node, directory);
      const help = wallSeconds(commands.help, directory);
      const status = wallSeconds(commands.status, directory);
      samples.node.push(node);
      samples.help.push(help);
      samples.status.push(status);
      ratiosByRound.push({ help: help / node, status: status / node });
    }
    const ratio = {
      help: median(ratiosByRound.map((round) => round.help)),
      status: median(ratiosByRound.map((round) => round.status)),
    };
    return {
      rounds: options.rounds,
      medianSeconds: {
        node: median(samples.node),
        help: median(samples.help),
        status: median(samples.status),
      },
      ratio,
      ratiosByRound,
      ok: { help: ratio.help <= STARTUP_GOALS.help, status: ratio.status <= STARTUP_GOALS.status },
    };
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

export function formatStartup(results: StartupResults): string {
  const { medianSeconds: seconds, ratio, ok } = results;
  const ms = (value: number) => `${Math.round(value * 1000)} ms`;
  return [
    `Start-up (${results.rounds} rounds of node -e 0, --help, status back to back; medians):`,
    `  node -e 0                         ${ms(seconds.node)}`,
    `  ocs-sync --help                   ${ms(seconds.help)}  ${ratio.help.toFixed(2)}x node (goal <= ${STARTUP_GOALS.help}x) ${ok.help ? 'ok' : 'MISSED'}`,
    `  ocs-sync status (demo warehouse)  ${ms(seconds.status)}  ${ratio.status.toFixed(2)}x node (goal <= ${STARTUP_GOALS.status}x) ${ok.status ? 'ok' : 'MISSED'}`,
    `  per round: ${results.ratiosByRound.map((round) => `${round.help.toFixed(2)}/${round.status.toFixed(2)}`).join('  ')}`,
  ].join('\n');
}
