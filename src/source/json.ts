import { parse as parseLossless } from 'lossless-json';

/**
 * An integer literal of 16+ digits outside a string could exceed 2^53. Ids are 64-bit
 * (BigAutoField), so such bodies take the exact (slower) parser; everything else takes JSON.parse.
 * A false positive (digits inside a string) only costs speed, never correctness.
 */
const MAYBE_LARGE_INTEGER = /[[:,]\s*-?\d{16,}\s*[,\]}]/;

function exactNumber(text: string): number | bigint {
  const value = Number(text);
  if (Number.isSafeInteger(value) || !/^-?\d+$/.test(text)) return value;
  return BigInt(text);
}

/** JSON.parse that keeps integers beyond 2^53 exact, as bigint. Throws SyntaxError. */
export function parseJsonExact(text: string): unknown {
  if (!MAYBE_LARGE_INTEGER.test(text)) return JSON.parse(text);
  return parseLossless(text, null, exactNumber);
}
