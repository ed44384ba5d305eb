/**
 * A page holding one huge value (`npm run bench:page -- [--mib N] [--limit-mib L]`; not part of
 * `npm test`): a server in this process streams a page whose one row carries an N MiB string
 * (default 300), without Content-Length; the CLI syncs it into a SQLite warehouse with
 * `http.max_page_mib` L (default 64). This process's RSS is sampled while the body streams and the
 * peak over the baseline printed: the page is cut off at the limit, so the peak follows L, not N.
 * With L above N the value is read whole, and the peak shows what the limit saves.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { main } from '../src/cli/main.js';

const KEY = 'bench-key';

async function stream(response: ServerResponse, bytes: number): Promise<void> {
  response.writeHead(200, { 'content-type': 'application/json' });
  response.write('{"cursor":null,"has_more":false,"results":[{"id":1,"value":"');
  const chunk = Buffer.alloc(64 * 1024, 'x');
  for (let sent = 0; sent < bytes && !response.destroyed; sent += chunk.length) {
    if (!response.write(chunk.subarray(0, Math.min(chunk.length, bytes - sent)))) {
      await new Promise((resolve) => {
        response.once('drain', resolve);
        response.once('close', resolve);
      });
    }
  }
  response.end('"}]}');
}

async function run(): Promise<number> {
  const { values } = parseArgs({
    options: {
      mib: { type: 'string', default: '300' },
      'limit-mib': { type: 'string', default: '64' },
    },
  });
  const mib = Number(values.mib);
  const limitMib = Number(values['limit-mib']);
  if (!Number.isInteger(mib) || mib < 1) throw new Error('--mib must be a positive integer');
  if (!Number.isInteger(limitMib) || limitMib < 1 || limitMib > 512) {
    throw new Error('--limit-mib must be an integer from 1 to 512');
  }
  let valueBytes = 1024;
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://bench.invalid').pathname;
    const json = (status: number, value: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(value));
    };
    if (path === '/api/export/manifest/') {
      json(200, {
        schema_checksum: 'bench',
        entries: [{ model: 'bench.huge', resource: 'huge', cursor: 'pk', secret: false }],
      });
    } else if (path === '/api/export/team/') {
      json(200, { id: 1, name: 'Bench', has_public_key: false });
    } else if (path === '/api/export/huge/') {
      void stream(response, valueBytes);
    } else {
      json(404, { detail: 'Not found.' });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-page-bench-'));
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 10);
  let output = '';
  const sync = (database: string) =>
    main(['sync'], {
      env: {
        OCS_BASE_URL: url,
        OCS_API_KEY: KEY,
        OCS_WAREHOUSE_URL: join(directory, database),
        OCS_MAX_PAGE_MIB: String(limitMib),
        OCS_LOG_LEVEL: 'silent',
      },
      output: { out: (line) => (output += `${line}\n`), err: (line) => (output += `${line}\n`) },
    });
  try {
    // A small sync first, so the code it loads is not counted as the page's memory.
    await sync('warm-up.db');
    output = '';
    valueBytes = mib * 1024 * 1024;
    global.gc?.();
    const baseline = process.memoryUsage.rss();
    peak = baseline;
    const code = await sync('bench.db');
    peak = Math.max(peak, process.memoryUsage.rss());
    const growthMib = (peak - baseline) / 1024 / 1024;
    const cut = limitMib < mib;
    process.stdout.write(
      `${output.trim()}\n\none value of ${mib} MiB, http.max_page_mib ${limitMib}: exit ${code} ` +
        `(${cut ? 'cut off at the limit' : 'read whole'}); RSS baseline ` +
        `${(baseline / 1048576).toFixed(0)} MiB, peak +${growthMib.toFixed(1)} MiB ` +
        `(${(growthMib / (cut ? limitMib : mib)).toFixed(1)} x the ${cut ? 'limit' : 'value'})\n`,
    );
    return (cut ? code === 3 : code === 0) ? 0 : 1;
  } finally {
    clearInterval(sampler);
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    rmSync(directory, { recursive: true, force: true });
  }
}

process.exitCode = await run();
