/**
 * `npm run bench -- concurrency`: several resources at once (issue 23, point 4).
 *
 * The fake server (its own process) serves the sample team, every resource, with `--latency`
 * (default 200 ms, the real server's render time for a full page) before each page: the largest
 * resource (`chat_messages`) has `--rows` rows, three others a tenth of it, the rest 20. For each
 * setting of `--settings` (default 1, 2, 4), in a fresh process each and a SQLite warehouse of its
 * own: a first sync (not reported), an unchanged rerun and a full refresh of all resources, with
 * the requests per minute each reached. Then the largest resource's full refresh walked alone:
 * the bound no setting can beat (a walk cannot be split). Goal: the best full refresh of all
 * resources ≤ 1.15 × that bound.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
import type { StageRequest, StageResult } from './stages.js';

export interface ConcurrencyOptions {
  rows: number;
  latencyMs: number;
  settings: number[];
  pageSize: number;
  pagesInFlight: number;
  seed: number;
  json: boolean;
}

interface Measured {
  seconds: number;
  requests: number;
  requestsPerMinute: number;
  rows: number;
}

export interface ConcurrencyResults {
  settings: ConcurrencyOptions & { node: string };
  bySetting: Array<{ concurrency: number; rerun: Measured; fullRefresh: Measured }>;
  /** The largest resource's full refresh, walked alone. */
  largestAlone: Measured & { resource: string };
  check: { best: number; ratio: number; target: string; met: boolean };
}

const LARGEST = 'chat_messages';
/** A tenth of the largest each: the other resources a team has many rows of. */
const MIDDLE = ['chats', 'sessions', 'participants'];

const USAGE = `Usage: npm run bench -- concurrency [options]
  --rows N             rows of the largest resource, chat_messages (default 20000); chats,
                       sessions and participants have a tenth, the other resources 20
  --latency MS         fake server latency per page (default 200)
  --settings LIST      concurrency settings to measure (default 1,2,4)
  --page-size N        page size of the sync (default 1000)
  --pages-in-flight N  pages fetched ahead, per walk (default 2)
  --seed N             dataset seed (default ${DEFAULT_BENCH_SEED})
  --json               print the results as JSON`;

export function parseConcurrencyArgs(argv: string[]): ConcurrencyOptions {
  const values = parseModeFlags(
    argv,
    ['rows', 'latency', 'settings', 'page-size', 'pages-in-flight', 'seed'],
    USAGE,
    (message) => new BenchUsageError(message),
  );
  const settings = (values.settings ?? '1,2,4')
    .split(',')
    .map((text) => positiveInteger(text.trim(), '--settings', 1));
  if (settings.some((setting) => setting > 8)) {
    throw new BenchUsageError('--settings: concurrency goes from 1 to 8.');
  }
  return {
    rows: positiveInteger(values.rows, '--rows', 20_000),
    latencyMs: positiveInteger(values.latency, '--latency', 200, true),
    settings,
    pageSize: Math.min(1000, positiveInteger(values['page-size'], '--page-size', 1000)),
    pagesInFlight: positiveInteger(values['pages-in-flight'], '--pages-in-flight', 2),
    seed: positiveInteger(values.seed, '--seed', DEFAULT_BENCH_SEED, true),
    json: values.json,
  };
}

function measured(stage: StageResult, serverRequests: number): Measured {
  return {
    seconds: stage.seconds,
    requests: serverRequests,
    requestsPerMinute: (serverRequests / stage.seconds) * 60,
    rows: stage.rows,
  };
}

