import { parse as parseLossless } from 'lossless-json';
import { JsonTooDeepError } from './errors.js';

/**
 * How deep JSON may nest. The server cannot write deeper: Python's JSON encoder stops at its
 * recursion limit (1000). The exact parse and the code that walks values recurse, so a deeper
 * body from a broken or hostile server is refused here, before anything overflows the stack.
 */
export const MAX_JSON_DEPTH = 1000;

/**
 * Whether a parsed value holds a number JSON.parse may have rounded, and that it nests at most
 * MAX_JSON_DEPTH levels (else JsonTooDeepError). An integer literal is parsed exactly up to
 * 2^53 - 1 in magnitude, and any literal past that parses to at least 2^53, so "no number beyond
 * MAX_SAFE_INTEGER" proves every integer came through exact. Walking the parsed page costs about
 * a third of scanning its text for long digit runs (the check this replaced), which was a quarter
 * of the parse time on every page. A hit (an id past 2^53, or a float as large) only costs a
 * second, exact parse.
 */
function mayHaveRounded(parsed: unknown): boolean {
  if (typeof parsed === 'number') return isPastSafeInteger(parsed);
  if (typeof parsed !== 'object' || parsed === null) return false;
  // An explicit stack, not recursion: JSON.parse accepts nesting deeper than the call stack. Only
  // objects and arrays go on it (with their depth); numbers are checked where they are found.
  const pending: object[] = [parsed];
  const depths: number[] = [1];
  let rounded = false;
  while (pending.length > 0) {
    const container = pending.pop()!;
    const depth = depths.pop()!;
    if (depth > MAX_JSON_DEPTH) throw new JsonTooDeepError(MAX_JSON_DEPTH);
    if (Array.isArray(container)) {
      for (let index = 0; index < container.length; index += 1) {
        const item: unknown = container[index];
        if (typeof item === 'number') {
          if (isPastSafeInteger(item)) rounded = true;
        } else if (typeof item === 'object' && item !== null) {
          pending.push(item);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const key in container) {
        const item: unknown = (container as Record<string, unknown>)[key];
        if (typeof item === 'number') {
          if (isPastSafeInteger(item)) rounded = true;
        } else if (typeof item === 'object' && item !== null) {
          pending.push(item);
          depths.push(depth + 1);
        }
      }
    }
  }
  return rounded;
}

function isPastSafeInteger(value: number): boolean {
  return value > Number.MAX_SAFE_INTEGER || value < -Number.MAX_SAFE_INTEGER;
}

function exactNumber(text: string): number | bigint {
  const value = Number(text);
  if (Number.isSafeInteger(value) || !/^-?\d+$/.test(text)) return value;
  return BigInt(text);
}

/**
 * JSON.parse that keeps integers beyond 2^53 exact, as bigint. Throws SyntaxError for text that
 * is not JSON, JsonTooDeepError for JSON nested deeper than MAX_JSON_DEPTH.
 */
export function parseJsonExact(text: string): unknown {
  const parsed: unknown = JSON.parse(text);
  if (!mayHaveRounded(parsed)) return parsed;
  return parseLossless(text, null, exactNumber);
}
