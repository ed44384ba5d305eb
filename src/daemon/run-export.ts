/**
 * Where a run's metrics go when its process may end before any Prometheus scrapes it (a CronJob's
 * `sync`), and, when asked, after each run of the daemon too: a Prometheus Pushgateway
 * (`metrics.push_url`), whose group `job="ocs-sync"` (plus `team`) each push replaces whole (PUT),
 * and a file for node_exporter's textfile collector (`metrics.textfile`), written beside itself
 * and renamed over the last one, so node_exporter never reads half of one. What is sent is the
 * team's `runRegistry` (metrics.ts): gauges only, the last success read from the warehouse among
 * them, so a group replaced by a failed run still says when the team last synced.
 *
 * Exporting never fails a run and never holds its process for long: each way has `timeoutMs`,
 * both go at once, and a failure is one warning naming where and why.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { rename, unlink } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { Registry } from 'prom-client';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { printable } from '../printable.js';
import { openPrivateFile, type PrivateModes } from '../private-files.js';

/** The `job` of every push (the grouping key's first label). */
export const PUSH_JOB = 'ocs-sync';

/** A run's metrics, sent where the settings say. The real one is `createRunExporter`'s. */
export interface RunExporter {
  /** Sends the registry's metrics. Never throws: a failure is logged as one warning. */
  export(registry: Registry): Promise<void>;
}

export interface RunExportSettings {
  /** The Pushgateway's URL (`http://host:9091`), or undefined for none. */
  pushUrl: string | undefined;
  /** The textfile collector's file (`…/ocs-sync.prom`), or undefined for none. */
  textfile: string | undefined;
  /** The `team` of the push's grouping key; undefined: the group is `job="ocs-sync"` alone. */
  team: string | undefined;
  /** How long a push, or writing the file, may take. */
  timeoutMs: number;
  /** The textfile's mode (`data_file_mode`). */
  fileModes: PrivateModes;
  logger: Logger;
}

/** The exporter of the settings, or undefined when they name neither a Pushgateway nor a file. */
export function createRunExporter(settings: RunExportSettings): RunExporter | undefined {
  const { pushUrl, textfile, team, timeoutMs, fileModes, logger } = settings;
  if (pushUrl === undefined && textfile === undefined) return undefined;
  return {
    export: async (registry) => {
      await Promise.all([
        pushUrl === undefined
          ? undefined
          : within(timeoutMs, (signal) => pushRun(registry, pushUrl, team, signal)).catch(
              (error: unknown) =>
                logger.warn(
                  { pushgateway: withoutCredentials(pushUrl), error: shortError(error) },
                  `Could not push the run's metrics to the Pushgateway at ${withoutCredentials(pushUrl)}: ${shortError(error)}; the run is not affected, and the next one pushes again`,
                ),
            ),
        textfile === undefined
          ? undefined
          : within(timeoutMs, async () =>
              writeTextfile(textfile, await registry.metrics(), fileModes),
            ).catch((error: unknown) =>
              logger.warn(
                { textfile, error: shortError(error) },
                `Could not write the run's metrics to ${textfile}: ${shortError(error)}; the run is not affected`,
              ),
            ),
      ]);
    },
  };
}

/** PUT the registry as the group `job="ocs-sync"` (and `team`), replacing what it held. */
async function pushRun(
  registry: Registry,
  pushUrl: string,
  team: string | undefined,
  signal: AbortSignal,
): Promise<void> {
  // Loaded for a push only: a sync that sends no metrics never loads prom-client (issue 47).
  const { Pushgateway } = await import('prom-client');
  // agent: false, so no kept-alive socket outlives the push; the signal bounds the whole request.
  const gateway = new Pushgateway(pushUrl, { timeout: 0, agent: false, signal }, registry);
  await gateway.push({ jobName: PUSH_JOB, ...(team === undefined ? {} : { groupings: { team } }) });
}

/**
 * Writes the whole text beside `path` (a name node_exporter does not read: it reads `*.prom`),
 * then renames it over `path`: a reader sees the last file or this one, never part of one.
 */
export async function writeTextfile(
  path: string,
  text: string,
  modes: PrivateModes,
): Promise<void> {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  await unlink(temporary).catch(() => undefined);
  const handle = await openPrivateFile(temporary, modes);
  try {
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, path);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
}

/**
 * Whether the Pushgateway answers its readiness probe (`GET /-/ready`), for `check`: undefined
 * when it does, else why not. Sends nothing to it.
 */
export async function pushgatewayProblem(
  pushUrl: string,
  timeoutMs: number,
): Promise<string | undefined> {
  const url = new URL(pushUrl);
  const headers: Record<string, string> = {};
  if (url.username !== '' || url.password !== '') {
    const user = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    headers.authorization = `Basic ${Buffer.from(user).toString('base64')}`;
  }
  try {
    const response = await within(timeoutMs, (signal) =>
      fetch(`${withoutCredentials(pushUrl)}/-/ready`, { headers, signal }),
    );
    await response.body?.cancel();
    return response.ok ? undefined : `it answers HTTP ${response.status} to GET /-/ready`;
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return `it cannot be reached: ${shortError(cause?.code ?? cause?.message ?? error)}`;
  }
}

/** Why the textfile cannot be written (its folder missing or not writable), for `check`. */
export function textfileProblem(path: string): string | undefined {
  const folder = dirname(resolve(path));
  if (!existsSync(folder)) return `its folder ${folder} does not exist`;
  if (!statSync(folder).isDirectory()) return `${folder} is not a folder`;
  try {
    accessSync(folder, constants.W_OK | constants.X_OK);
    return undefined;
  } catch {
    return `this user may not write to ${folder}`;
  }
}

/** `work`, given a signal that aborts after `ms`; rejects then, whatever `work` does. */
async function within<T>(ms: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error(`no answer within ${ms / 1000} s`);
      controller.abort(error);
      reject(error);
    }, ms);
  });
  try {
    return await Promise.race([work(controller.signal), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The URL without a user or password, for messages. */
export function withoutCredentials(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return '(an invalid URL)';
  }
}

/** An error's text, safe to show and short (a Pushgateway's refusal can carry a long body). */
function shortError(error: unknown): string {
  return printable(describeError(error).replace(/\s+/g, ' ').trim(), { max: 300 });
}
