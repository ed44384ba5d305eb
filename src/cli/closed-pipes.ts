/**
 * When whoever reads ocs-sync's stdout or stderr goes away (`ocs-sync schema --format json |
 * head -c 1`), the next write there fails with EPIPE, which Node reports as an 'error' event on
 * the stream: with nothing listening, a crash and a stack. The real process listens instead.
 * What would still be written there is dropped, the command finishes as it would have (a sync
 * still records its run and releases its lock: its output is only its last line), and the process
 * exits 141, 128 + SIGPIPE: what a shell reports for `cat` or `git log` ended by a closed pipe, so
 * `set -o pipefail` scripts see it the usual way. A command that failed on its own account keeps
 * its own exit code, which says more.
 */
import { ExitCode } from '../errors.js';
import type { Output } from './output.js';

/** The streams of the real process this watches; tests give their own. */
export interface ProcessStreams {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export interface ClosedPipes {
  /** `output`, dropping lines once their stream has failed. */
  guard(output: Output): Output;
  /** The exit code to end with: `code`, or 141 when a pipe closed and `code` says success. */
  exitCode(code: number): number;
}

/**
 * Listens for write errors on stdout and stderr (EPIPE, or any other: either way nobody reads
 * what comes next). An error after the command has ended (the last write failing once `main`
 * returned) sets the exit code itself.
 */
export function watchClosedPipes(
  streams: ProcessStreams,
  target: { exitCode?: number | string | null },
): ClosedPipes {
  const closed = { stdout: false, stderr: false };
  for (const name of ['stdout', 'stderr'] as const) {
    streams[name].on('error', () => {
      closed[name] = true;
      if (!target.exitCode) target.exitCode = ExitCode.closedPipe;
    });
  }
  const anyClosed = () => closed.stdout || closed.stderr;
  return {
    guard: (output) => ({
      out: (line) => {
        if (!closed.stdout) output.out(line);
      },
      err: (line) => {
        if (!closed.stderr) output.err(line);
      },
    }),
    exitCode: (code) => (code === 0 && anyClosed() ? ExitCode.closedPipe : code),
  };
}
