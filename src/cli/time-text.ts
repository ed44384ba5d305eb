/** Times and durations as people read them, and durations as people write them. Pure. */
import { UsageError } from '../errors.js';

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
  if (!Number.isFinite(at)) return iso;
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

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** "90s", "15m", "2h", "1d", "1h30m" -> seconds. UsageError naming the flag otherwise. */
export function parseDuration(text: string, flag: string): number {
  const trimmed = text.trim().toLowerCase();
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)([smhdw])/g)];
  const total = parts.reduce(
    (sum, [, amount, unit]) => sum + Number(amount) * UNIT_SECONDS[unit!]!,
    0,
  );
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== trimmed || total <= 0) {
    throw new UsageError(
      `${flag} must be a duration such as 90s, 15m, 2h, 1d or 1h30m; got ${JSON.stringify(text)}.`,
    );
  }
  return total;
}
