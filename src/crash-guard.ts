/**
 * The last line of defence: an exception nothing caught, or a promise rejection nothing handled,
 * anywhere in the process (a sync, the daemon, `serve`, any command). The process records the run
 * in progress as failed and releases the writer lock (the cleanups registered with `onCrash`,
 * newest first), then ends with one line on stderr, saying what failed and that committed pages
 * are kept, and exit code 1: never a raw stack, never a run left `running`.
 *
 * A cleanup that cannot finish within CLEANUP_MS (the warehouse may be what broke) is given up:
 * the lock dies with the process anyway, and the next start that takes it closes the run as
 * `interrupted`, as it does after a kill -9.
 */
import { describeError } from './errors.js';
import { printable } from './printable.js';

/** What a crash must still do; `reason` is the line that says what failed. A note for the line. */
export type CrashCleanup = (reason: string) => Promise<string | void>;

const CLEANUP_MS = 5_000;

const cleanups: CrashCleanup[] = [];

/** Registers what to do should the process crash while it applies; returns its removal. */
export function onCrash(cleanup: CrashCleanup): () => void {
  cleanups.push(cleanup);
  return () => {
    const at = cleanups.lastIndexOf(cleanup);
    if (at >= 0) cleanups.splice(at, 1);
  };
}

export interface CrashGuardOptions {
  /** Writes the one line (stderr). */
  write(line: string): void;
  exit(code: number): void;
  cleanupMs?: number;
}

/** Installs the handlers on the process; for the real process only (`main` does it). */
export function installCrashGuard(options: CrashGuardOptions): void {
  let crashing = false;
  const crash = (kind: string) => (error: unknown) => {
    // A second failure while the first is handled changes nothing: the first one is told.
    if (crashing) return;
    crashing = true;
    const what = describeFailure(error);
    void runCleanups(`Stopped by an unexpected error (${kind}): ${what}`, options).then((notes) => {
      const done = notes.length > 0 ? ` ${notes.join('; ')}.` : '';
      options.write(
        `ocs-sync: stopped by an unexpected error (${kind}): ${what}.${done} Every committed page is kept; the next run resumes from there.`,
      );
      options.exit(1);
    });
  };
  process.on('uncaughtException', crash('an uncaught exception'));
  process.on('unhandledRejection', crash('an unhandled promise rejection'));
}

/** The registered cleanups, newest first, each on its own; notes of those that finished. */
async function runCleanups(reason: string, options: CrashGuardOptions): Promise<string[]> {
  const notes: string[] = [];
  const all = (async () => {
    for (const cleanup of [...cleanups].reverse()) {
      try {
        const note = await cleanup(reason);
        if (note) notes.push(note);
      } catch (error) {
        notes.push(`could not clean up (${describeFailure(error)})`);
      }
    }
    return true;
  })();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), options.cleanupMs ?? CLEANUP_MS);
  });
  const finished = await Promise.race([all, late]);
  clearTimeout(timer);
  if (!finished) {
    notes.push('the run could not be recorded in time: the next start closes it as interrupted');
  }
  return notes;
}

/** One line, safe to show: the error's class and message (no stack), its first line only. */
function describeFailure(error: unknown): string {
  const text = describeError(error)
    .split('\n')[0]!
    .replace(/[.\s]+$/, '');
  const name = error instanceof Error ? error.name : '';
  const named = name && name !== 'Error' && !text.startsWith(name) ? `${name}: ${text}` : text;
  return printable(named || 'no message');
}
