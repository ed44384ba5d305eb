/**
 * The command line. One top-level handler turns every error into a message and an exit code
 * (0 ok, 3 partial, 1 could not run, 2 usage; `status` has its own, see status-command.ts), as
 * the README documents. Each command's module is imported only when that command runs, so
 * `--help` and the read-only commands start without the drivers, the sync engine or the metrics.
 */
import { Command, CommanderError, Option } from 'commander';
import { ExitCode, UsageError, describeError, exitCodeOf } from '../errors.js';
import { LOG_FORMATS, LOG_LEVELS } from '../config/log-options.js';
import type { CliEnvironment, CommandContext, GlobalOptions } from './context.js';
import { processOutput, terminalSafe } from './output.js';
import { watchClosedPipes } from './closed-pipes.js';
import { packageVersion } from '../package-info.js';
import { installCrashGuard } from '../crash-guard.js';

export type { CliEnvironment, CommandContext, GlobalOptions } from './context.js';

type Handler<Options> = (
  context: CommandContext,
  options: Options,
  operands: string[],
) => Promise<number>;

export function buildProgram(
  environment: CliEnvironment,
  setExitCode: (code: number) => void,
): Command {
  const program = new Command('ocs-sync');
  const { output } = environment;
  program
    .description("Keep a local warehouse in step with one or many teams' Open Chat Studio export.")
    .version(packageVersion(), '-V, --version')
    .option('-c, --config <file>', 'YAML config file (environment and flags override it)')
    .option(
      '-t, --team <name>',
      'with a teams: config, the team to work on (all: every team, for sync, check and status)',
    )
    .option('-w, --warehouse <url>', 'warehouse: a file path, sqlite:PATH, or postgres://…')
    .option('--base-url <url>', 'server base URL (OCS_BASE_URL)')
    .option('--page-size <rows>', 'rows per page, 1..1000 (OCS_PAGE_SIZE)')
    .option('--concurrency <resources>', 'resources walked at once, 1..8 (OCS_CONCURRENCY)')
    .addOption(new Option('--log-level <level>', 'log level (OCS_LOG_LEVEL)').choices(LOG_LEVELS))
    .addOption(
      new Option(
        '--log-format <format>',
        'log lines as JSON or for people (default: pretty on a terminal, JSON otherwise)',
      ).choices(LOG_FORMATS),
    )
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({
      writeOut: (text) => output.out(text.replace(/\n$/, '')),
      writeErr: (text) => output.err(text.replace(/\n$/, '')),
    });

  /** The action of a command whose handler lives in a module loaded on first use. */
  const lazy =
    <Options>(load: () => Promise<Handler<Options>>) =>
    async (...args: unknown[]) => {
      const command = args[args.length - 1] as Command;
      const options = args[args.length - 2] as Options;
      const operands = args.slice(0, -2).flat() as string[];
      const [{ CommandContext: Context }, handler] = await Promise.all([
        import('./context.js'),
        load(),
      ]);
      const context = new Context(command.optsWithGlobals<GlobalOptions>(), environment);
      try {
        // A parent's option may have been given after the subcommand (`runs show 3 --json`).
        const merged = { ...command.optsWithGlobals(), ...options } as Options;
        setExitCode(await handler(context, merged, operands));
      } finally {
        // A run that stopped half-way must not leave its progress line behind.
        context.liveArea().clear();
      }
    };

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
    .action(lazy(async () => (await import('./sync-command.js')).runSyncCommand));

  program
    .command('status')
    .description(
      'Show the last run, the last success and, per resource, rows, lag and errors. ' +
        'Exit 0 healthy, 4 last run failed, 5 a resource has an error, 6 lag over --max-lag.',
    )
    .option('--json', 'print one JSON object: last_run, last_success, resources')
    .option('--wide', 'more columns: cursor (decoded), last full refresh, full errors')
    .option('--max-lag <duration>', 'exit 6 when a resource lags more than this (e.g. 90m, 2h, 1d)')
    .action(lazy(async () => (await import('./status-command.js')).runStatusCommand));

  program
    .command('check')
    .description(
      'Check a setup before syncing: server, API key, keys, warehouse, lock. Writes nothing.',
    )
    .option('--json', 'print the checks as JSON')
    .action(lazy(async () => (await import('./check-command.js')).runCheckCommand));

  const runs = program
    .command('runs')
    .description('List past runs, newest first.')
    .option('--limit <count>', 'how many runs', '20')
    .option('--json', 'print as JSON')
    .action(lazy(async () => (await import('./runs-command.js')).runRunsCommand));
  runs
    .command('show')
    .description('One run and its resources: status, rows, pages, duration, error.')
    .argument('<id>', 'run id (from `ocs-sync runs`)')
    .option('--json', 'print as JSON')
    .action(lazy(async () => (await import('./runs-command.js')).runRunsShowCommand));

  program
    .command('reset')
    .description(
      'Forget the cursor of resources, so the next sync walks them from the start. Recorded as a run.',
    )
    .argument('<resources...>', 'resource names (as `ocs-sync status` lists them)')
    .option('--drop-table', "also drop the resource's table (and its history table)")
    .option('-y, --yes', 'do not ask (needed when not on a terminal)')
    .action(lazy(async () => (await import('./reset-command.js')).runResetCommand));

  program
    .command('config')
    .description(
      'Show the effective configuration: every key, its value and where it came from. Secrets show as set/not set.',
    )
    .option('--json', 'print as JSON')
    .action(lazy(async () => (await import('./config-command.js')).runConfigCommand));

  program
    .command('schema')
    .description('Show the tables, their columns and types, and the relationships between them.')
    .option('--format <format>', 'text, json, or mermaid (an ER diagram)', 'text')
    .option('--resources <names>', 'only these tables (comma-separated)')
    .action(lazy(async () => (await import('./schema-command.js')).runSchemaCommand));

  program
    .command('export')
    .description('Export the warehouse to files for other tools.')
    .command('parquet <dir>')
    .description('Write one Parquet file per table into DIR (created when missing).')
    .option('--resources <names>', 'only these tables (comma-separated)')
    .option('--live', 'leave out the rows marked deleted')
    .action(
      lazy(async () => {
        const { runExportParquetCommand } = await import('./export-parquet-command.js');
        return (context, options: { resources?: string; live?: boolean }, [directory]) =>
          runExportParquetCommand(context, directory!, options);
      }),
    );

  program
    .command('demo')
    .description(
      'Start a built-in fake export server, sync it into ./ocs-demo.db, and print a short summary.',
    )
    .option('--db <path>', 'SQLite file to write', './ocs-demo.db')
    .option('--rows <count>', 'rows per resource in the fake server', '200')
    .action(lazy(async () => (await import('./demo-command.js')).runDemoCommand));

  program
    .command('fake-server')
    .description(
      "Run the demo's fake export server alone (to try check, sync, status, daemon); Ctrl-C stops it.",
    )
    .option('--port <port>', 'port to listen on (0: any free port)', '8765')
    .option('--rows <count>', 'rows per resource', '200')
    .option('--latency <ms>', 'delay before each answer, in milliseconds', '0')
    .option('--fault-rate <p>', 'share of requests answered with a 503, from 0 to 1', '0')
    .option('--key-dir <dir>', 'where to write the private key file', '.')
    .action(lazy(async () => (await import('./fake-server-command.js')).runFakeServerCommand));

  program
    .command('daemon')
    .description(
      'Sync at start, then on the schedule; serve /healthz, /livez and /metrics. With a teams: config, every team (or those of --teams or --shard).',
    )
    .option('--teams <names>', 'with a teams: config, only these teams (comma-separated)')
    .option(
      '--shard <i/n>',
      "with a teams: config, only the teams of shard i of n (0 to n-1; a team's shard depends on its name and n only)",
    )
    .action(lazy(async () => (await import('./daemon-command.js')).runDaemonCommand));

  program
    .command('files')
    .description('File contents kept in the blob store (files.dir).')
    .command('verify')
    .description('Re-hash every stored file; exit 3 when any is missing or corrupt.')
    .option('--refetch', 'mark missing or corrupt files so the next sync downloads them again')
    .option('--json', 'print the report as JSON')
    .action(lazy(async () => (await import('./files-command.js')).runFilesVerifyCommand));

  const snapshot = program
    .command('snapshot')
    .description(
      'Snapshots of a SQLite warehouse in snapshot.dir (a folder or s3://…); PostgreSQL: pg_dump.',
    );
  snapshot
    .command('create')
    .description(
      'Copy the warehouse (online backup, while a sync may write), gzip it, store it with its SHA-256.',
    )
    .option('--json', 'print the snapshot as JSON')
    .action(lazy(async () => (await import('./snapshot-command.js')).runSnapshotCreateCommand));
  snapshot
    .command('list')
    .description('The complete snapshots, oldest first.')
    .option('--json', 'print [{id, time, bytes, sha256, location}]')
    .action(lazy(async () => (await import('./snapshot-command.js')).runSnapshotListCommand));
  snapshot
    .command('restore')
    .argument('<id>', 'the snapshot (ocs-sync snapshot list)')
    .description(
      "Check a snapshot's SHA-256 and write it as a warehouse file, atomically; refused for a warehouse a process holds.",
    )
    .requiredOption('--to <file>', 'the warehouse file to write')
    .action(lazy(async () => (await import('./snapshot-command.js')).runSnapshotRestoreCommand));

  program
    .command('keygen')
    .description(
      "Create the team's RSA key pair (or, with --archive, an X25519 archive key pair; with --signing, the Ed25519 key pair that signs audit checkpoints).",
    )
    .option('--out <dir>', 'directory for the key files', '.')
    .option('--bits <bits>', 'RSA key size', '3072')
    .option('--archive', 'create the archive key pair used by the reseal policy')
    .option('--signing', 'create the Ed25519 key pair that signs audit checkpoints')
    .action(lazy(async () => (await import('./keys-commands.js')).runKeygenCommand));

  const audit = program
    .command('audit')
    .description('The audit chain: check that the warehouse holds exactly what it was given.');
  audit
    .command('verify')
    .description(
      'Recompute every digest, walk the chain, check every signed checkpoint. Exit 0 intact, 3 broken (naming the first broken link), 1 cannot verify.',
    )
    .option(
      '--public-key <file>',
      'the public key checkpoints must be signed by (ocs-audit-signing.pub)',
    )
    .option(
      '--checkpoints <file>',
      'the checkpoint file kept off this machine (audit.checkpoint_file)',
    )
    .option('--json', 'print the report as JSON')
    .action(lazy(async () => (await import('./audit-command.js')).runAuditVerifyCommand));
  audit
    .command('checkpoints')
    .description('List the signed checkpoints stored in the warehouse.')
    .option('--json', 'print as JSON')
    .action(lazy(async () => (await import('./audit-command.js')).runAuditCheckpointsCommand));

  program
    .command('unseal')
    .description('Decrypt values stored by the reseal policy, to stdout or in place.')
    .requiredOption('--archive-key <file>', 'the archive secret key file (from keygen --archive)')
    .option('--resource <names...>', 'only these resources')
    .option('--in-place', 'write the opened values back into the warehouse')
    .action(lazy(async () => (await import('./keys-commands.js')).runUnsealCommand));

  program
    .command('serve')
    .description("Serve the warehouse as the server's export API, for its importer (restore).")
    .option('--listen <host:port>', 'where to listen (default 127.0.0.1:8765, loopback only)')
    .option('--public-key <pem>', 'the restore public key sealed fields are sealed to')
    .option('--archive-key <file>', 'archive secret key, for values stored by the reseal policy')
    .option('--api-key-file <file>', 'file holding the API key to require (or OCS_SERVE_API_KEY)')
    .option('--as-of <timestamp>', 'serve every resource as it stood then (needs history)')
    .option('--allow-incomplete', 'serve resources the warehouse cannot give back as empty')
    .option('--files-dir <dir>', 'the blob store to serve file contents from (files.dir)')
    .action(lazy(async () => (await import('./serve-command.js')).runServeCommand));

  return program;
}

