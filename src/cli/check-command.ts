/**
 * `ocs-sync check`: is this setup ready to sync? A handful of requests (manifest, team, one
 * small page of a sealed resource) and a read-only look at the warehouse. One line per check,
 * ✓ or ✗ with the fix; exit 0 when every check passes, 1 otherwise. Writes nothing anywhere.
 */
import type { KeyObject } from 'node:crypto';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { sqliteFileOf } from '../warehouse/url.js';
import { readApiKey } from '../config/fleet.js';
import type { Setup } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { unknownNameAdvice } from '../did-you-mean.js';
import {
  AuthError,
  ConfigError,
  ExitCode,
  OcsSyncError,
  ProtocolError,
  describeError,
} from '../errors.js';
import type { Manifest } from '../interfaces.js';
import { silentLogger } from '../log.js';
import { probeWarehouse, sqliteFiles } from '../warehouse/open.js';
import type { WarehouseProbe } from '../warehouse/probe.js';
import type { CommandContext } from './context.js';
import { formatFileTotals } from './files-output.js';
import {
  DEFAULT_DATA_FILE_MODE,
  exposedMode,
  findWiderThanPrivate,
  formatMode,
  privateModes,
} from '../private-files.js';
import { createSource, type Env } from './wiring.js';
import { checkCheckpointBucket, checkFilesBucket } from './bucket-checks.js';
import { isBucketText } from '../storage/location.js';

/**
 * `warning`: worth fixing, but no reason the sync would fail (exit 0 still). `off`: turned off by
 * the configuration, so nothing to check (exit 0 still). `skipped`: could not be checked because
 * an earlier check failed.
 */
export type CheckStatus = 'ok' | 'failed' | 'skipped' | 'warning' | 'off';

export interface CheckResult {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about a failed check. */
  fix?: string;
}

const NAMES = {
  config: 'configuration',
  server: 'server reachable',
  manifest: 'manifest readable',
  checksum: 'schema checksum',
  apiKey: "API key (a team admin's)",
  publicKey: 'team public key registered',
  privateKey: 'private key opens a sealed value',
  warehouse: 'warehouse reachable',
  writable: 'warehouse writable',
  lock: 'writer lock free',
  files: 'file contents',
  privateFiles: 'files private',
  keyFiles: 'key files private',
  audit: 'audit signing',
  metrics: 'metrics export',
} as const;

/** Splits "message\n  hint: fix" into the two parts. */
function failure(name: string, error: unknown): CheckResult {
  const text = describeError(error);
  const at = text.indexOf('\n  hint: ');
  return at < 0
    ? { name, status: 'failed', detail: text }
    : {
        name,
        status: 'failed',
        detail: text.slice(0, at),
        fix: text.slice(at + '\n  hint: '.length),
      };
}

const skipped = (name: string, why: string): CheckResult => ({
  name,
  status: 'skipped',
  detail: `not checked: ${why}`,
});

export async function runChecks(
  config: Config,
  /** Why a team's API key could not be read (its server is then not asked). */
  apiKeyProblem?: unknown,
  /** The file a team's API key is read from, if it is. */
  apiKeyFile?: string,
  /** The command's environment (where the AWS credential chain starts, for buckets). */
  env: Env = process.env,
): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const warehouse = await checkWarehouse(config, results, env);
  results.push(...keyFilesResults(config, apiKeyFile));
  if (config.audit.enabled || config.audit.signingKeyFile !== undefined) {
    results.push(await auditResult(config, env));
  }
  await checkServer(config, warehouse, results, apiKeyProblem);
  if (config.metrics.pushUrl !== undefined || config.metrics.textfile !== undefined) {
    results.push(await metricsResult(config));
  }
  // Server checks read better first, as a person sets things up in that order.
  const order = Object.values(NAMES) as string[];
  return results.sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
}

