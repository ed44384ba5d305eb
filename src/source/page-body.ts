/**
 * A page body, from its bytes to a page: UTF-8 decoded (a leading BOM dropped), parsed with
 * 64-bit ids exact (src/json.ts), and checked to be a page of rows with integer ids. Pure, and
 * the same wherever it runs: on the thread that fetched the body (`HttpExportSource.page`) or on
 * the sync's page thread, which is handed the bytes (src/sync/pipeline/).
 */
import { BodyNotJsonError, JsonTooDeepError, ProtocolError } from '../errors.js';
import type { Page, Row } from '../interfaces.js';
import { MAX_JSON_DEPTH, parseJsonExact } from '../json.js';

/** UTF-8 text of a body, without a leading BOM. */
export function bodyText(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/**
 * A body's JSON (64-bit ids exact) and its text. Not JSON, or empty: BodyNotJsonError, unless it
 * is a `document`, whose body may be something else (the schema as YAML): then `body` is undefined.
 */
export function bodyJson(bytes: Uint8Array, document: boolean): { body: unknown; text: string } {
  const text = bodyText(bytes);
  let body: unknown;
  try {
    body = text === '' ? undefined : parseJsonExact(text);
  } catch (error) {
    if (error instanceof JsonTooDeepError) throw error;
    // V8 throws RangeError for nesting deeper than its stack: as deep as JsonTooDeepError.
    if (error instanceof RangeError) throw new JsonTooDeepError(MAX_JSON_DEPTH);
    if (!document) throw new BodyNotJsonError(bytes.byteLength);
  }
  if (body === undefined && !document) throw new BodyNotJsonError(bytes.byteLength);
  return { body, text };
}

/**
 * Parses a page body: BodyNotJsonError for text that is not JSON, JsonTooDeepError for JSON nested
 * past the limit, ProtocolError for JSON that is no page.
 */
export function decodePageBody(
  bytes: Uint8Array,
  resource: string,
  limit: number,
): { page: Page; text: string } {
  const { body, text } = bodyJson(bytes, false);
  return { page: parsePage(body, resource, limit), text };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Accept `{cursor, has_more, results}` or, as the interface document allows, a bare array. */
export function parsePage(body: unknown, resource: string, limit: number): Page {
  if (Array.isArray(body)) {
    return {
      rows: checkRows(body, resource),
      cursor: null,
      hasMore: body.length >= limit,
      bare: true,
    };
  }
  if (!isPlainObject(body) || !Array.isArray(body.results)) {
    throw new ProtocolError(`GET ${resource}/ did not answer with a page (no \`results\` list).`);
  }
  const cursor = typeof body.cursor === 'string' && body.cursor !== '' ? body.cursor : null;
  return {
    rows: checkRows(body.results, resource),
    cursor,
    hasMore: body.has_more === true,
    bare: false,
  };
}

function checkRows(rows: unknown[], resource: string): Row[] {
  for (const row of rows) {
    const id = isPlainObject(row) ? row.id : undefined;
    if (!(typeof id === 'bigint' || (typeof id === 'number' && Number.isInteger(id)))) {
      throw new ProtocolError(
        `A row of ${resource} has no integer \`id\`; the page was not stored.`,
      );
    }
  }
  return rows as Row[];
}
