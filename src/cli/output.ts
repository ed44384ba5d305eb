/** Plain-text output for people: aligned tables and run summaries. */
import type { ResourceStatus } from '../interfaces.js';
import { STORED_TEXT_LENGTH, printable } from '../printable.js';
import { EXCLUDED_BY_CHOICE, describeChoice } from '../sync/chatbot-choice.js';
import type { SyncReport } from '../sync/engine.js';
import { namesShown } from '../sync/refused-names.js';
import { formatFilesSummary } from './files-output.js';
import type { RunRecord } from '../warehouse/reader.js';
import { formatAgo, formatDuration } from './time-text.js';

export interface Output {
  out(line: string): void;
  err(line: string): void;
}

export const processOutput: Output = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/**
 * Every line a command prints goes through this (main wraps its output in it): whatever a message
 * quotes from the server, no control character reaches the terminal raw. Line breaks stay; the
 * escapes are JSON's own, so `--json` output means the same.
 */
export function terminalSafe(output: Output): Output {
  const safe = (line: string) => printable(line, { max: Infinity, keepNewlines: true });
  return { out: (line) => output.out(safe(line)), err: (line) => output.err(safe(line)) };
}

/** The longest cell a table shows; `--wide` errors were cut when stored, at about twice this. */
const CELL_LENGTH = 1000;

export function formatTable(headers: string[], rows: Array<Array<string | number>>): string {
  // Escaped before measuring, so an escaped cell keeps its column aligned.
  const cells = [
    headers,
    ...rows.map((row) => row.map((cell) => printable(String(cell), { max: CELL_LENGTH }))),
  ];
  const widths = headers.map((_, column) =>
    Math.max(...cells.map((row) => (row[column] ?? '').length)),
  );
  const numeric = headers.map((_, column) => rows.every((row) => typeof row[column] === 'number'));
  const line = (row: string[]) =>
    row
      .map((cell, column) =>
        numeric[column] ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!),
      )
      .join('  ')
      .trimEnd();
  return [
    line(headers),
    line(widths.map((width) => '-'.repeat(width))),
    ...cells.slice(1).map(line),
  ].join('\n');
}

/**
 * Statuses in the last manifest's order (team first); resources the manifest no longer lists
 * follow, alphabetically. A missing or unreadable order leaves the alphabetical order.
 */
export function inManifestOrder(
  statuses: ResourceStatus[],
  recordedOrder: string | undefined,
): ResourceStatus[] {
  let order: unknown;
  try {
    order = recordedOrder === undefined ? [] : JSON.parse(recordedOrder);
  } catch {
    order = [];
  }
  const positions = new Map(
    (Array.isArray(order) ? order : []).map((name, index) => [String(name), index]),
  );
  const position = (status: ResourceStatus) => positions.get(status.resource) ?? positions.size;
  return [...statuses].sort(
    (a, b) => position(a) - position(b) || a.resource.localeCompare(b.resource),
  );
}

/** Terminal width the default status table fits. */
export const STATUS_TABLE_WIDTH = 100;

/**
 * The per-resource table. Default: what fits 100 columns (relative times, errors shortened);
 * `wide` adds the decoded cursor, the last full refresh and whole errors.
 */
export function formatStatusTable(
  statuses: ResourceStatus[],
  options: { now?: number; wide?: boolean } = {},
): string {
  const now = options.now ?? Date.now();
  // Only under a chatbot choice: the column rows leave when the choice stops serving them.
  const scoped = statuses.some((status) => status.rowsOutOfScope || status.excludedAt);
  const base = statuses.map((status) => [
    status.resource,
    status.rows,
    status.rowsDeleted,
    ...(scoped ? [status.rowsOutOfScope ?? 0] : []),
    formatAgo(status.lastSuccessAt, now),
    status.newestUpdatedAt ? formatAgo(status.newestUpdatedAt, now) : '-',
  ]);
  const headers = [
    'resource',
    'rows',
    'deleted',
    ...(scoped ? ['out of scope'] : []),
    'last success',
    'newest row',
  ];
  const note = (status: ResourceStatus) =>
    status.excludedAt ? EXCLUDED_BY_CHOICE : withoutName(status.resource, status.lastError ?? '');
  if (options.wide) {
    return formatTable(
      [...headers, 'last full refresh', 'cursor', 'last error'],
      statuses.map((status, index) => [
        ...base[index]!,
        formatAgo(status.lastFullRefreshAt, now),
        describeCursor(status.cursor, status.cursorKind),
        oneLine(note(status)),
      ]),
    );
  }
  // The error column gets what the others leave of the 100 columns.
  const used = headers.map((header, column) =>
    Math.max(header.length, ...base.map((row) => String(row[column]).length)),
  );
  const room = STATUS_TABLE_WIDTH - used.reduce((sum, width) => sum + width + 2, 0);
  return formatTable(
    [...headers, 'last error'],
    statuses.map((status, index) => [
      ...base[index]!,
      // The exclusion is said whole: it is short, and cut it would read as an error.
      status.excludedAt ? EXCLUDED_BY_CHOICE : shorten(firstLine(note(status)), Math.max(10, room)),
    ]),
  );
}

/** A cursor as a person reads it: the id it resumes after, or the time and id. */
export function describeCursor(cursor: string | null, kind: ResourceStatus['cursorKind']): string {
  if (cursor === null) return '-';
  if (kind === 'pk') return /^\d+$/.test(cursor) ? `after id ${cursor}` : shorten(cursor, 30);
  try {
    const decoded = JSON.parse(Buffer.from(cursor, 'base64').toString('utf8')) as {
      updated_at?: unknown;
      id?: unknown;
    };
    if (typeof decoded.updated_at === 'string') {
      const id = decoded.id === undefined ? '' : ` id ${String(decoded.id)}`;
      return printable(`after ${decoded.updated_at}${id}`, { max: 80 });
    }
  } catch {
    // Not the base64 JSON we know: show it as it is.
  }
  return shorten(cursor, 30);
}

