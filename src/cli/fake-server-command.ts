/**
 * `ocs-sync fake-server`: the demo's fake export server on its own, to try `check`, `sync`,
 * `status` and `daemon` against. It prints its URL, an admin API key and a private key file.
 */
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { resolve, join } from 'node:path';
import { ExitCode } from '../errors.js';
import { createSampleDataset } from '../fake-server/fixture.js';
import { startFakeServer, type FakeServer } from '../fake-server/server.js';
import type { CommandContext } from './context.js';
import { parseNumberOption } from './option-values.js';

export const DEMO_API_KEY = 'demo-admin-key';

/** The fake server the demo and `fake-server` run: sample data, sealed fields, one admin key. */
export async function startDemoServer(options: {
  rowsPerResource: number;
  port?: number;
  latencyMs?: number;
  faultRate?: number;
}): Promise<{ server: FakeServer; privateKeyPem: string }> {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const server = await startFakeServer({
    dataset: createSampleDataset({ rowsPerResource: options.rowsPerResource }),
    apiKeys: { admin: [DEMO_API_KEY], nonAdmin: [] },
    teamPublicKeyPem: publicKey,
    rateLimit: { limit: 2000, windowSeconds: 300 },
    port: options.port,
    pageLatencyMs: options.latencyMs || undefined,
    randomFaults: options.faultRate
      ? { seed: 1, rate: options.faultRate, kinds: [{ kind: 'status', status: 503 }] }
      : undefined,
  });
  return { server, privateKeyPem: privateKey };
}

export async function runFakeServerCommand(
  context: CommandContext,
  options: { port: string; rows: string; latency: string; faultRate: string; keyDir: string },
): Promise<number> {
  const port = parseNumberOption(options.port, '--port', { min: 0, max: 65535, integer: true });
  const rowsPerResource = parseNumberOption(options.rows, '--rows', {
    min: 1,
    max: 1_000_000,
    integer: true,
  });
  const latencyMs = parseNumberOption(options.latency, '--latency', { min: 0, max: 600_000 });
  const faultRate = parseNumberOption(options.faultRate, '--fault-rate', { min: 0, max: 1 });
  const { server, privateKeyPem } = await startDemoServer({
    rowsPerResource,
    port,
    latencyMs,
    faultRate,
  });
  try {
    const keyFile = join(resolve(options.keyDir), 'ocs-fake-server-private-key.pem');
    writeFileSync(keyFile, privateKeyPem, { mode: 0o600 });
    const out = (line: string) => context.output.out(line);
    out(`Fake export server on ${server.url} (${rowsPerResource} rows per resource).`);
    out('Use it from another shell:');
    out(`  export OCS_BASE_URL=${server.url}`);
    out(`  export OCS_API_KEY=${DEMO_API_KEY}`);
    out(`  export OCS_PRIVATE_KEY_FILE=${keyFile}`);
    out('  ocs-sync check && ocs-sync sync && ocs-sync status');
    out('Stop it with Ctrl-C.');
    await untilStopped(context.environment.signal);
    return ExitCode.ok;
  } finally {
    await server.close();
  }
}

/** Resolves on the environment's abort signal, or SIGINT/SIGTERM in the real process. */
function untilStopped(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((done) => {
    if (signal) {
      if (signal.aborted) done();
      else signal.addEventListener('abort', () => done(), { once: true });
      return;
    }
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      done();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
