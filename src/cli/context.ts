/** What every command gets: the global options, the outside world, and validated configuration. */
import { loadConfig } from '../config/load.js';
import type { LogFormat } from '../config/log-options.js';
import type { Config } from '../config/schema.js';
import { createLogger, type Logger } from '../log.js';
import { LiveArea } from './live-area.js';
import type { Output } from './output.js';

export interface GlobalOptions {
  config?: string;
  warehouse?: string;
  baseUrl?: string;
  logLevel?: string;
  logFormat?: LogFormat;
  pageSize?: string;
  concurrency?: string;
}

/** Everything a command needs from the outside world; tests pass their own. */
export interface CliEnvironment {
  env: NodeJS.ProcessEnv;
  output: Output;
  /** Log destination (default stderr). */
  logStream?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  /** Stops a running sync or daemon (SIGTERM/SIGINT in the real process). */
  signal?: AbortSignal;
  /** Answers a yes/no question on a terminal; undefined when there is no one to ask. */
  confirm?: (question: string) => Promise<boolean>;
}

export class CommandContext {
  private area?: LiveArea;

  constructor(
    readonly globals: GlobalOptions,
    readonly environment: CliEnvironment,
  ) {}

  get output(): Output {
    return this.environment.output;
  }

  /** Validate the configuration once; every problem is reported together. */
  config(needs: { server: boolean }, extraFlags: Record<string, unknown> = {}): Config {
    return loadConfig({
      configPath: this.globals.config,
      env: this.environment.env,
      flags: this.configFlags(extraFlags),
      needs,
    });
  }

  /** The settings given as command-line flags, as the config loader takes them. */
  configFlags(extraFlags: Record<string, unknown> = {}): Record<string, unknown> {
    const flags: Record<string, unknown> = { ...extraFlags };
    if (this.globals.warehouse) flags.warehouse = { url: this.globals.warehouse };
    if (this.globals.baseUrl) flags.baseUrl = this.globals.baseUrl;
    if (this.globals.logLevel) flags.logLevel = this.globals.logLevel;
    if (this.globals.pageSize) flags.pageSize = this.globals.pageSize;
    if (this.globals.concurrency) flags.concurrency = this.globals.concurrency;
    return flags;
  }

  /** The log stream's one live area: progress and log lines share it, never overlapping. */
  liveArea(): LiveArea {
    this.area ??= new LiveArea(this.environment.logStream ?? process.stderr);
    return this.area;
  }

  logger(config: Pick<Config, 'logLevel'>): Logger {
    const area = this.liveArea();
    const format = this.globals.logFormat;
    return createLogger({
      level: config.logLevel,
      pretty: format === undefined ? area.live : format === 'pretty',
      destination: area.live ? area.logStream : area.stream,
    });
  }
}
