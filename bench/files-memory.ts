/**
 * File contents at scale (`npm run bench:files -- [--mib N]`; not part of `npm test`): one `files`
 * row whose content is N MiB (default 1024) generated chunk by chunk by the fake server, synced
 * through the CLI into a SQLite warehouse and its blob store. Samples this process's RSS while the
 * body streams and prints the peak over the baseline: streaming keeps it flat, whatever N is.
 * The fake server runs in this process too and never holds the body either.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { main } from '../src/cli/main.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer } from '../src/fake-server/server.js';

/** The peak RSS growth we accept for any file size. */
const FLAT_LIMIT_MIB = 96;

async function run(): Promise<number> {
  const { values } = parseArgs({ options: { mib: { type: 'string', default: '1024' } } });
  const mib = Number(values.mib);
  if (!Number.isInteger(mib) || mib < 1) throw new Error('--mib must be a positive integer');
  const size = mib * 1024 * 1024;
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-files-bench-'));
  const dataset = createSampleDataset({ rowsPerResource: 1, seed: 3 });
  // The rows say the size the server sends, as the real server's content_size does.
  dataset.edit('files', dataset.ids('files'), { content_size: size });
  const server = await startFakeServer({
    dataset,
    fileContent: (row) => ({ size, seed: `bench:${String(row.id)}` }),
    apiKeys: { admin: ['bench-key'], nonAdmin: [] },
  });
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 20);
  try {
    global.gc?.();
    const baseline = process.memoryUsage.rss();
    peak = baseline;
    const started = performance.now();
    let output = '';
    const code = await main(['sync'], {
      env: {
        OCS_BASE_URL: server.url,
        OCS_API_KEY: 'bench-key',
        OCS_WAREHOUSE_URL: join(directory, 'bench.db'),
        OCS_RESOURCES: 'files',
        OCS_FILES_MAX_FILE_MIB: String(Math.max(1024, mib)),
        OCS_LOG_LEVEL: 'warn',
      },
      output: { out: (line) => (output += `${line}\n`), err: (line) => (output += `${line}\n`) },
    });
    const seconds = (performance.now() - started) / 1000;
    peak = Math.max(peak, process.memoryUsage.rss());
    const growthMib = (peak - baseline) / 1024 / 1024;
    process.stdout.write(
      `${output.trim()}\n\nfile of ${mib} MiB: synced in ${seconds.toFixed(1)} s ` +
        `(${(mib / seconds).toFixed(0)} MiB/s); RSS baseline ${(baseline / 1048576).toFixed(0)} MiB, ` +
        `peak +${growthMib.toFixed(1)} MiB (limit +${FLAT_LIMIT_MIB} MiB): ` +
        `${growthMib <= FLAT_LIMIT_MIB && code === 0 ? 'PASS' : 'FAIL'}\n`,
    );
    return growthMib <= FLAT_LIMIT_MIB && code === 0 ? 0 : 1;
  } finally {
    clearInterval(sampler);
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

process.exitCode = await run();