export async function runConcurrencyBench(
  options: ConcurrencyOptions,
  output: Pick<BenchOutput, 'progress'>,
): Promise<ConcurrencyResults> {
  // The sample team has sealed resources: a key of the server's, so they are served and opened.
  const keys = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const tenth = Math.max(1, Math.round(options.rows / 10));
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-bench-concurrency-'));
  const server = await startServer(options, 0, {
    rowCounts: {
      [LARGEST]: options.rows,
      ...Object.fromEntries(MIDDLE.map((resource) => [resource, tenth])),
    },
    teamPublicKeyPem: keys.publicKey,
  });
  const run = async (
    label: string,
    request: Partial<Extract<StageRequest, { kind: 'sync' }>> & { warehouse: { url: string } },
  ): Promise<Measured> => {
    output.progress(`${label} ...`);
    await server.request<number>({ type: 'requests' });
    const stage = await runStageProcess({
      kind: 'sync',
      server: { url: server.url, apiKey: server.apiKey },
      pageSize: options.pageSize,
      pagesInFlight: options.pagesInFlight,
      privateKeyPem: keys.privateKey,
      ...request,
    });
    const result = measured(stage, await server.request<number>({ type: 'requests' }));
    output.progress(
      `  ${result.rows} rows in ${result.seconds.toFixed(2)} s, ${result.requests} requests (${formatInteger(result.requestsPerMinute)}/min)`,
    );
    return result;
  };
  try {
    const bySetting: ConcurrencyResults['bySetting'] = [];
    for (const concurrency of options.settings) {
      const warehouse = { url: join(directory, `concurrency-${concurrency}.db`) };
      await run(`first sync at concurrency ${concurrency} (not reported)`, {
        warehouse,
        concurrency,
      });
      const rerun = await run(`unchanged rerun at concurrency ${concurrency}`, {
        warehouse,
        concurrency,
      });
      const fullRefresh = await run(`full refresh at concurrency ${concurrency}`, {
        warehouse,
        concurrency,
        fullRefresh: true,
      });
      bySetting.push({ concurrency, rerun, fullRefresh });
    }
    const alone = await run(`full refresh of ${LARGEST} alone`, {
      warehouse: { url: join(directory, `concurrency-${options.settings.at(-1)}.db`) },
      resources: [LARGEST],
      fullRefresh: true,
    });
    const best = Math.min(...bySetting.map((entry) => entry.fullRefresh.seconds));
    const ratio = best / alone.seconds;
    return {
      settings: { ...options, node: process.version },
      bySetting,
      largestAlone: { ...alone, resource: LARGEST },
      check: { best, ratio, target: '<= 1.15', met: ratio <= 1.15 },
    };
  } finally {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

export function formatConcurrencyReport(results: ConcurrencyResults): string {
  const { settings, largestAlone, check } = results;
  const row = (label: string, entry: Measured) => [
    label,
    formatInteger(entry.rows),
    entry.seconds.toFixed(2),
    formatInteger(entry.requests),
    formatInteger(entry.requestsPerMinute),
  ];
  const bestSetting = results.bySetting.find((entry) => entry.fullRefresh.seconds === check.best);
  return [
    `Several resources at once: the sample team, ${formatInteger(settings.rows)} ${LARGEST} rows, ${MIDDLE.join(', ')} a tenth of that, the rest 20; ${settings.latencyMs} ms a page, page size ${settings.pageSize}, ${settings.pagesInFlight} pages in flight per walk; Node ${settings.node}.`,
    'Walks start longest first (as long as their last walks took); all of them share the one request pacer.',
    '',
    ...table(
      ['stage', 'rows', 'seconds', 'requests', 'requests/min'],
      [
        ...results.bySetting.flatMap((entry) => [
          row(`unchanged rerun, concurrency ${entry.concurrency}`, entry.rerun),
          row(`full refresh, concurrency ${entry.concurrency}`, entry.fullRefresh),
        ]),
        row(`full refresh of ${largestAlone.resource} alone`, largestAlone),
      ],
      [false, true, true, true, true],
    ),
    '',
    `best full refresh / largest walked alone  ${check.ratio.toFixed(2)}  target ${check.target}  ${check.met ? 'met' : 'NOT MET'}  (${check.best.toFixed(2)} s at concurrency ${bestSetting?.concurrency} / ${largestAlone.seconds.toFixed(2)} s)`,
  ].join('\n');
}

export function concurrencyMain(
  argv: string[],
  output: Pick<BenchOutput, 'out' | 'progress' | 'concurrency'>,
): Promise<number> {
  return runBenchMode(
    {
      name: 'concurrency benchmark',
      parse: parseConcurrencyArgs,
      usageError: BenchUsageError,
      run: (options) => runConcurrencyBench(options, output),
      format: formatConcurrencyReport,
    },
    argv,
    { out: output.out, progress: output.progress, results: output.concurrency },
  );
}
