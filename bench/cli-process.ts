/**
 * Child process of the benchmark: one `ocs-sync` command line run in a fresh process (so its peak
 * RSS is its own), through the CLI's `main` as the bin runs it. Run by teams.ts, never by hand.
 */
import { Writable } from 'node:stream';
import { main } from '../src/cli/main.js';
import { serveParent } from './child-process.js';

export interface CliRequest {
  argv: string[];
  env: Record<string, string>;
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** Wall time of the command, from main() called to main() returned. */
  seconds: number;
  /** The process's peak resident set, MB (1 MB = 2^20 bytes). */
  peakRssMb: number;
}

serveParent<CliRequest>(async (request) => {
  let stdout = '';
  let stderr = '';
  const started = performance.now();
  const code = await main(request.argv, {
    env: request.env,
    output: { out: (line) => (stdout += `${line}\n`), err: (line) => (stderr += `${line}\n`) },
    logStream: new Writable({ write: (_chunk, _encoding, done) => done() }),
  });
  const seconds = (performance.now() - started) / 1000;
  // resourceUsage().maxRSS is in kilobytes.
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  return { code, stdout, stderr, seconds, peakRssMb } satisfies CliResult;
});