async function checkWarehouse(
  config: Config,
  results: CheckResult[],
  env: Env,
): Promise<WarehouseProbe | undefined> {
  let probe: WarehouseProbe;
  try {
    probe = await probeWarehouse({ url: config.warehouse.url, schema: config.warehouse.schema });
  } catch (error) {
    results.push(failure(NAMES.warehouse, error));
    results.push(skipped(NAMES.writable, 'the warehouse cannot be reached'));
    results.push(skipped(NAMES.lock, 'the warehouse cannot be reached'));
    return undefined;
  }
  results.push({
    name: NAMES.warehouse,
    status: 'ok',
    detail: probe.exists ? probe.description : `${probe.description} (the first sync creates it)`,
  });
  results.push(
    probe.notWritable
      ? { name: NAMES.writable, status: 'failed', detail: probe.notWritable }
      : { name: NAMES.writable, status: 'ok', detail: 'this user may write to it' },
  );
  const { lock } = probe;
  if (lock.state === 'held') {
    const holder = lock.holder;
    results.push({
      name: NAMES.lock,
      status: 'failed',
      detail: holder
        ? `held by pid ${holder.pid} on ${holder.host} since ${holder.since}`
        : 'held by another session',
      fix: 'Another ocs-sync is syncing into this warehouse; wait for it, or stop it (a daemon holds it only while a run is going).',
    });
  } else {
    results.push({
      name: NAMES.lock,
      status: 'ok',
      detail:
        lock.state === 'left'
          ? `free (pid ${lock.holder?.pid ?? '?'} on ${lock.holder?.host ?? '?'} ended without releasing it; the next sync takes it over at once)`
          : 'free',
    });
  }
  results.push(
    config.files.enabled && config.files.dir !== undefined && isBucketText(config.files.dir)
      ? { name: NAMES.files, ...(await checkFilesBucket(config, env, config.files.dir)) }
      : filesResult(config, probe),
  );
  results.push(await privateFilesResult(config));
  return probe;
}

/**
 * With audit on (or a signing key set): the signing key loads and is an Ed25519 key, and the
 * checkpoint file can be appended to (or created in its folder), found out without writing
 * anything.
 */
async function auditResult(config: Config, env: Env): Promise<CheckResult> {
  const name = NAMES.audit;
  const { signingKeyFile, checkpointFile } = config.audit;
  if (signingKeyFile === undefined) {
    return {
      name,
      status: 'warning',
      detail:
        'no audit.signing_key_file: the chain is kept, but no checkpoint is signed, so a chain rebuilt by someone with write access to the warehouse would pass `audit verify`',
      fix: 'Run `ocs-sync keygen --signing --out DIR` and set OCS_AUDIT_SIGNING_KEY_FILE and OCS_AUDIT_CHECKPOINT_FILE.',
    };
  }
  const [{ loadSigner }, { keyId }] = await Promise.all([
    import('../audit/signing.js'),
    import('../audit/key-id.js'),
  ]);
  let publicKey: string;
  try {
    // Whether others may read it is the key files' check.
    publicKey = loadSigner(signingKeyFile, () => undefined).publicKey;
  } catch (error) {
    return failure(name, error);
  }
  const file = checkpointFile!;
  if (isBucketText(file)) {
    const signer = `Ed25519 key ${keyId(publicKey)} loads`;
    return { name, ...(await checkCheckpointBucket(config, env, file, signer)) };
  }
  const unusable = checkpointFileProblem(file);
  if (unusable) {
    return {
      name,
      status: 'failed',
      detail: `the signing key (Ed25519, key ${keyId(publicKey)}) loads, but ${unusable}`,
      fix: `Give this user write access there, or set OCS_AUDIT_CHECKPOINT_FILE to a file it may append to (its folder must exist: ocs-sync does not create it).`,
    };
  }
  const where = existsSync(file)
    ? `checkpoints are appended to ${file}`
    : `${file} is created by the next sync`;
  return { name, status: 'ok', detail: `Ed25519 key ${keyId(publicKey)} loads; ${where}` };
}

/** Why the checkpoint file could not be appended to (or created), or undefined when it can. */
function checkpointFileProblem(file: string): string | undefined {
  if (existsSync(file)) {
    if (!statSync(file).isFile()) return `the checkpoint file ${file} is not a file`;
    try {
      // Read too: a run reads its last line to find the checkpoints it lacks.
      accessSync(file, constants.R_OK | constants.W_OK);
      return undefined;
    } catch {
      return `the checkpoint file ${file} cannot be read and written by this user`;
    }
  }
  const folder = dirname(resolve(file));
  if (!existsSync(folder)) return `the checkpoint file's folder ${folder} does not exist`;
  try {
    accessSync(folder, constants.W_OK | constants.X_OK);
    return undefined;
  } catch {
    return `the checkpoint file ${file} cannot be created: this user may not write to ${folder}`;
  }
}

