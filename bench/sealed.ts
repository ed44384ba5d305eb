/**
 * `npm run bench -- sealed`: sealed values opened on every core (issue 23, point 5).
 *
 * The fake server (its own process) serves the sample team with `participant_data` (two sealed
 * fields a row) sealed to a fresh key of `--bits`, and a plain resource (`chats`). Each stage is a
 * sync in a fresh process with the private key (`plaintext`):
 *   - the single-core rate of the private-key operation (RSA-OAEP, as open.ts runs it), here;
 *   - `participant_data` alone: sealed values opened per second, against 0.85 × cores × that rate;
 *   - `chats` alone, then `chats` and `participant_data` at once (concurrency 2): the plain walk
 *     must keep ≥ 90% of its pace while the values are opened on the pool's threads.
 * `--latency` (default 200 ms a page, the real server's order) makes the plain walk wait on the
 * server as a real one does, so what it loses beside the sealed walk is the sync's thread.
 */
import {
  constants,
  generateKeyPairSync,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
} from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { RSA_OAEP_HASH } from '../src/sealing/seal.js';
import {
  BenchUsageError,
  positiveInteger,
  runStageProcess,
  startServer,
  type BenchOutput,
} from './bench.js';
import { DEFAULT_BENCH_SEED } from './bench-dataset.js';
import { parseModeFlags, runBenchMode } from './bench-mode.js';
import { formatInteger, table } from './report.js';
import type { StageResult } from './stages.js';

export interface SealedOptions {
  rows: number;
  plainRows: number;
  bits: number;
  latencyMs: number;
  pageSize: number;
  pagesInFlight: number;
  seed: number;
  json: boolean;
}

export interface SealedResults {
  settings: SealedOptions & { cores: number; node: string };
  /** Private-key operations per second on one core. */
  singleCoreRate: number;
  sealedValues: number;
  /** The sealed walk alone: seconds, and values opened per second. */
  sealedAlone: { seconds: number; valuesPerSecond: number };
  plainAlone: { rows: number; seconds: number };
  /** The plain walk while the sealed one ran beside it. */
  plainBeside: { rows: number; seconds: number; sealedSeconds: number };
  checks: Array<{ name: string; value: number; target: string; met: boolean; detail: string }>;
}

const SEALED_RESOURCE = 'participant_data';
const PLAIN_RESOURCE = 'chats';

const USAGE = `Usage: npm run bench -- sealed [options]
  --rows N             participant_data rows, two sealed fields each (default 20000)
  --plain-rows N       rows of the plain resource walked beside it, chats (default 20000)
  --bits N             RSA key size (default 3072, what keygen writes)
  --latency MS         fake server latency per page (default 200)
  --page-size N        page size of the sync (default 1000)
  --pages-in-flight N  pages fetched ahead (default 2)
  --seed N             dataset seed (default ${DEFAULT_BENCH_SEED})
  --json               print the results as JSON`;

export function parseSealedArgs(argv: string[]): SealedOptions {
  const values = parseModeFlags(
    argv,
    ['rows', 'plain-rows', 'bits', 'latency', 'page-size', 'pages-in-flight', 'seed'],
    USAGE,
    (message) => new BenchUsageError(message),
  );
  return {
    rows: positiveInteger(values.rows, '--rows', 20_000),
    plainRows: positiveInteger(values['plain-rows'], '--plain-rows', 20_000),
    bits: positiveInteger(values.bits, '--bits', 3072),
    latencyMs: positiveInteger(values.latency, '--latency', 200, true),
    pageSize: Math.min(1000, positiveInteger(values['page-size'], '--page-size', 1000)),
    pagesInFlight: positiveInteger(values['pages-in-flight'], '--pages-in-flight', 2),
    seed: positiveInteger(values.seed, '--seed', DEFAULT_BENCH_SEED, true),
    json: values.json,
  };
}

/** RSA-OAEP private-key operations per second on this thread, over about a second. */
export function singleCorePrivateKeyRate(bits: number): number {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  const options = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: RSA_OAEP_HASH };
  const wrapped = publicEncrypt({ key: publicKey, ...options }, randomBytes(44));
  for (let warm = 0; warm < 20; warm++) privateDecrypt({ key: privateKey, ...options }, wrapped);
  let operations = 0;
  const started = performance.now();
  while (performance.now() - started < 1000 || operations < 50) {
    privateDecrypt({ key: privateKey, ...options }, wrapped);
    operations += 1;
  }
  return operations / ((performance.now() - started) / 1000);
}

function walkOf(stage: StageResult, resource: string): { rows: number; seconds: number } {
  const walk = stage.walks?.find((entry) => entry.resource === resource);
  if (!walk) throw new Error(`The stage did not walk ${resource}.`);
  return walk;
}

