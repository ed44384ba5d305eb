/** Plain-text lines about file contents, for the run summary, `status` and `files verify`. */
import type { FileTotals } from '../interfaces.js';
import type { FilesReport } from '../files/sync-files.js';

export function formatFileTotals(totals: FileTotals, dir: string | undefined): string {
  // The folder on a line of its own: a long path must not push the counts past a narrow terminal.
  return (
    `Files: ${totals.ok} ok, ${totals.missing} missing (404), ${totals.failed} failed; ` +
    `${totals.blobs} blob${totals.blobs === 1 ? '' : 's'}, ${formatBytes(totals.bytes)} stored` +
    (dir === undefined ? '' : `\n       in ${dir}`)
  );
}

export function formatFilesSummary(report: FilesReport): string[] {
  // Failures are named only when there are some, so a clean summary never says "failed".
  const failed = (count: number) => (count > 0 ? `, ${count} failed` : '');
  const lines = [
    `Files: ${report.fetched} fetched (${formatBytes(report.bytesFetched)}), ` +
      `${report.missing} missing (404)${failed(report.failed)}, ${report.unchanged} unchanged; ` +
      `stored: ${report.totals.ok} ok, ${report.totals.missing} missing${failed(report.totals.failed)}, ` +
      `${formatBytes(report.totals.bytes)} in ${report.dir}`,
  ];
  for (const failure of report.failures) {
    lines.push(`failed: file ${failure.fileId}: ${failure.error}`);
  }
  if (report.error !== undefined) lines.push(`problem: ${report.error}`);
  return lines;
}

export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(1)} ${units[unit]}`;
}
