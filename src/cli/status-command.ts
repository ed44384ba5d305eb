/**
 * `ocs-sync status`: the last run, the last success, and every resource, with an exit code that
 * cron jobs and monitoring can act on (ExitCode.status*). Reads the warehouse; writes nothing.
 */
import { ExitCode } from '../errors.js';
import type { ChatbotChoiceRecord, ResourceStatus, VerificationRecord } from '../interfaces.js';
import { PRINTABLE_LENGTH, printable } from '../printable.js';
import { describeChoice } from '../sync/chatbot-choice.js';
import { openWarehouseReader } from '../warehouse/open.js';
import {
  SYNC_RUN_KINDS,
  type AuditSummary,
  type RunRecord,
  type WarehouseReader,
} from '../warehouse/reader.js';
import type { Config } from '../config/schema.js';
import { ALL_TEAMS } from '../config/teams.js';
import type { TeamSetup } from '../config/fleet.js';
import { describeError } from '../errors.js';
import { formatTable, shorten } from './output.js';
import { formatSpan } from './time-text.js';
import { keyId } from '../audit/key-id.js';
import { formatAgo } from './time-text.js';
import { MANIFEST_ORDER_STATE_KEY } from '../warehouse/state-keys.js';
import type { CommandContext } from './context.js';
import {
  STATUS_TABLE_WIDTH,
  describeCursor,
  formatRunLine,
  formatStatusTable,
  inManifestOrder,
} from './output.js';
import { formatFileTotals } from './files-output.js';
import { parseDuration } from './option-values.js';

export interface StatusOptions {
  json?: boolean;
  wide?: boolean;
  maxLag?: string;
}

export interface Health {
  exitCode: number;
  /** Why it is not healthy, one line each (empty when healthy). */
  problems: string[];
}

/**
 * Healthy (0) unless, checked in this order: the last `audit verify` found the archive broken
 * (7: evidence of a change behind the tool's back outranks any lag); no sync run is recorded or
 * the last one failed (4); a resource's last attempt ended in an error (5); a resource lags more
 * than `maxLagSeconds` (6). Pure, so the rule is tested on its own.
 */
export function judgeHealth(
  lastRun: RunRecord | undefined,
  resources: ResourceStatus[],
  maxLagSeconds: number | undefined,
  now: number,
  lastVerification: VerificationRecord | null = null,
): Health {
  const problems: string[] = [];
  let exitCode: number = ExitCode.ok;
  const flag = (code: number, problem: string) => {
    problems.push(problem);
    if (exitCode === ExitCode.ok) exitCode = code;
  };
  if (lastVerification && lastVerification.intact !== true) {
    flag(
      ExitCode.statusAuditBroken,
      `the last audit verify ${describeBrokenVerify(lastVerification, now)}`,
    );
  }
  if (!lastRun) flag(ExitCode.statusLastRunFailed, 'no sync run is recorded yet');
  else if (lastRun.status === 'failed' || lastRun.status === 'interrupted') {
    flag(ExitCode.statusLastRunFailed, `the last run (#${lastRun.id}) ${lastRun.status}`);
  }
  const erring = resources.filter((resource) => resource.lastError !== null);
  if (erring.length > 0) {
    flag(
      ExitCode.statusResourceError,
      `${erring.length} resource(s) ended with an error: ${erring.map((resource) => resource.resource).join(', ')}`,
    );
  }
  if (maxLagSeconds !== undefined) {
    const lagging = resources.filter((resource) => {
      // Not requested under the team's chatbot choice: no lag to speak of.
      if (resource.excludedAt) return false;
      const lag = lagSeconds(resource, now);
      return lag === null || lag > maxLagSeconds;
    });
    if (lagging.length > 0) {
      flag(
        ExitCode.statusLagging,
        `${lagging.length} resource(s) not synced within ${maxLagSeconds} s: ${lagging.map((resource) => resource.resource).join(', ')}`,
      );
    }
  }
  return { exitCode, problems };
}

