/**
 * What the soak (soak.ts) and the chaos soak (chaos.ts) share: their flags' numbers, the bed they
 * run on (a temporary folder, the fake server in a process of its own, a warehouse, the
 * environment of `ocs-sync`), and the daemon's JSON log followed line by line.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ask, exited, startBenchChild } from './child-process.js';
import type { SoakServerRequest, SoakServerStarted } from './soak-server-process.js';
import { dropPostgresSchema, type WarehouseTarget } from './stages.js';

/** A flag a soak does not know, or a value it refuses: the usage follows. */
export class SoakUsageError extends Error {}

/** The number a flag gives (`fallback` without it); `check` refuses what is not `what`. */
export function numberOption(
  text: string | undefined,
  flag: string,
  fallback: number,
  check: (value: number) => boolean,
  what: string,
  usage: string,
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || !check(value)) {
    throw new SoakUsageError(`${flag} must be ${what}, not ${JSON.stringify(text)}.\n${usage}`);
  }
  return value;
}

export const divisorOf60 = (value: number) =>
  Number.isInteger(value) && value > 0 && 60 % value === 0;

// ---------------------------------------------------------------------------------------------
// The bed.

export interface SoakBedOptions {
  rowsPerResource: number;
  seed: number;
  /** Share of requests the server answers with a fault. */
  faultRate: number;
  /** Seconds between two rounds of changes on the server. */
  changeSeconds: number;
  pageSize: number;
  scheduleSeconds: number;
  /** 0: no full refreshes. */
  fullRefreshMinutes: number;
  /** PostgreSQL instead of a SQLite file (a schema of its own, dropped at the end). */
  postgresUrl?: string;
  /** The daemon keeps the audit chain. */
  audit: boolean;
  /** The team's API budget per 5-minute window (default 2000). */
  rateLimit?: number;
}

/**
 * A temporary folder, the fake server in its own process, a warehouse (a SQLite file in the
 * folder, or a PostgreSQL schema of its own) and the environment that points ocs-sync at them.
 */
export interface SoakBed {
  directory: string;
  /** The warehouse as the stages and `audit verify` take it. */
  warehouse: WarehouseTarget;
  /** Where file contents go. */
  filesDir: string;
  /** ocs-sync's environment: only the soak's own OCS_* settings. */
  env: NodeJS.ProcessEnv;
  serverRequest<T>(message: SoakServerRequest): Promise<T>;
  /** Stops the server, drops the PostgreSQL schema, removes the folder. */
  close(): Promise<void>;
}

