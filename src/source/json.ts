import { parse as parseLossless } from 'lossless-json';

/**
 * Whether a parsed value holds a number JSON.parse may have rounded. An integer literal is parsed
 * exactly up to 2^53 - 1 in magnitude, and any literal past that parses to at least 2^53, so
 * "no number beyond MAX_SAFE_INTEGER" proves every integer came through exact. Walking the parsed
 * page costs about a third of scanning its text for long digit runs (the check this replaced),
 * which was a quarter of the parse time on every page. A hit (an id past 2^53, or a float as
 * large) only costs a second, exact parse.
 */
function mayHaveRounded(parsed: unknown): boolean {
  // An explicit stack, not recursion: JSON.parse accepts nesting deeper than the call stack.
  const pending: unknown[] = [parsed];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'number') {
      if (value > Number.MAX_SAFE_INTEGER || value < -Number.MAX_SAFE_INTEGER) return true;
    } else if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index += 1) pending.push(value[index]);
    } else if (typeof value === 'object' && value !== null) {
      for (const key in value) pending.push((value as Record<string, unknown>)[key]);
    }
  }
  return false;
}

function exactNumber(text: string): number | bigint {
  const value = Number(text);
  if (Number.isSafeInteger(value) || !/^-?\d+$/.test(text)) return value;
  return BigInt(text);
}

/** JSON.parse that keeps integers beyond 2^53 exact, as bigint. Throws SyntaxError. */
export function parseJsonExact(text: string): unknown {
  const parsed: unknown = JSON.parse(text);
  if (!mayHaveRounded(parsed)) return parsed;
  return parseLossless(text, null, exactNumber);
}
