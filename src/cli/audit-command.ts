/**
 * `ocs-sync audit verify` (exit 0 intact, 3 broken, 1 cannot verify) and `ocs-sync audit
 * checkpoints`. See src/audit/verify.ts for what verify checks.
 */
import { existsSync } from 'node:fs';
import { readCheckpointFile, type CheckpointFile } from '../audit/checkpoint-file.js';
import { keyId } from '../audit/key-id.js';
import { loadPublicKey, loadSigner } from '../audit/signing.js';
import { PROBLEM_KINDS, type Problem } from '../audit/problems.js';
import { verifyAudit, type VerifyReport } from '../audit/verify.js';
import { AuditError, ExitCode, UsageError } from '../errors.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { nowIso } from '../warehouse/bookkeeping.js';
import { openWarehouseReader } from '../warehouse/open.js';
import type { CommandContext } from './context.js';
import { formatTable } from './output.js';
import { createStageProgress } from './progress.js';
import { formatAgo } from './time-text.js';
import { createObjectStore, createWarehouse, type Env } from './wiring.js';
import { readCheckpointBucket } from '../audit/checkpoint-bucket.js';
import { bucketLocationProblem, isBucketText } from '../storage/location.js';

export interface AuditVerifyOptions {
  publicKey?: string;
  checkpoints?: string;
  json?: boolean;
}

/** The key to check signatures with: --public-key, else the configured signing key's. */
function publicKeyFor(options: AuditVerifyOptions, config: Config, logger: Logger) {
  if (options.publicKey) return loadPublicKey(options.publicKey);
  if (config.audit.signingKeyFile) {
    return loadSigner(config.audit.signingKeyFile, (message) => logger.warn(message)).publicKey;
  }
  return undefined;
}

/**
 * --checkpoints, else the configured checkpoint file when it exists: a file, or the checkpoint
 * objects of a bucket (`s3://bucket/prefix/`).
 */
async function checkpointFileFor(
  options: AuditVerifyOptions,
  config: Config,
  env: Env,
): Promise<CheckpointFile | undefined> {
  const configured = config.audit.checkpointFile;
  const path =
    options.checkpoints ??
    (configured && (isBucketText(configured) || existsSync(configured)) ? configured : undefined);
  if (path === undefined) return undefined;
  if (!isBucketText(path)) return readCheckpointFile(path);
  const problem = bucketLocationProblem(path);
  if (problem !== undefined) throw new UsageError(`--checkpoints ${path} ${problem}`);
  const store = createObjectStore(config, env, path);
  try {
    return await readCheckpointBucket(store);
  } finally {
    store.close();
  }
}

export async function runAuditVerifyCommand(
  context: CommandContext,
  options: AuditVerifyOptions,
): Promise<number> {
  const config = context.config({ server: false });
  const logger = context.logger(config);
  const publicKey = publicKeyFor(options, config, logger);
  // Read before the warehouse: a checkpoint a sync writes meanwhile is then in our view too.
  const checkpointFile = await checkpointFileFor(options, config, context.environment.env);
  const warehouse = await createWarehouse(config, logger, { mustExist: true });
  let report: VerifyReport;
  try {
    const snapshot = await warehouse.audit.snapshot();
    try {
      if (
        !warehouse.audit.enabled &&
        checkpointFile === undefined &&
        (await snapshot.checkpoints()).length === 0
      ) {
        throw new AuditError(
          'This warehouse keeps no audit chain: audit.enabled was never on for it (or its chain was removed with every checkpoint).',
          {
            hint: 'Sync a new warehouse with audit.enabled: true (OCS_AUDIT=true); give --checkpoints FILE to check this one against checkpoints kept elsewhere.',
          },
        );
      }
      const progress = createStageProgress(logger, context.liveArea());
      try {
        report = await verifyAudit({
          snapshot,
          publicKey,
          checkpointFile,
          onProgress: progress.listener,
        });
      } finally {
        progress.end();
      }
    } finally {
      await snapshot.close();
    }
    await warehouse.audit.recordVerification({
      at: nowIso(),
      intact: report.intact,
      entries: report.entries,
      problems: report.problemCount,
      first: report.first ? describeProblem(report.first) : undefined,
      signatures: report.checkpoints.signatures,
      checkpoints: report.checkpoints.checked,
    });
  } finally {
    await warehouse.close();
  }
  logger.info(
    { intact: report.intact, entries: report.entries, problems: report.problemCount },
    report.intact ? 'Audit chain intact' : 'Audit chain broken',
  );
  context.output.out(
    options.json ? JSON.stringify(verifyJson(report), null, 2) : formatVerifyReport(report),
  );
  return report.intact ? ExitCode.ok : ExitCode.partial;
}

