/**
 * The command line. One top-level handler turns every error into a message and an exit code
 * (0 ok, 3 partial, 1 could not run, 2 usage), as the README documents.
 */
import { Command, CommanderError, Option } from 'commander';
import { ExitCode, UsageError, describeError, exitCodeOf } from '../errors.js';
import { loadConfig } from '../config/load.js';
import { LOG_LEVELS, type Config } from '../config/schema.js';
import { createLogger, type Logger } from '../log.js';
import { runDemoCommand } from './demo-command.js';
import { runKeygenCommand, runUnsealCommand } from './keys-commands.js';
import { processOutput, type Output } from './output.js';
import { runStatusCommand } from './status-command.js';
import { runSyncCommand } from './sync-command.js';
import { runDaemonCommand } from './daemon-command.js';
import { runFilesVerifyCommand } from './files-command.js';
import { packageVersion } from './version.js';

export interface GlobalOptions {
  config?: string;
  warehouse?: string;
  baseUrl?: string;
  logLevel?: string;
  pageSize?: string;
}

/** Everything a command needs from the outside world; tests pass their own. */
export interface CliEnvironment {
  env: NodeJS.ProcessEnv;
  output: Output;
  /** Log destination (default stderr). */
  logStream?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Stops a running sync or daemon (SIGTERM/SIGINT in the real process). */
  signal?: AbortSignal;
}

export class CommandContext {
  constructor(
    readonly globals: GlobalOptions,
    readonly environment: CliEnvironment,
  ) {}

  get output(): Output {
    return this.environment.output;
  }

  /** Validate the configuration once; every problem is reported together. */
  config(needs: { server: boolean }, extraFlags: Record<string, unknown> = {}): Config {
    const flags: Record<string, unknown> = { ...extraFlags };
    if (this.globals.warehouse) flags.warehouse = { url: this.globals.warehouse };
    if (this.globals.baseUrl) flags.baseUrl = this.globals.baseUrl;
    if (this.globals.logLevel) flags.logLevel = this.globals.logLevel;
    if (this.globals.pageSize) flags.pageSize = this.globals.pageSize;
    return loadConfig({
      configPath: this.globals.config,
      env: this.environment.env,
      flags,
      needs,
    });
  }

  logger(config: Pick<Config, 'logLevel'>): Logger {
    return createLogger({ level: config.logLevel, destination: this.environment.logStream });
  }
}