/**
 * Where each run's metrics go: the Pushgateway answers its readiness probe, the textfile's folder
 * may be written. A warning, not a failure: runs sync all the same, and say so when they cannot
 * send their metrics.
 */
async function metricsResult(config: Config): Promise<CheckResult> {
  const { pushUrl, textfile, pushTimeoutSeconds } = config.metrics;
  const { pushgatewayProblem, textfileProblem, withoutCredentials } =
    await import('../daemon/run-export.js');
  const said: string[] = [];
  const problems: string[] = [];
  if (pushUrl !== undefined) {
    const where = `the Pushgateway at ${withoutCredentials(pushUrl)}`;
    const problem = await pushgatewayProblem(pushUrl, pushTimeoutSeconds * 1000);
    if (problem === undefined) said.push(`${where} is ready`);
    else problems.push(`${where}: ${problem}`);
  }
  if (textfile !== undefined) {
    const problem = textfileProblem(textfile);
    if (problem === undefined) said.push(`each run writes ${textfile}`);
    else problems.push(`the textfile ${textfile}: ${problem}`);
  }
  if (problems.length === 0) {
    return { name: NAMES.metrics, status: 'ok', detail: said.join('; ') };
  }
  return {
    name: NAMES.metrics,
    status: 'warning',
    detail: [...problems, ...said].join('; '),
    fix: 'Runs sync all the same, but send no metrics there: check metrics.push_url (OCS_METRICS_PUSH_URL) and the Pushgateway, or create the textfile collector folder and let this user write to it.',
  };
}

/**
 * Whether the files that hold team data are as private as `data_file_mode` says (0600 files in
 * 0700 folders by default): the SQLite warehouse with its -wal and -shm, the blob store, and the
 * audit checkpoint file.
 */
async function privateFilesResult(config: Config): Promise<CheckResult> {
  const modes = privateModes(config.dataFileMode);
  const file = sqliteFileOf(config.warehouse.target);
  const paths = [
    ...(file !== undefined ? sqliteFiles(resolve(file)) : []),
    // Before the blob store, whose files would otherwise fill the five named.
    ...(config.audit.checkpointFile !== undefined ? [config.audit.checkpointFile] : []),
    ...(config.files.enabled && config.files.dir !== undefined ? [config.files.dir] : []),
  ].filter((path) => existsSync(path));
  const { wider, examined, complete } = await findWiderThanPrivate(paths, modes);
  const allowed = `files ${formatMode(modes.file)}, folders ${formatMode(modes.folder)}`;
  const scope = complete ? `${examined} checked` : `the first ${examined} checked`;
  if (wider.length === 0) {
    return { name: NAMES.privateFiles, status: 'ok', detail: `${allowed} (${scope})` };
  }
  const shown = wider.slice(0, 5).map((entry) => `${entry.path} (${formatMode(entry.mode)})`);
  const more = wider.length > shown.length ? ` and ${wider.length - shown.length} more` : '';
  return {
    name: NAMES.privateFiles,
    status: 'warning',
    detail: `wider than data_file_mode allows (${allowed}): ${shown.join(', ')}${more}`,
    fix:
      `They hold team data: chmod ${formatMode(modes.file)} the files and ${formatMode(modes.folder)} the folders` +
      (modes.file === DEFAULT_DATA_FILE_MODE ? ` (chmod -R go-rwx ${paths.join(' ')})` : '') +
      ', or set data_file_mode (OCS_DATA_FILE_MODE) if they are meant to be shared.',
  };
}

/**
 * Whether the files that hold keys are their owner's alone (as a sync judges them, which warns
 * about each): a warning with the `chmod` for each one group or others may read.
 */
function keyFilesResults(config: Config, apiKeyFile: string | undefined): CheckResult[] {
  const files = [
    { what: 'API key file', file: apiKeyFile },
    { what: 'Private key file', file: config.privateKeyFile },
    { what: 'Audit signing key file', file: config.audit.signingKeyFile },
  ].filter((entry): entry is { what: string; file: string } => {
    return entry.file !== undefined && existsSync(entry.file);
  });
  if (files.length === 0) return [];
  const exposed = files.flatMap(({ what, file }) => {
    const mode = exposedMode(file);
    return mode === undefined ? [] : [{ what, file, mode }];
  });
  if (exposed.length === 0) {
    return [
      {
        name: NAMES.keyFiles,
        status: 'ok',
        detail: files.map(({ file }) => file).join(', '),
      },
    ];
  }
  return exposed.map(({ what, file, mode }) => ({
    name: NAMES.keyFiles,
    status: 'warning',
    detail: `${what} ${file} can be read by group or others (mode ${formatMode(mode)})`,
    fix: `It holds a key: chmod 600 ${file}`,
  }));
}