/** What the last verify found, for a person; it quotes stored text, so it is kept short. */
function describeBrokenVerify(verification: VerificationRecord, now: number): string {
  const first =
    verification.first === undefined
      ? ''
      : `; first: ${printable(String(verification.first), { max: PRINTABLE_LENGTH })}`;
  return `(${formatAgo(String(verification.at), now)}) found the audit archive BROKEN: ${Number(verification.problems)} problem(s)${first}`;
}

/** Seconds since the resource last synced successfully; null when it never did. */
export function lagSeconds(resource: ResourceStatus, now: number): number | null {
  if (!resource.lastSuccessAt) return null;
  const at = Date.parse(resource.lastSuccessAt);
  return Number.isFinite(at) ? Math.max(0, Math.round((now - at) / 1000)) : null;
}

export async function runStatusCommand(
  context: CommandContext,
  options: StatusOptions,
): Promise<number> {
  const maxLagSeconds =
    options.maxLag === undefined ? undefined : parseDuration(options.maxLag, '--max-lag');
  const { setup } = context.setup({ server: false });
  if (setup.kind === 'fleet' && (context.globals.team ?? ALL_TEAMS) === ALL_TEAMS) {
    return fleetStatus(context, setup.fleet.teams, { json: options.json, maxLagSeconds });
  }
  const config = context.config({ server: false });
  const snapshot = await readStatus(config, maxLagSeconds);
  const { health, resources, files, audit, choice, lastRun, lastSuccess, now } = snapshot;
  if (options.json) {
    context.output.out(JSON.stringify(statusJson(snapshot), null, 2));
    return health.exitCode;
  }
  const errorWidth = options.wide ? undefined : STATUS_TABLE_WIDTH - 40;
  context.output.out(`Warehouse:     ${snapshot.description}`);
  context.output.out(`Last run:      ${formatRunLine(lastRun, now, { errorWidth })}`);
  context.output.out(`Last success:  ${formatRunLine(lastSuccess, now, { errorWidth })}`);
  if (choice) context.output.out(`Chatbot choice: ${describeChoice(choice)}`);
  context.output.out(
    `Health:        ${health.problems.length === 0 ? 'ok' : health.problems.join('; ')}`,
  );
  context.output.out(`Audit:         ${formatAudit(audit, now)}`);
  context.output.out('');
  context.output.out(
    resources.length > 0
      ? formatStatusTable(resources, { now, wide: options.wide })
      : 'No resources synced yet.',
  );
  context.output.out('');
  context.output.out(formatFileTotals(files, config.files.enabled ? config.files.dir : undefined));
  return health.exitCode;
}

/** What `status` shows of one warehouse. */
export interface StatusSnapshot {
  description: string;
  lastRun: RunRecord | undefined;
  lastSuccess: RunRecord | undefined;
  resources: ResourceStatus[];
  files: Awaited<ReturnType<WarehouseReader['fileTotals']>>;
  audit: AuditSummary;
  choice: ChatbotChoiceRecord | null | undefined;
  health: Health;
  now: number;
}

/** Reads one warehouse's status (read-only) and judges its health. */
export async function readStatus(
  config: Config,
  maxLagSeconds: number | undefined,
): Promise<StatusSnapshot> {
  const reader = await openWarehouseReader({
    url: config.warehouse.url,
    schema: config.warehouse.schema,
    statementTimeoutSeconds: config.warehouse.statementTimeoutSeconds,
  });
  try {
    const [lastRun] = await reader.runs({ limit: 1, kinds: SYNC_RUN_KINDS });
    const lastSuccess = await reader.lastSuccessfulRun();
    const resources = inManifestOrder(
      await reader.status(),
      await reader.getState(MANIFEST_ORDER_STATE_KEY),
    );
    const files = await reader.fileTotals();
    const audit = await reader.audit();
    const choice = await reader.activeChatbotChoice();
    const now = Date.now();
    const health = judgeHealth(lastRun, resources, maxLagSeconds, now, audit.lastVerification);
    return {
      description: reader.description,
      lastRun,
      lastSuccess,
      resources,
      files,
      audit,
      choice,
      health,
      now,
    };
  } finally {
    await reader.close();
  }
}