/** Where a problem is: table, row id, version, entry. */
export function describeProblem(problem: Problem): string {
  const place = [
    problem.table,
    problem.rowId === undefined ? undefined : `row ${problem.rowId}`,
    problem.version === undefined
      ? undefined
      : `version ${problem.version}${problem.versionId ? ` (_version_id ${problem.versionId})` : ''}`,
    problem.seq === undefined ? undefined : `entry ${problem.seq}`,
  ].filter(Boolean);
  return `${place.length > 0 ? `${place.join(', ')}: ` : ''}${PROBLEM_KINDS[problem.kind]} (${problem.kind}): ${problem.detail}`;
}

function formatVerifyReport(report: VerifyReport): string {
  const lines: string[] = [];
  const { checkpoints } = report;
  const checked =
    `${report.entries} entries (head: entry ${report.head.seq}, ${report.head.hash.slice(0, 12)}…), ` +
    `${report.tables} tables, ${report.versions} versions, ${report.liveRows} live rows, ${report.records} records`;
  if (report.intact) {
    lines.push(`Audit chain intact: ${checked}; every digest recomputed from the stored values.`);
  } else {
    lines.push(`Audit chain BROKEN: ${report.problemCount} problem(s) in ${checked}.`);
    lines.push(`First broken link: ${describeProblem(report.first!)}`);
    for (const problem of report.problems.slice(1, 20))
      lines.push(`  - ${describeProblem(problem)}`);
    if (report.problemCount > 20)
      lines.push(`  … and ${report.problemCount - 20} more (--json lists up to 100).`);
  }
  for (const warning of report.warnings) lines.push(`warning: ${warning}`);
  lines.push(
    `Checkpoints: ${checkpoints.stored} in the warehouse` +
      (checkpoints.filePath ? `, ${checkpoints.file} in ${checkpoints.filePath}` : '') +
      `; the chain was checked against ${checkpoints.checked} signed head(s)` +
      (checkpoints.key ? ` (key ${checkpoints.key}).` : '.'),
  );
  if (!checkpoints.signatures) {
    lines.push(
      'note: no public key given: signatures were checked only against the keys they name, which someone with write access could replace. Give --public-key ocs-audit-signing.pub (or audit.signing_key_file).',
    );
  }
  if (!checkpoints.filePath) {
    lines.push(
      'note: no checkpoint file given: a chain rebuilt along with the checkpoints kept beside it would pass. Verify against the file shipped off this machine: --checkpoints FILE.',
    );
  }
  return lines.join('\n');
}

function verifyJson(report: VerifyReport): Record<string, unknown> {
  const problem = (item: Problem) => ({
    kind: item.kind,
    what: PROBLEM_KINDS[item.kind],
    table: item.table ?? null,
    row_id: item.rowId ?? null,
    version: item.version ?? null,
    version_id: item.versionId ?? null,
    seq: item.seq ?? null,
    detail: item.detail,
  });
  return {
    intact: report.intact,
    head: report.head,
    entries: report.entries,
    tables: report.tables,
    versions: report.versions,
    live_rows: report.liveRows,
    records: report.records,
    checkpoints: {
      stored: report.checkpoints.stored,
      file: report.checkpoints.filePath ?? null,
      in_file: report.checkpoints.file,
      checked: report.checkpoints.checked,
      signatures_checked: report.checkpoints.signatures,
      key: report.checkpoints.key ?? null,
    },
    problem_count: report.problemCount,
    first: report.first ? problem(report.first) : null,
    problems: report.problems.map(problem),
    warnings: report.warnings,
  };
}

export async function runAuditCheckpointsCommand(
  context: CommandContext,
  options: { json?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const reader = await openWarehouseReader({
    url: config.warehouse.url,
    schema: config.warehouse.schema,
    statementTimeoutSeconds: config.warehouse.statementTimeoutSeconds,
  });
  let checkpoints;
  try {
    checkpoints = await reader.auditCheckpoints();
  } finally {
    await reader.close();
  }
  if (options.json) {
    context.output.out(JSON.stringify(checkpoints, null, 2));
    return ExitCode.ok;
  }
  if (checkpoints.length === 0) {
    context.output.out(
      'No audit checkpoints yet (they need audit.enabled and audit.signing_key_file).',
    );
    return ExitCode.ok;
  }
  const now = Date.now();
  context.output.out(
    formatTable(
      ['run', 'entry', 'head', 'made', 'key', 'entries since the previous'],
      checkpoints.map((checkpoint) => [
        checkpoint.run ?? '-',
        checkpoint.seq,
        `${checkpoint.head.slice(0, 12)}…`,
        formatAgo(checkpoint.time, now),
        keyId(checkpoint.key),
        Object.entries(checkpoint.counts)
          .map(([operation, count]) => `${operation} ${count}`)
          .join(', '),
      ]),
    ),
  );
  return ExitCode.ok;
}
