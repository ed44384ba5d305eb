/** Values of command-line options that commander leaves as text, checked with a clear message. */
import { UsageError } from '../errors.js';

export function parseNumberOption(
  text: string,
  flag: string,
  range: { min: number; max: number; integer?: boolean },
): number {
  const value = Number(text);
  const integerOk = !range.integer || Number.isInteger(value);
  if (
    text.trim() === '' ||
    !Number.isFinite(value) ||
    !integerOk ||
    value < range.min ||
    value > range.max
  ) {
    throw new UsageError(
      `${flag} must be ${range.integer ? 'a whole number' : 'a number'} from ${range.min} to ${range.max}, got ${text}.`,
    );
  }
  return value;
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