/** `status --json` of one warehouse. */
export function statusJson(snapshot: StatusSnapshot): Record<string, unknown> {
  const { resources, now, health } = snapshot;
  return {
    last_run: runJson(snapshot.lastRun),
    last_success: runJson(snapshot.lastSuccess),
    chatbot_choice: choiceJson(snapshot.choice),
    resources: resources.map((resource) => ({
      resource: resource.resource,
      rows: resource.rows,
      rows_deleted: resource.rowsDeleted,
      rows_out_of_scope: resource.rowsOutOfScope ?? 0,
      excluded_by_chatbot_choice: Boolean(resource.excludedAt),
      last_success_at: resource.lastSuccessAt,
      lag_seconds: lagSeconds(resource, now),
      newest_updated_at: resource.newestUpdatedAt,
      last_full_refresh_at: resource.lastFullRefreshAt,
      last_error: resource.lastError,
      last_error_at: resource.lastErrorAt,
      cursor: resource.cursor,
      cursor_kind: resource.cursorKind,
      cursor_position: describeCursor(resource.cursor, resource.cursorKind),
      cursor_selection: resource.cursorSelection ?? null,
    })),
    files: snapshot.files,
    audit: auditJson(snapshot.audit),
    healthy: health.exitCode === ExitCode.ok,
    problems: health.problems,
    exit_code: health.exitCode,
  };
}

/**
 * The worst of several `status` codes, worst first: 1 (a warehouse cannot be read: nothing is
 * known), 7 (audit archive broken), 4 (last run failed or none), 5 (a resource's error),
 * 6 (lagging), 0. The same order as one warehouse's codes, with "cannot tell" first.
 */
export function worstStatusCode(codes: readonly number[]): number {
  const order: number[] = [
    ExitCode.failed,
    ExitCode.statusAuditBroken,
    ExitCode.statusLastRunFailed,
    ExitCode.statusResourceError,
    ExitCode.statusLagging,
    ExitCode.ok,
  ];
  const rank = (code: number) => (order.includes(code) ? order.indexOf(code) : 0);
  return codes.reduce((worst, code) => (rank(code) < rank(worst) ? code : worst), ExitCode.ok);
}

/** What a `status` code says, in a word or two (the fleet's table). */
const STATUS_WORDS: Record<number, string> = {
  [ExitCode.ok]: 'ok',
  [ExitCode.failed]: 'unreadable',
  [ExitCode.statusAuditBroken]: 'audit broken',
  [ExitCode.statusLastRunFailed]: 'run failed',
  [ExitCode.statusResourceError]: 'errors',
  [ExitCode.statusLagging]: 'lagging',
};

/**
 * `status` of a `teams:` configuration without --team (or with --team all): one line per team
 * (its health, last success, the largest lag of its resources, resources with an error, why),
 * and the worst team's code. A warehouse that cannot be read is that team's line, not the end.
 */