/** Run the CLI; resolves to the exit code. Never throws. */
export async function main(argv: string[], environment?: Partial<CliEnvironment>): Promise<number> {
  // Only the real process has stdout and stderr a reader can close (closed-pipes.ts).
  const pipes = environment === undefined ? watchClosedPipes(process, process) : undefined;
  const exit = (code: number) => pipes?.exitCode(code) ?? code;
  const output = environment?.output ?? processOutput;
  const env: CliEnvironment = {
    env: environment?.env ?? process.env,
    output: terminalSafe(pipes ? pipes.guard(output) : output),
    logStream: environment?.logStream,
    signal: environment?.signal,
    // Only the real process may ask a person; tests and embedders pass their own (or none).
    confirm: environment === undefined ? terminalConfirm() : environment.confirm,
  };
  // The real process (not a test or an embedder calling main) ends cleanly on any crash.
  if (environment === undefined) {
    installCrashGuard({
      write: (line) => env.output.err(line),
      exit: (code) => process.exit(code),
    });
  }
  let exitCode: number = ExitCode.ok;
  const program = buildProgram(env, (code) => (exitCode = code));
  try {
    if (argv.length === 0) {
      program.outputHelp();
      return exit(ExitCode.usage);
    }
    await program.parseAsync(argv, { from: 'user' });
    return exit(exitCode);
  } catch (error) {
    if (error instanceof CommanderError) {
      const helpOrVersion = ['commander.helpDisplayed', 'commander.help', 'commander.version'];
      return exit(helpOrVersion.includes(error.code) ? ExitCode.ok : ExitCode.usage);
    }
    env.output.err(`ocs-sync: ${describeError(error)}`);
    return exit(error instanceof UsageError ? ExitCode.usage : exitCodeOf(error));
  }
}

/** A yes/no question on the terminal, when stdin and stderr are one. */
function terminalConfirm(): CliEnvironment['confirm'] {
  if (!process.stdin.isTTY || !process.stderr.isTTY) return undefined;
  return async (question) => {
    const { createInterface } = await import('node:readline/promises');
    const prompt = createInterface({ input: process.stdin, output: process.stderr });
    try {
      return /^y(es)?$/i.test((await prompt.question(`${question} [y/N] `)).trim());
    } finally {
      prompt.close();
    }
  };
}