/** Where file contents go, whether this user may write there, and what is kept so far. */
function filesResult(config: Config, probe: WarehouseProbe): CheckResult {
  if (!config.files.enabled) {
    return { name: NAMES.files, status: 'off', detail: 'not checked: files.enabled is false' };
  }
  const dir = config.files.dir;
  if (dir === undefined) {
    return {
      name: NAMES.files,
      status: 'failed',
      detail: 'files.dir (OCS_FILES_DIR) is not set',
      fix: 'Set OCS_FILES_DIR to the folder for file contents, or set files.enabled: false (OCS_FILES_ENABLED=false).',
    };
  }
  const target = existsSync(dir) ? dir : dirname(resolve(dir));
  try {
    accessSync(target, constants.W_OK);
  } catch {
    return {
      name: NAMES.files,
      status: 'failed',
      detail: `${target} cannot be written by this user`,
      fix: `Create ${dir} with write access for this user, or set OCS_FILES_DIR to another folder.`,
    };
  }
  const totals = probe.files;
  if (!totals) return { name: NAMES.files, status: 'ok', detail: `kept in ${dir}` };
  const detail = `${formatFileTotals(totals, undefined)} in ${dir}`;
  return totals.failed > 0
    ? {
        name: NAMES.files,
        status: 'failed',
        detail,
        fix: 'The next sync fetches them again; its summary says why they failed. `ocs-sync files verify` checks what is stored.',
      }
    : { name: NAMES.files, status: 'ok', detail };
}

async function checkServer(
  config: Config,
  probe: WarehouseProbe | undefined,
  results: CheckResult[],
  apiKeyProblem: unknown,
): Promise<void> {
  const serverNames = [
    NAMES.server,
    NAMES.manifest,
    NAMES.checksum,
    NAMES.apiKey,
    NAMES.publicKey,
    NAMES.privateKey,
  ];
  if (apiKeyProblem !== undefined) {
    results.push(failure(NAMES.apiKey, apiKeyProblem));
    for (const name of serverNames.filter((candidate) => candidate !== NAMES.apiKey)) {
      results.push(skipped(name, 'no API key to ask with'));
    }
    return;
  }
  let source: ReturnType<typeof createSource>;
  try {
    // Two attempts at most: a check should answer in seconds, not wait out a long outage.
    source = createSource(
      { ...config, http: { ...config.http, maxAttempts: Math.min(2, config.http.maxAttempts) } },
      silentLogger(),
    );
  } catch (error) {
    results.push(failure(NAMES.server, error));
    for (const name of serverNames.slice(1)) results.push(skipped(name, 'no server configured'));
    return;
  }
  try {
    let manifest: Manifest;
    try {
      manifest = await source.manifest();
    } catch (error) {
      const answered =
        (error instanceof OcsSyncError && 'status' in error) || error instanceof ProtocolError;
      results.push(
        answered
          ? { name: NAMES.server, status: 'ok', detail: config.baseUrl ?? '' }
          : failure(NAMES.server, error),
      );
      results.push(
        answered ? failure(NAMES.manifest, error) : skipped(NAMES.manifest, 'no answer'),
      );
      for (const name of serverNames.slice(2)) results.push(skipped(name, 'no manifest'));
      return;
    }
    results.push({ name: NAMES.server, status: 'ok', detail: config.baseUrl ?? '' });
    results.push(manifestResult(config, manifest));
    results.push(checksumResult(config, manifest, probe));

    let team: Record<string, unknown>;
    try {
      team = await source.team();
    } catch (error) {
      results.push(failure(NAMES.apiKey, error));
      const why = error instanceof AuthError ? 'the API key was refused' : 'team/ failed';
      results.push(skipped(NAMES.publicKey, why));
      results.push(skipped(NAMES.privateKey, why));
      return;
    }
    results.push({
      name: NAMES.apiKey,
      status: 'ok',
      detail: `team ${typeof team.name === 'string' ? JSON.stringify(team.name) : String(team.id)}`,
    });

    const sealed = manifest.entries.filter((entry) => entry.secret);
    if (sealed.length === 0) {
      results.push({ name: NAMES.publicKey, status: 'ok', detail: 'no resource is sealed' });
      results.push({ name: NAMES.privateKey, status: 'ok', detail: 'no resource is sealed' });
      return;
    }
    if (team.has_public_key !== true) {
      results.push({
        name: NAMES.publicKey,
        status: 'failed',
        detail: `the team has no public key, so the server refuses ${sealed.map((entry) => entry.resource).join(', ')}`,
        fix: 'Create a key pair with `ocs-sync keygen` and register the public key on the team (team settings), then set OCS_PRIVATE_KEY_FILE.',
      });
      results.push(skipped(NAMES.privateKey, 'no public key is registered'));
      return;
    }
    results.push({ name: NAMES.publicKey, status: 'ok', detail: 'has_public_key is true' });
    results.push(await privateKeyResult(config, sealed[0]!.resource, source));
  } finally {
    await source.close();
  }
}