export function buildProgram(
  environment: CliEnvironment,
  setExitCode: (code: number) => void,
): Command {
  const program = new Command('ocs-sync');
  const { output } = environment;
  program
    .description("Keep a local warehouse in step with one team's Open Chat Studio export.")
    .version(packageVersion(), '-V, --version')
    .option('-c, --config <file>', 'YAML config file (environment and flags override it)')
    .option('-w, --warehouse <url>', 'warehouse: a file path, sqlite:PATH, or postgres://…')
    .option('--base-url <url>', 'server base URL (OCS_BASE_URL)')
    .option('--page-size <rows>', 'rows per page, 1..1000 (OCS_PAGE_SIZE)')
    .addOption(new Option('--log-level <level>', 'log level (OCS_LOG_LEVEL)').choices(LOG_LEVELS))
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({
      writeOut: (text) => output.out(text.replace(/\n$/, '')),
      writeErr: (text) => output.err(text.replace(/\n$/, '')),
    });

  const context = (command: Command) =>
    new CommandContext(command.optsWithGlobals<GlobalOptions>(), environment);

  program
    .command('sync')
    .description('Run one sync pass, then exit.')
    .option(
      '--full-refresh [resources...]',
      'walk from the start (all, or these) and mark deleted rows',
    )
    .option('--accept-schema-change', 'apply a schema change that on_schema_change=stop held back')
    .option('--resources <names>', 'only these resources (comma-separated)')
    .option('--json', 'print the run report as JSON')
    .action(async (options, command: Command) => {
      setExitCode(await runSyncCommand(context(command), options));
    });

  program
    .command('status')
    .description('Show, per resource, rows, cursor, lag, last run and last error.')
    .option('--json', 'print as JSON')
    .action(async (options, command: Command) => {
      setExitCode(await runStatusCommand(context(command), options));
    });

  program
    .command('schema')
    .description('Show the tables, their columns and types, and the relationships between them.')
    .option('--format <format>', 'text, json, or mermaid (an ER diagram)', 'text')
    .option('--resources <names>', 'only these tables (comma-separated)')
    .action(async (options, command: Command) => {
      const { runSchemaCommand } = await import('./schema-command.js');
      setExitCode(await runSchemaCommand(context(command), options));
    });

  program
    .command('export')
    .description('Export the warehouse to files for other tools.')
    .command('parquet <dir>')
    .description('Write one Parquet file per table into DIR (created when missing).')
    .option('--resources <names>', 'only these tables (comma-separated)')
    .option('--live', 'leave out the rows marked deleted')
    .action(async (directory: string, options, command: Command) => {
      const { runExportParquetCommand } = await import('./export-parquet-command.js');
      setExitCode(await runExportParquetCommand(context(command), directory, options));
    });

  program
    .command('demo')
    .description(
      'Start a built-in fake export server, sync it into ./ocs-demo.db, and show the status.',
    )
    .option('--db <path>', 'SQLite file to write', './ocs-demo.db')
    .option('--rows <count>', 'rows per resource in the fake server', '200')
    .action(async (options, command: Command) => {
      setExitCode(await runDemoCommand(context(command), options));
    });

  program
    .command('daemon')
    .description('Sync at start, then on the schedule; serve /healthz and /metrics.')
    .action(async (_options, command: Command) => {
      setExitCode(await runDaemonCommand(context(command)));
    });

  program
    .command('files')
    .description('File contents kept in the blob store (files.dir).')
    .command('verify')
    .description('Re-hash every stored file; exit 3 when any is missing or corrupt.')
    .option('--refetch', 'mark missing or corrupt files so the next sync downloads them again')
    .option('--json', 'print the report as JSON')
    .action(async (options, command: Command) => {
      setExitCode(await runFilesVerifyCommand(context(command), options));
    });

  program
    .command('keygen')
    .description("Create the team's RSA key pair (or, with --archive, an X25519 archive key pair).")
    .option('--out <dir>', 'directory for the key files', '.')
    .option('--bits <bits>', 'RSA key size', '3072')
    .option('--archive', 'create the archive key pair used by the reseal policy')
    .action(async (options, command: Command) => {
      setExitCode(await runKeygenCommand(context(command), options));
    });

  program
    .command('unseal')
    .description('Decrypt values stored by the reseal policy, to stdout or in place.')
    .requiredOption('--archive-key <file>', 'the archive secret key file (from keygen --archive)')
    .option('--resource <names...>', 'only these resources')
    .option('--in-place', 'write the opened values back into the warehouse')
    .action(async (options, command: Command) => {
      setExitCode(await runUnsealCommand(context(command), options));
    });

  return program;
}

/** Run the CLI; resolves to the exit code. Never throws. */
export async function main(argv: string[], environment?: Partial<CliEnvironment>): Promise<number> {
  const env: CliEnvironment = {
    env: environment?.env ?? process.env,
    output: environment?.output ?? processOutput,
    logStream: environment?.logStream,
    signal: environment?.signal,
  };
  let exitCode: number = ExitCode.ok;
  const program = buildProgram(env, (code) => (exitCode = code));
  try {
    if (argv.length === 0) {
      program.outputHelp();
      return ExitCode.usage;
    }
    await program.parseAsync(argv, { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      const helpOrVersion = ['commander.helpDisplayed', 'commander.help', 'commander.version'];
      return helpOrVersion.includes(error.code) ? ExitCode.ok : ExitCode.usage;
    }
    env.output.err(`ocs-sync: ${describeError(error)}`);
    return error instanceof UsageError ? ExitCode.usage : exitCodeOf(error);
  }
}