export async function runSealedBench(
  options: SealedOptions,
  output: Pick<BenchOutput, 'progress'>,
): Promise<SealedResults> {
  const cores = availableParallelism();
  output.progress(`Single-core rate of the ${options.bits}-bit private-key operation ...`);
  const singleCoreRate = singleCorePrivateKeyRate(options.bits);
  const keys = generateKeyPairSync('rsa', {
    modulusLength: options.bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-bench-sealed-'));
  const server = await startServer(options, 0, {
    rowCounts: { [SEALED_RESOURCE]: options.rows, [PLAIN_RESOURCE]: options.plainRows },
    teamPublicKeyPem: keys.publicKey,
  });
  try {
    const sealedValues = await server.request<number>({
      type: 'sealed-values',
      resource: SEALED_RESOURCE,
    });
    let warehouses = 0;
    const stage = async (label: string, resources: string[]) => {
      output.progress(`${label} ...`);
      const result = await runStageProcess({
        kind: 'sync',
        server: { url: server.url, apiKey: server.apiKey },
        warehouse: { url: join(directory, `sealed-${warehouses++}.db`) },
        pageSize: options.pageSize,
        pagesInFlight: options.pagesInFlight,
        concurrency: resources.length,
        resources,
        privateKeyPem: keys.privateKey,
      });
      output.progress(`  ${result.rows} rows in ${result.seconds.toFixed(2)} s`);
      return result;
    };
    const sealedStage = await stage(`${SEALED_RESOURCE} alone`, [SEALED_RESOURCE]);
    const plainStage = await stage(`${PLAIN_RESOURCE} alone`, [PLAIN_RESOURCE]);
    const bothStage = await stage(`${PLAIN_RESOURCE} and ${SEALED_RESOURCE} at once`, [
      SEALED_RESOURCE,
      PLAIN_RESOURCE,
    ]);
    const sealedWalk = walkOf(sealedStage, SEALED_RESOURCE);
    const sealedAlone = {
      seconds: sealedWalk.seconds,
      valuesPerSecond: sealedValues / sealedWalk.seconds,
    };
    const plainAlone = walkOf(plainStage, PLAIN_RESOURCE);
    const plainBeside = {
      ...walkOf(bothStage, PLAIN_RESOURCE),
      sealedSeconds: walkOf(bothStage, SEALED_RESOURCE).seconds,
    };
    const goal = 0.85 * cores * singleCoreRate;
    const pace = plainAlone.seconds / plainBeside.seconds;
    return {
      settings: { ...options, cores, node: process.version },
      singleCoreRate,
      sealedValues,
      sealedAlone,
      plainAlone,
      plainBeside,
      checks: [
        {
          name: 'sealed values opened per second',
          value: sealedAlone.valuesPerSecond,
          target: `>= ${formatInteger(goal)}`,
          met: sealedAlone.valuesPerSecond >= goal,
          detail: `0.85 x ${cores} cores x ${formatInteger(singleCoreRate)} private-key operations/s on one core; ${formatInteger(sealedValues)} values in ${sealedAlone.seconds.toFixed(2)} s`,
        },
        {
          name: `pace of ${PLAIN_RESOURCE} beside the sealed walk`,
          value: pace,
          target: '>= 0.90',
          met: pace >= 0.9,
          detail: `${plainAlone.seconds.toFixed(2)} s alone, ${plainBeside.seconds.toFixed(2)} s beside it (its walk took ${plainBeside.sealedSeconds.toFixed(2)} s)`,
        },
      ],
    };
  } finally {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

export function formatSealedReport(results: SealedResults): string {
  const { settings } = results;
  const lines = [
    `Sealed values: ${formatInteger(settings.rows)} ${SEALED_RESOURCE} rows (${formatInteger(results.sealedValues)} sealed values, ${settings.bits}-bit key), ${formatInteger(settings.plainRows)} ${PLAIN_RESOURCE} rows, ${settings.latencyMs} ms a page, page size ${settings.pageSize}; ${settings.cores} cores, Node ${settings.node}.`,
    `Opened on a pool of worker threads (one per core, at most 8; secrets.open_threads), a page's values cut into chunks shared by all walks; the sync's thread goes on with other walks meanwhile.`,
    '',
    `single-core private-key rate: ${formatInteger(results.singleCoreRate)} operations/s`,
    `sealed values opened:         ${formatInteger(results.sealedAlone.valuesPerSecond)} values/s`,
    '',
    ...table(
      ['check', 'value', 'target', 'met', 'detail'],
      results.checks.map((check) => [
        check.name,
        check.value >= 100 ? formatInteger(check.value) : check.value.toFixed(2),
        check.target,
        check.met ? 'met' : 'NOT MET',
        check.detail,
      ]),
      [false, true, false, false, false],
    ),
  ];
  return lines.join('\n');
}

export function sealedMain(
  argv: string[],
  output: Pick<BenchOutput, 'out' | 'progress' | 'sealed'>,
): Promise<number> {
  return runBenchMode(
    {
      name: 'sealed benchmark',
      parse: parseSealedArgs,
      usageError: BenchUsageError,
      run: (options) => runSealedBench(options, output),
      format: formatSealedReport,
    },
    argv,
    { out: output.out, progress: output.progress, results: output.sealed },
  );
}