function manifestResult(config: Config, manifest: Manifest): CheckResult {
  const names = manifest.entries.map((entry) => entry.resource);
  const unknown = [
    ...(config.resources ?? []),
    ...config.excludeResources,
    ...Object.keys(config.secrets.resources),
  ].filter((name) => !names.includes(name));
  if (unknown.length > 0) {
    return {
      name: NAMES.manifest,
      status: 'failed',
      detail: [...new Set(unknown)]
        .map(
          (name) =>
            `the configuration names ${JSON.stringify(name)}, which the server does not export; ${unknownNameAdvice(name, names)}`,
        )
        .join('; '),
      fix: 'Fix the name in resources / exclude_resources / secrets.resources.',
    };
  }
  return { name: NAMES.manifest, status: 'ok', detail: `${names.length} resources` };
}

function checksumResult(
  config: Config,
  manifest: Manifest,
  probe: WarehouseProbe | undefined,
): CheckResult {
  const current = manifest.schemaChecksum;
  const short = (checksum: string) => `${checksum.slice(0, 12)}…`;
  if (!probe?.schemaChecksum) {
    return {
      name: NAMES.checksum,
      status: 'ok',
      detail: `${short(current)} (new: no complete run yet)`,
    };
  }
  if (probe.schemaChecksum === current) {
    return {
      name: NAMES.checksum,
      status: 'ok',
      detail: `${short(current)} (unchanged since the last run)`,
    };
  }
  const detail = `changed since the last run (${short(probe.schemaChecksum)} -> ${short(current)})`;
  return config.onSchemaChange === 'stop'
    ? {
        name: NAMES.checksum,
        status: 'failed',
        detail: `${detail}; on_schema_change is "stop", so the next sync stops`,
        fix: 'Run `ocs-sync sync --accept-schema-change` once the planned changes (in its message) are reviewed.',
      }
    : { name: NAMES.checksum, status: 'ok', detail: `${detail}; the next sync evolves the tables` };
}

async function privateKeyResult(
  config: Config,
  resource: string,
  source: ReturnType<typeof createSource>,
): Promise<CheckResult> {
  const name = NAMES.privateKey;
  const [{ loadPrivateKey }, { needsPrivateKey }] = await Promise.all([
    import('../sealing/keys.js'),
    import('../sealing/policy.js'),
  ]);
  if (!config.privateKeyFile && !config.privateKey) {
    const needing = [config.secrets.default, ...Object.values(config.secrets.resources)].some(
      needsPrivateKey,
    );
    return needing
      ? {
          name,
          status: 'failed',
          detail:
            'no private key is configured, and the secrets policy needs one to open sealed fields',
          fix: 'Set OCS_PRIVATE_KEY_FILE (or OCS_PRIVATE_KEY) to the private key whose public half is registered on the team, or set the secrets policy to "sealed" or "drop".',
        }
      : {
          name,
          status: 'ok',
          detail: 'not needed: the secrets policies keep sealed values sealed or drop them',
        };
  }
  let key: KeyObject;
  try {
    key = loadPrivateKey(
      {
        file: config.privateKeyFile,
        pem: config.privateKey,
        passphrase: config.privateKeyPassphrase,
      },
      () => undefined,
    );
  } catch (error) {
    return failure(name, error);
  }
  let page;
  try {
    page = await source.page(resource, null, 5);
  } catch (error) {
    return failure(name, error);
  }
  const { isSealedToken } = await import('../sealing/detect.js');
  const token = page.rows.flatMap((row) => Object.values(row)).find(isSealedToken);
  if (token === undefined) {
    return {
      name,
      status: 'ok',
      detail: `the key loads; ${resource} has no sealed value to try it on yet`,
    };
  }
  try {
    const { openSealedValue } = await import('../sealing/open.js');
    openSealedValue(token, key);
    return { name, status: 'ok', detail: `opened a sealed value of ${resource}` };
  } catch (error) {
    return {
      name,
      status: 'failed',
      detail: `cannot open a sealed value of ${resource}: ${error instanceof Error ? error.message : String(error)}`,
      fix: "This is not the private key of the public key registered on the team: use the matching private key, or register this key's public half.",
    };
  }
}

