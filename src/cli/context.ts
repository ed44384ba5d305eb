/** What every command gets: the global options, the outside world, and validated configuration. */
import { withApiKey, type Fleet, type TeamSetup } from '../config/fleet.js';
import { loadSetup, noTeams, pickTeam, type ConfigNeeds, type Setup } from '../config/load.js';
import type { LogFormat } from '../config/log-options.js';
import type { Config } from '../config/schema.js';
import { ALL_TEAMS } from '../config/teams.js';
import { UsageError } from '../errors.js';
import { createLogger, type Logger } from '../log.js';
import { LiveArea } from './live-area.js';
import type { Output } from './output.js';

export interface GlobalOptions {
  config?: string;
  /** One team of a `teams:` configuration (`all`: every team, where a command allows it). */
  team?: string;
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
  /** The team `config()` chose, when the configuration has a `teams:` list. */
  private chosen?: TeamSetup;
  /** Warnings about reading the configuration's keys, for the command's log. */
  private readonly warnings: string[] = [];
  /** The configuration as last loaded, and what it was loaded for. */
  private loaded?: { key: string; value: { setup: Setup; filePath?: string } };

  constructor(
    readonly globals: GlobalOptions,
    readonly environment: CliEnvironment,
  ) {}

  /** The team of a `teams:` list that `config()` chose, if it chose one. */
  get chosenTeam(): string | undefined {
    return this.chosen?.name;
  }

  get output(): Output {
    return this.environment.output;
  }

  /**
   * The configuration of the one team this command works on: the configuration's only team, or
   * the one `--team` names in a `teams:` list (its API key read when the command talks to the
   * server). Every problem of the configuration is reported together.
   */
  config(needs: { server: boolean }, extraFlags: Record<string, unknown> = {}): Config {
    const { setup, filePath } = this.setup(needs, extraFlags);
    const team = this.globals.team;
    if (setup.kind === 'single') {
      if (team !== undefined) throw noTeams(team);
      return setup.config;
    }
    if (team === ALL_TEAMS) {
      throw new UsageError(
        `--team all works with sync, check, status and daemon; this command works on one team: ${setup.fleet.teams.map((candidate) => candidate.name).join(', ')}.`,
      );
    }
    this.chosen = pickTeam(setup.fleet, team, filePath);
    if (!needs.server) return this.chosen.config;
    // Said once the command has its logger (made from this configuration).
    return withApiKey(this.chosen, this.environment.env, (message) => {
      if (!this.warnings.includes(message)) this.warnings.push(message);
    });
  }

  /**
   * The whole configuration: one team, or a `teams:` list (for commands that run every team).
   * Unless `needs.teams` says which teams run, `--team NAME` does.
   */
  setup(
    needs: ConfigNeeds,
    extraFlags: Record<string, unknown> = {},
  ): { setup: Setup; filePath?: string } {
    const team = this.globals.team;
    if (needs.teams === undefined && team !== undefined && team !== ALL_TEAMS) {
      needs = { ...needs, teams: { names: [team] } };
    }
    const key = JSON.stringify([needs, extraFlags]);
    if (this.loaded?.key !== key) {
      const value = loadSetup({
        configPath: this.globals.config,
        env: this.environment.env,
        flags: this.configFlags(extraFlags),
        needs,
      });
      this.loaded = { key, value };
    }
    return this.loaded.value;
  }

  /** The teams `--team` names in a `teams:` list: one, or every team for `all`. */
  teams(fleet: Fleet, filePath: string | undefined): TeamSetup[] {
    const team = this.globals.team;
    return team === ALL_TEAMS ? fleet.teams : [pickTeam(fleet, team, filePath)];
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

  /** The log; every line carries the team `config()` chose, when it chose one. */
  logger(config: Pick<Config, 'logLevel'>): Logger {
    const area = this.liveArea();
    const format = this.globals.logFormat;
    const logger = createLogger({
      level: config.logLevel,
      pretty: format === undefined ? area.live : format === 'pretty',
      destination: area.live ? area.logStream : area.stream,
    });
    const teamLogger =
      this.chosen === undefined ? logger : logger.child({ team: this.chosen.name });
    for (const warning of this.warnings.splice(0)) teamLogger.warn(warning);
    return teamLogger;
  }
}
