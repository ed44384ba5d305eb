/**
 * Recognising a sealed value by its shape (REFERENCE.md, Sealed fields): a base64 string whose
 * bytes are a JSON object with exactly the keys `k` and `v`, both strings. The server does not list
 * its sealed fields anywhere but in its OpenAPI descriptions, so the shape is what catches a sealed
 * value in a field the schema does not mark (a schema not served, or a server newer than it).
 */
import { decodeBase64Lenient } from './base64.js';

/** `{"k` in base64: every sealed envelope starts with it, so most plain strings cost one compare. */
const ENVELOPE_PREFIX = 'eyJ';
/** A wrapped 2048-bit key alone is 344 base64 characters; a whole envelope is longer still. */
const SHORTEST_ENVELOPE = 344;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The description the server's OpenAPI gives every sealed field. */
export const SEALED_FIELD_MARKER = "Sealed under the team's public key";

/** A cheap first test: false means certainly not a sealed value. */
export function mayBeSealedToken(value: string): boolean {
  return value.length >= SHORTEST_ENVELOPE && value.startsWith(ENVELOPE_PREFIX);
}

export function isSealedToken(value: unknown): value is string {
  if (typeof value !== 'string' || !mayBeSealedToken(value)) return false;
  const bytes = decodeBase64Lenient(value);
  if (bytes === undefined) return false;
  let envelope: unknown;
  try {
    envelope = JSON.parse(utf8.decode(bytes));
  } catch {
    return false;
  }
  if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) return false;
  const keys = Object.keys(envelope);
  const { k, v } = envelope as { k?: unknown; v?: unknown };
  return keys.length === 2 && typeof k === 'string' && typeof v === 'string';
}