export async function runCheckCommand(
  context: CommandContext,
  options: { json?: boolean },
): Promise<number> {
  let setup: Setup;
  let filePath: string | undefined;
  try {
    ({ setup, filePath } = context.setup({ server: false }));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return printChecks(context, options, [
      { name: NAMES.config, status: 'failed', detail: error.message },
    ]);
  }
  if (setup.kind === 'single') {
    // --team with a configuration of one team is a usage error, as for every command.
    context.config({ server: false });
    return printChecks(context, options, await checksOf(setup.config, context.environment.env));
  }
  // Each team of a teams: list (--team NAME, or --team all), its key read as a sync reads it.
  const teams = context.teams(setup.fleet, filePath);
  const byTeam: Array<{ team: string; ok: boolean; checks: CheckResult[] }> = [];
  for (const team of teams) {
    let keyProblem: unknown;
    let apiKey: string | undefined;
    try {
      apiKey = readApiKey(team, context.environment.env);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      keyProblem = new OcsSyncError(error.problems.join('; '), {
        hint: "Set it to the API key of one of the team's admins, or point the team's api_key_env or api_key_file at it.",
      });
    }
    const keyFile =
      team.apiKey !== undefined && 'file' in team.apiKey ? team.apiKey.file : undefined;
    const checks = await checksOf(
      { ...team.config, apiKey },
      context.environment.env,
      keyProblem,
      keyFile,
    );
    byTeam.push({ team: team.name, ok: allPassed(checks), checks });
  }
  const ok = byTeam.every((team) => team.ok);
  if (options.json) {
    context.output.out(JSON.stringify({ ok, teams: byTeam }, null, 2));
  } else {
    for (const { team, checks } of byTeam) {
      context.output.out(`${team}:`);
      printCheckLines(context, checks, '  ');
    }
  }
  return ok ? ExitCode.ok : ExitCode.failed;
}

async function checksOf(
  config: Config,
  env: Env,
  apiKeyProblem?: unknown,
  apiKeyFile?: string,
): Promise<CheckResult[]> {
  return [
    { name: NAMES.config, status: 'ok', detail: 'valid' },
    ...(await runChecks(config, apiKeyProblem, apiKeyFile, env)),
  ];
}

const allPassed = (results: readonly CheckResult[]) =>
  results.every((result) => result.status !== 'failed' && result.status !== 'skipped');

function printChecks(
  context: CommandContext,
  options: { json?: boolean },
  results: CheckResult[],
): number {
  const ok = allPassed(results);
  if (options.json) {
    context.output.out(JSON.stringify({ ok, checks: results }, null, 2));
  } else {
    printCheckLines(context, results, '');
  }
  return ok ? ExitCode.ok : ExitCode.failed;
}

/** One line per check with ✓, ✗, ! or -, and the fix under a failed one. */
function printCheckLines(context: CommandContext, results: CheckResult[], indent: string): void {
  const width = Math.max(...results.map((result) => result.name.length));
  for (const result of results) {
    const mark =
      result.status === 'ok'
        ? '✓'
        : result.status === 'failed'
          ? '✗'
          : result.status === 'warning'
            ? '!'
            : '-';
    context.output.out(`${indent}${mark} ${result.name.padEnd(width)}  ${result.detail}`);
    if (result.fix) context.output.out(`${indent}  ${' '.repeat(width)}  fix: ${result.fix}`);
  }
}
