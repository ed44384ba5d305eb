/** Plain-text output for people: aligned tables and run summaries. */
import type { ResourceStatus } from '../interfaces.js';
import type { SyncReport } from '../sync/engine.js';
import { formatFilesSummary } from './files-output.js';

export interface Output {
  out(line: string): void;
  err(line: string): void;
}

export const processOutput: Output = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

export function formatTable(headers: string[], rows: Array<Array<string | number>>): string {
  const cells = [headers, ...rows.map((row) => row.map(String))];
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

export function formatStatusTable(statuses: ResourceStatus[], now = Date.now()): string {
  return formatTable(
    [
      'resource',
      'rows',
      'deleted',
      'lag',
      'last success',
      'last full refresh',
      'cursor',
      'last error',
    ],
    statuses.map((status) => [
      status.resource,
      status.rows,
      status.rowsDeleted,
      status.newestUpdatedAt ? formatAge(now - Date.parse(status.newestUpdatedAt)) : '-',
      status.lastSuccessAt ?? 'never',
      status.lastFullRefreshAt ?? 'never',
      shorten(status.cursor ?? '-', 24),
      shorten(status.lastError ?? '', 60),
    ]),
  );
}

export function formatSyncSummary(report: SyncReport): string {
  const lines = [
    `Run ${report.runId} (${report.kind}): ${report.status}, ${report.rows} rows in ${report.pages} pages, ` +
      `${report.requests} requests, ${(report.durationMs / 1000).toFixed(1)} s`,
  ];
  if (report.previousSchemaChecksum && report.previousSchemaChecksum !== report.schemaChecksum) {
    lines.push(
      `Schema checksum changed since the last run; ${report.schemaChanges.length} change(s) applied.`,
    );
  }
  if (report.files) lines.push(...formatFilesSummary(report.files));
  for (const problem of report.problems) lines.push(`problem: ${problem}`);
  // Resources that stopped for the same reason share one line: a thing is said once.
  const byReason = new Map<string, string[]>();
  for (const resource of report.resources) {
    if (resource.status === 'ok') continue;
    const key = `${resource.status}: ${resource.error ?? ''}`;
    byReason.set(key, [...(byReason.get(key) ?? []), resource.resource]);
  }
  for (const [key, names] of byReason) {
    const [status, error] = [key.slice(0, key.indexOf(':')), key.slice(key.indexOf(':') + 2)];
    const named = names.length === 1 && error.includes(names[0]!);
    lines.push(named ? key : `${status}: ${names.join(', ')}: ${error || status}`);
  }
  for (const resource of report.resources) {
    for (const warning of resource.warnings) lines.push(`warning: ${warning}`);
    if (resource.valuesAltered > 0) {
      lines.push(
        `note: ${resource.valuesAltered} value(s) of ${resource.resource} had NUL characters removed to fit the database.`,
      );
    }
  }
  return lines.join('\n');
}

function formatAge(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

function shorten(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ');
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
