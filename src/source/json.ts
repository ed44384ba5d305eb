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
  if (typeof parsed === 'number') return isPastSafeInteger(parsed);
  if (typeof parsed !== 'object' || parsed === null) return false;
  // An explicit stack, not recursion: JSON.parse accepts nesting deeper than the call stack. Only
  // objects and arrays go on it; numbers are checked where they are found, strings skipped.
  const pending: object[] = [parsed];
  while (pending.length > 0) {
    const container = pending.pop()!;
    if (Array.isArray(container)) {
      for (let index = 0; index < container.length; index += 1) {
        const item: unknown = container[index];
        if (typeof item === 'number') {
          if (isPastSafeInteger(item)) return true;
        } else if (typeof item === 'object' && item !== null) pending.push(item);
      }
    } else {
      for (const key in container) {
        const item: unknown = (container as Record<string, unknown>)[key];
        if (typeof item === 'number') {
          if (isPastSafeInteger(item)) return true;
        } else if (typeof item === 'object' && item !== null) pending.push(item);
      }
    }
  }
  return false;
}

function isPastSafeInteger(value: number): boolean {
  return value > Number.MAX_SAFE_INTEGER || value < -Number.MAX_SAFE_INTEGER;
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
