import { createRequire } from 'node:module';
import type { Logger, LevelWithSilent } from 'pino';
import type Pino from 'pino';
import type PinoPretty from 'pino-pretty';
import { STORED_TEXT_LENGTH, printable } from './printable.js';

export type { Logger };

/**
 * Paths that could carry a secret if someone ever logs a whole object. We never log headers or
 * keys on purpose; this is the second line of defence.
 */
const REDACTED_PATHS = [
  'apiKey',
  'api_key',
  'privateKey',
  'private_key',
  'passphrase',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.apiKey',
  '*.api_key',
  '*.privateKey',
  '*.private_key',
];

export interface LoggerOptions {
  level: LevelWithSilent;
  /** Human-readable lines instead of JSON (default: when the stream is a terminal). */
  pretty?: boolean;
  /** Where lines go; default stderr, so stdout stays free for command output. */
  destination?: NodeJS.WritableStream & { isTTY?: boolean };
}

/** pino is loaded on first use: commands that log nothing (status, runs, --help) start without it. */
function loadPino(): typeof Pino {
  return createRequire(import.meta.url)('pino') as typeof Pino;
}

export function createLogger(options: LoggerOptions): Logger {
  const pino = loadPino();
  const destination = options.destination ?? process.stderr;
  const usePretty = options.pretty ?? destination.isTTY === true;
  const base = {
    level: options.level,
    base: undefined,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (usePretty) {
    // Loaded only when used: machines read JSON lines and need none of it.
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
    return pino(
      // Lines for a terminal: what a message or a field quotes from the server is escaped and
      // cut (printable). JSON lines need nothing more than JSON's own escaping.
      { ...base, formatters: { log: (object) => printableValue(object, 0) as typeof object } },
      pretty({
        messageFormat: (log, messageKey) =>
          printable(String(log[messageKey] ?? ''), { max: STORED_TEXT_LENGTH }),
        destination,
        sync: true,
        colorize: destination.isTTY === true,
        ignore: 'pid,hostname',
        // An `error` field stays on its event's line like any other (by default pino-pretty
        // gives it lines of its own, where the server's text it quotes would start a line).
        errorLikeObjectKeys: ['err'],
        // One line per event, so the live progress line below stays in place.
        singleLine: true,
        translateTime: 'SYS:HH:MM:ss',
      }),
    );
  }
  if (destination === process.stderr || destination === process.stdout) {
    const fd = destination === process.stderr ? 2 : 1;
    const direct = pino.destination({ dest: fd, sync: true });
    // Written to the fd directly, past the stream: a write error there (a reader that went away,
    // EPIPE, which pino itself then drops quietly) is told to the stream's own listeners, as a
    // write through the stream would be (the CLI's closed-pipes.ts).
    direct.on('error', (error: Error) => {
      if (destination.listenerCount('error') > 0) destination.emit('error', error);
    });
    return pino(base, direct);
  }
  return pino(base, destination);
}

/** Strings escaped and cut at every level of a log line's fields (a few levels deep). */
function printableValue(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return printable(value, { max: STORED_TEXT_LENGTH });
  if (depth > 4 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((item) => printableValue(item, depth + 1));
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [
      printable(key, { max: 80 }),
      printableValue(item, depth + 1),
    ]),
  );
}

/** A logger that drops everything (tests and library use). */
export function silentLogger(): Logger {
  return loadPino()({ level: 'silent' });
}
