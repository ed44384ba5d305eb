/** Times and durations as people read them. Pure. */
import { printable } from '../printable.js';

/** "45s", "12m", "3h", "2d": a span, rounded to its largest sensible unit. */
export function formatSpan(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

/** "3m ago", "never", "in 2m" (a clock ahead of ours). */
export function formatAgo(iso: string | null | undefined, now: number): string {
  if (!iso) return 'never';
  const at = Date.parse(iso);
  // Not a time (stored text edited by hand, or from the server): shown escaped and short.
  if (!Number.isFinite(at)) return printable(iso, { max: 40 });
  const ago = now - at;
  return ago < -1000 ? `in ${formatSpan(-ago)}` : `${formatSpan(ago)} ago`;
}

/** "850 ms", "4.2 s", "3m 05s": how long something took. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)}m ${String(seconds % 60).padStart(2, '0')}s`;
}
