/**
 * The head of a page body: the real server writes `{"cursor": …, "has_more": …, "results": [`
 * (REFERENCE.md, Paging; real-capture/pages), so the next page's cursor is known from the first
 * bytes, long before the body has arrived and been parsed. The walk sends the next request from
 * it (the early cursor); the full parse then has the last word (src/sync/read-ahead.ts).
 *
 * Pure and incremental: fed the body's chunks, it answers once, either the head or "not this
 * shape" (another key first, a bare array, a value of another type, a head past HEAD_BYTES):
 * then the walk falls back to sending the next request after the full parse.
 */

import type { PageHead } from '../interfaces.js';

/**
 * The most of a body read for its head. A real head is under 200 bytes; a longer one (a huge
 * cursor from a hostile server) is left to the full parse. Each chunk rescans what came so far,
 * so a server trickling a byte at a time costs at most HEAD_BYTES² / 2 bytes of scanning a page.
 */
export const HEAD_BYTES = 4 * 1024;

type Scan = { head: PageHead } | 'not-a-head' | 'need-more';

export class PageHeadReader {
  private readonly chunks: Uint8Array[] = [];
  private bytes = 0;
  private decided = false;

  /**
   * Feeds the next chunk. Returns the head once it is complete, 'not-a-head' once the body shows
   * it does not start that way, undefined while undecided or after either answer was given.
   */
  push(chunk: Uint8Array): PageHead | 'not-a-head' | undefined {
    if (this.decided) return undefined;
    const room = HEAD_BYTES - this.bytes;
    this.chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
    this.bytes += Math.min(chunk.length, room);
    // A multi-byte character cut at the end decodes as U+FFFD there, past anything complete.
    const scan = scanHead(Buffer.concat(this.chunks, this.bytes).toString('utf8'));
    if (scan === 'need-more' && this.bytes < HEAD_BYTES) return undefined;
    this.decided = true;
    this.chunks.length = 0;
    return typeof scan === 'object' ? scan.head : 'not-a-head';
  }
}

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

/** Reads `{"cursor": <string|null>, "has_more": <bool>,` (the two keys in either order). */
export function scanHead(text: string): Scan {
  let at = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const skipWhitespace = () => {
    while (at < text.length && WHITESPACE.has(text[at]!)) at += 1;
  };
  skipWhitespace();
  if (at >= text.length) return 'need-more';
  if (text[at] !== '{') return 'not-a-head';
  at += 1;
  let cursor: string | null | undefined;
  let hasMore: boolean | undefined;
  while (cursor === undefined || hasMore === undefined) {
    skipWhitespace();
    const key = readString(text, at);
    if (typeof key !== 'object') return key;
    at = key.end;
    skipWhitespace();
    if (at >= text.length) return 'need-more';
    if (text[at] !== ':') return 'not-a-head';
    at += 1;
    skipWhitespace();
    if (key.value === 'cursor' && cursor === undefined) {
      if (text.startsWith('null', at) || 'null'.startsWith(text.slice(at))) {
        if (at + 4 > text.length) return 'need-more';
        cursor = null;
        at += 4;
      } else {
        const value = readString(text, at);
        if (typeof value !== 'object') return value;
        cursor = value.value === '' ? null : value.value;
        at = value.end;
      }
    } else if (key.value === 'has_more' && hasMore === undefined) {
      const literal = ['true', 'false'].find(
        (word) => text.startsWith(word, at) || word.startsWith(text.slice(at)),
      );
      if (literal === undefined) return 'not-a-head';
      if (at + literal.length > text.length) return 'need-more';
      hasMore = literal === 'true';
      at += literal.length;
    } else {
      return 'not-a-head';
    }
    skipWhitespace();
    if (at >= text.length) return 'need-more';
    // A page goes on with `results`; an object that ends here is no page (the full parse says so).
    if (text[at] !== ',') return 'not-a-head';
    at += 1;
  }
  return { head: { cursor, hasMore } };
}

/** A JSON string starting at `at` (escapes decoded by JSON.parse itself). */
function readString(
  text: string,
  at: number,
): { value: string; end: number } | Exclude<Scan, object> {
  if (at >= text.length) return 'need-more';
  if (text[at] !== '"') return 'not-a-head';
  let end = at + 1;
  for (;;) {
    if (end >= text.length) return 'need-more';
    const char = text[end];
    if (char === '\\') end += 2;
    else if (char === '"') break;
    else end += 1;
  }
  try {
    return { value: JSON.parse(text.slice(at, end + 1)) as string, end: end + 1 };
  } catch {
    return 'not-a-head';
  }
}