export async function openSoakBed(options: SoakBedOptions, name: string): Promise<SoakBed> {
  const directory = mkdtempSync(join(tmpdir(), `ocs-sync-${name}-`));
  const schema = `ocs_${name}_${process.pid}`;
  const warehouse: WarehouseTarget = options.postgresUrl
    ? { url: options.postgresUrl, schema }
    : { url: join(directory, `${name}.db`) };
  const server = startBenchChild('soak-server-process', { serialization: 'advanced' });
  const serverRequest = <T>(message: SoakServerRequest) => ask<T>(server, message);
  const close = async () => {
    await serverRequest({ type: 'close' }).catch(() => undefined);
    await exited(server);
    if (options.postgresUrl) {
      await dropPostgresSchema(options.postgresUrl, schema).catch(() => undefined);
    }
    rmSync(directory, { recursive: true, force: true });
  };
  try {
    const privateKeyFile = join(directory, 'team-private.pem');
    const started = await serverRequest<SoakServerStarted>({
      type: 'start',
      rowsPerResource: options.rowsPerResource,
      seed: options.seed,
      faultRate: options.faultRate,
      changeSeconds: options.changeSeconds,
      privateKeyFile,
      rateLimit: options.rateLimit ?? 2000,
    });
    const configFile = join(directory, 'config.yaml');
    // Quick retries: faults come every few seconds; the schedule is seconds apart.
    writeFileSync(
      configFile,
      'http:\n  min_retry_delay_ms: 100\n  max_retry_delay_seconds: 2\n  request_timeout_seconds: 30\n',
    );
    const filesDir = join(directory, 'files');
    const env: NodeJS.ProcessEnv = {
      // Only the soak's own settings: none of this shell's OCS_* variables.
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('OCS_'))),
      OCS_CONFIG: configFile,
      OCS_BASE_URL: started.url,
      OCS_API_KEY: started.apiKey,
      OCS_PRIVATE_KEY_FILE: privateKeyFile,
      OCS_WAREHOUSE_URL: warehouse.url,
      OCS_WAREHOUSE_SCHEMA: schema,
      OCS_FILES_DIR: filesDir,
      OCS_PAGE_SIZE: String(options.pageSize),
      OCS_SCHEDULE: `*/${options.scheduleSeconds} * * * * *`,
      OCS_FULL_REFRESH_SCHEDULE:
        options.fullRefreshMinutes === 0 ? 'off' : `0 */${options.fullRefreshMinutes} * * * *`,
      OCS_HEALTH_LISTEN: '127.0.0.1:0',
      OCS_LOG_FORMAT: 'json',
      OCS_LOG_LEVEL: 'info',
      ...(options.audit ? { OCS_AUDIT: 'true' } : {}),
    };
    return { directory, warehouse, filesDir, env, serverRequest, close };
  } catch (error) {
    await close();
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// The daemon's log.

/** A line of the daemon's JSON log, the fields the soaks read. */
export interface DaemonLogEntry {
  level?: number;
  msg?: string;
  time?: string;
  kind?: string;
  listen?: string;
  error?: string;
  status?: string;
}

export interface DaemonLog {
  healthUrl: Promise<string>;
  counts: { warn: number; error: number };
  errors: string[];
  /** When each run started (epoch ms, the daemon's own clock). */
  runStarts: number[];
  /** Lines that are not JSON (a line of its own forged by server text would be one). */
  notJson: string[];
  /** Resolves when the stream ended and every line is in the log file. */
  closed: Promise<void>;
}

/**
 * Follows the daemon's JSON log: where it serves /metrics, and its warnings and errors, into
 * `logFile` (appended: one file for every process of a chaos soak). `onEntry` sees each line.
 */
export function followLog(
  stream: NodeJS.ReadableStream,
  logFile: string,
  onEntry?: (entry: DaemonLogEntry) => void,
): DaemonLog {
  const counts = { warn: 0, error: 0 };
  const errors: string[] = [];
  const runStarts: number[] = [];
  const notJson: string[] = [];
  const lines: string[] = [];
  let found: (url: string) => void;
  const healthUrl = new Promise<string>((resolve) => (found = resolve));
  const reader = createInterface({ input: stream });
  reader.on('line', (line) => {
    lines.push(line);
    if (lines.length >= 1000)
      writeFileSync(logFile, `${lines.splice(0).join('\n')}\n`, { flag: 'a' });
    let entry: DaemonLogEntry;
    try {
      entry = JSON.parse(line) as DaemonLogEntry;
    } catch {
      notJson.push(line);
      return;
    }
    if (entry.listen && entry.msg === 'Serving /healthz and /metrics')
      found(`http://${entry.listen}`);
    // "Sync starting", "Full refresh starting" (daemon.ts).
    if (entry.kind && entry.time && entry.msg?.endsWith(' starting')) {
      runStarts.push(Date.parse(entry.time));
    }
    if ((entry.level ?? 0) >= 50) {
      counts.error += 1;
      if (errors.length < 5)
        errors.push(`${entry.msg ?? ''}${entry.error ? `: ${entry.error}` : ''}`);
    } else if (entry.level === 40) {
      counts.warn += 1;
    }
    onEntry?.(entry);
  });
  const closed = new Promise<void>((resolve) =>
    reader.on('close', () => {
      writeFileSync(logFile, lines.length > 0 ? `${lines.join('\n')}\n` : '', { flag: 'a' });
      resolve();
    }),
  );
  return { healthUrl, counts, errors, runStarts, notJson, closed };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Timed out waiting for ${what}.`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