/** "#12 incremental failed 5m ago, took 1.2 s, 0 rows: The server refused…" */
export function formatRunLine(
  run: RunRecord | undefined,
  now: number,
  options: { errorWidth?: number } = {},
): string {
  if (!run) return 'none';
  const parts = [
    `#${run.id} ${run.kind} ${run.status} ${formatAgo(run.startedAt, now)}`,
    run.finishedAt ? `took ${formatDuration(run.durationMs)}` : runningText(run, 'still running'),
    `${run.rows} rows`,
  ];
  const error = run.error
    ? `: ${options.errorWidth ? shorten(firstLine(run.error), options.errorWidth) : printable(run.error, { max: STORED_TEXT_LENGTH, keepNewlines: true })}`
    : '';
  return `${parts.join(', ')}${error}`;
}

/** How long a run took, for one that has not recorded its end: still going, or dead. */
export function runningText(run: RunRecord, stillRunning: string): string {
  return run.status === 'running' ? stillRunning : 'end not recorded';
}

/** "participants skipped: …" in the participants row says its name twice. */
function withoutName(resource: string, text: string): string {
  return text.startsWith(`${resource} `) ? text.slice(resource.length + 1) : text;
}

export function firstLine(text: string): string {
  return text.split('\n')[0] ?? '';
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * The end-of-run summary: one line for the run, one per resource that did not go well, each
 * said once, and every distinct hint once at the end (not repeated per resource).
 */
export function formatSyncSummary(report: SyncReport): string {
  const lines = [
    `Run ${report.runId} (${report.kind}): ${report.status}, ${report.rows} rows in ${report.pages} pages, ` +
      `${report.requests} requests, ${(report.durationMs / 1000).toFixed(1)} s`,
  ];
  const hints = new Set<string>();
  const say = (label: string, text: string) => {
    const [message, hint] = splitHint(text);
    lines.push(`  ${label}: ${message}`);
    if (hint) hints.add(hint);
  };
  if (report.previousSchemaChecksum && report.previousSchemaChecksum !== report.schemaChecksum) {
    lines.push(
      `  Schema checksum changed since the last run; ${report.schemaChanges.length} change(s) applied.`,
    );
  }
  if (report.choice) lines.push(`  Chatbot choice: ${describeChoice(report.choice)}`);
  const leaving = report.resources.filter((resource) => resource.outOfScope);
  if (leaving.length > 0) {
    const total = leaving.reduce((sum, resource) => sum + (resource.outOfScope ?? 0), 0);
    lines.push(
      `  Out of scope: ${total} row(s) of ${leaving.length} resource(s) the choice no longer ` +
        'serves, kept and marked (not deleted); `ocs-sync status` counts them per resource.',
    );
  }
  if (report.files) lines.push(...formatFilesSummary(report.files));
  if (report.audit) lines.push(formatAuditOutcome(report.audit));
  for (const problem of report.problems) say('problem', problem);
  // Resources that stopped for the same reason share one line: a thing is said once.
  const byReason = new Map<string, string[]>();
  for (const resource of report.resources) {
    if (resource.status === 'ok') continue;
    // Errors often start with the resource's name and what happened ("x skipped: …").
    const text = resource.error ?? resource.status;
    const prefix = `${resource.resource} ${resource.status}: `;
    const key = `${resource.status}\n${text.startsWith(prefix) ? text.slice(prefix.length) : text}`;
    byReason.set(key, [...(byReason.get(key) ?? []), resource.resource]);
  }
  for (const [key, names] of byReason) {
    const split = key.indexOf('\n');
    say(`${key.slice(0, split)} ${namesShown(names).join(', ')}`, key.slice(split + 1));
  }
  for (const resource of report.resources) {
    for (const warning of resource.warnings) say(`warning ${resource.resource}`, warning);
    if (resource.valuesAltered > 0) {
      lines.push(
        `  note ${resource.resource}: ${resource.valuesAltered} value(s) had NUL characters removed to fit the database.`,
      );
    }
  }
  for (const hint of hints) lines.push(`hint: ${hint}`);
  return lines.join('\n');
}

function formatAuditOutcome(audit: NonNullable<SyncReport['audit']>): string {
  if (audit.error !== undefined) {
    return `  Audit: the checkpoint was not written: ${audit.error.replace(/\n\s*/g, ' ')}`;
  }
  if (!audit.checkpoint) return '  Audit: the chain is empty; no checkpoint.';
  const { run, seq, head } = audit.checkpoint;
  const written = /^s3:\/\//i.test(audit.checkpointFile ?? '')
    ? `${audit.appended ?? 0} object(s) uploaded to`
    : `${audit.appended ?? 0} line(s) appended to`;
  return `  Audit: checkpoint of run ${run ?? '-'} at entry ${seq} (head ${head.slice(0, 12)}…) signed, ${written} ${audit.checkpointFile}`;
}

/** "message\n  hint: next step" (describeError's form) -> [message, hint]. */
function splitHint(text: string): [string, string | undefined] {
  const at = text.indexOf('\n  hint: ');
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + '\n  hint: '.length)];
}

/** One line of at most `max` characters, control characters escaped. */
export function shorten(text: string, max: number): string {
  const flat = printable(text.replace(/\s+/g, ' '), { max: Infinity });
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