async function fleetStatus(
  context: CommandContext,
  teams: readonly TeamSetup[],
  options: { json?: boolean; maxLagSeconds: number | undefined },
): Promise<number> {
  const rows = await Promise.all(
    teams.map(async (team) => {
      try {
        return { team, snapshot: await readStatus(team.config, options.maxLagSeconds) };
      } catch (error) {
        return { team, error: describeError(error) };
      }
    }),
  );
  const codeOf = (row: (typeof rows)[number]) =>
    row.snapshot ? row.snapshot.health.exitCode : ExitCode.failed;
  const exitCode = worstStatusCode(rows.map(codeOf));
  if (options.json) {
    context.output.out(
      JSON.stringify(
        {
          teams: rows.map((row) =>
            row.snapshot
              ? { team: row.team.name, ...statusJson(row.snapshot) }
              : {
                  team: row.team.name,
                  healthy: false,
                  problems: [row.error],
                  exit_code: ExitCode.failed,
                },
          ),
          healthy: exitCode === ExitCode.ok,
          exit_code: exitCode,
        },
        null,
        2,
      ),
    );
    return exitCode;
  }
  const now = Date.now();
  context.output.out(
    formatTable(
      ['team', 'health', 'last success', 'lag', 'errors', 'why'],
      rows.map((row) => {
        if (!row.snapshot) {
          return [
            row.team.name,
            STATUS_WORDS[ExitCode.failed]!,
            '-',
            '-',
            '-',
            shorten(row.error!, 60),
          ];
        }
        const { health, resources, lastSuccess } = row.snapshot;
        const lags = resources
          .filter((resource) => !resource.excludedAt)
          .map((resource) => lagSeconds(resource, now));
        const lag =
          lags.length === 0 || lags.includes(null) ? null : Math.max(...(lags as number[]));
        return [
          row.team.name,
          STATUS_WORDS[health.exitCode] ?? String(health.exitCode),
          formatAgo(lastSuccess?.finishedAt, now),
          lag === null ? '-' : formatSpan(lag * 1000),
          resources.filter((resource) => resource.lastError !== null).length,
          shorten(health.problems.join('; '), 60),
        ];
      }),
    ),
  );
  const unwell = rows.filter((row) => codeOf(row) !== ExitCode.ok).map((row) => row.team.name);
  context.output.out('');
  context.output.out(
    unwell.length === 0
      ? `Teams: ${rows.length}, every one healthy.`
      : `Teams: ${rows.length}, ${unwell.length} not healthy (${unwell.join(', ')}); \`ocs-sync status --team NAME\` shows one.`,
  );
  return exitCode;
}

/** One line: on or off, the chain's length, the last checkpoint, the last verify. */
export function formatAudit(audit: AuditSummary, now: number): string {
  if (!audit.enabled) return 'off';
  const parts = [`on (${audit.entries} entries)`];
  const checkpoint = audit.lastCheckpoint;
  parts.push(
    checkpoint
      ? `last checkpoint: run ${checkpoint.run ?? '-'} at entry ${checkpoint.seq}, ${formatAgo(checkpoint.time, now)}, key ${keyId(checkpoint.key)}`
      : 'no checkpoint yet (audit.signing_key_file)',
  );
  const verification = audit.lastVerification;
  parts.push(
    verification
      ? verification.intact === true
        ? `last verify: intact, ${formatAgo(String(verification.at), now)}`
        : 'last verify: BROKEN (see Health)'
      : 'never verified (ocs-sync audit verify)',
  );
  return parts.join('; ');
}

function auditJson(audit: AuditSummary): Record<string, unknown> {
  const checkpoint = audit.lastCheckpoint;
  return {
    enabled: audit.enabled,
    since: audit.since,
    entries: audit.entries,
    last_checkpoint: checkpoint
      ? {
          run: checkpoint.run,
          seq: checkpoint.seq,
          head: checkpoint.head,
          time: checkpoint.time,
          key: keyId(checkpoint.key),
        }
      : null,
    last_verify: audit.lastVerification,
  };
}

/** The choice as `status --json` and `runs --json` write it. */
export function choiceJson(choice: ChatbotChoiceRecord | null | undefined): unknown {
  if (!choice) return null;
  return {
    selection_key: choice.key,
    chatbots: choice.chatbots.map((chatbot) => ({
      public_id: chatbot.publicId,
      name: chatbot.name,
    })),
  };
}

function runJson(run: RunRecord | undefined): Record<string, unknown> | null {
  if (!run) return null;
  return {
    id: run.id,
    kind: run.kind,
    status: run.status,
    started_at: run.startedAt,
    finished_at: run.finishedAt,
    duration_seconds: run.durationMs === null ? null : run.durationMs / 1000,
    rows: run.rows,
    pages: run.pages,
    requests: run.requests,
    schema_checksum: run.schemaChecksum,
    error: run.error,
    selection_key: run.selectionKey,
  };
}
