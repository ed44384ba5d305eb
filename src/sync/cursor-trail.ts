/**
 * The cursors one walk has followed, so a server that leads back to any of them (A, B, A, …, not
 * only the same cursor twice in a row) stops that resource instead of looping forever. A walk of
 * millions of pages keeps one entry per page, so each cursor is kept as a 72-bit hash (12 base64
 * characters), whatever its length: memory is bounded per page even for a server that sends huge
 * cursors, and two different cursors of one walk share a hash with a chance below one in 10^9
 * for a million pages (if they ever did, the resource would stop with this error and the next run
 * would resume from its last committed page).
 */
import { createHash } from 'node:crypto';
import { ProtocolError } from '../errors.js';
import type { Page } from '../interfaces.js';
import { printable } from '../printable.js';

export class CursorTrail {
  /** Hash of each cursor followed -> the number of the page fetched with it (1 = the first). */
  private readonly followedAt = new Map<string, number>();
  private pages = 0;

  /** `start`: the cursor the walk's first request uses (null: from the beginning). */
  constructor(
    private readonly resource: string,
    start: string | null,
  ) {
    this.pages = 1;
    if (start !== null) this.followedAt.set(hashOf(start), 1);
  }

  /** Whether a request of this walk was already sent with `cursor` (a head naming it leads back). */
  followed(cursor: string): boolean {
    return this.followedAt.has(hashOf(cursor));
  }

  /**
   * The cursor the page just fetched hands out, which the next request will follow. Throws when
   * an earlier request of this walk already followed it.
   */
  follow(cursor: string): void {
    const hash = hashOf(cursor);
    const seenAt = this.followedAt.get(hash);
    const page = this.pages;
    if (seenAt !== undefined) {
      throw new ProtocolError(
        `GET ${this.resource}/ led back to a cursor this walk already followed: page ${page} handed out ` +
          `the cursor page ${seenAt} was fetched with (${printable(cursor, { max: 60 })}), a cycle of ` +
          `${page - seenAt + 1} page(s); stopping to avoid a loop. The pages before it are kept.`,
        { hint: 'The server paged wrongly; the next run resumes from the last stored page.' },
      );
    }
    this.pages += 1;
    this.followedAt.set(hash, this.pages);
  }
}

function hashOf(cursor: string): string {
  return createHash('sha256').update(cursor).digest('base64').slice(0, 12);
}

/**
 * The early cursor's guard: the next request left with the cursor a page's first bytes named
 * (src/source/page-head.ts), so the full parse must find the same `cursor` and `has_more`. A body
 * that says one thing first and another later (a key sent twice) stops the walk before this page
 * is stored: which of its two answers to trust is not ours to guess.
 */
export function checkPageHead(
  resource: string,
  pageNumber: number,
  page: Pick<Page, 'cursor' | 'hasMore' | 'head'>,
): void {
  const { head } = page;
  if (head === undefined || (head.cursor === page.cursor && head.hasMore === page.hasMore)) return;
  const describe = (cursor: string | null, hasMore: boolean) =>
    `cursor ${cursor === null ? 'null' : printable(cursor, { max: 120 })} and has_more ${hasMore}`;
  throw new ProtocolError(
    `GET ${resource}/ page ${pageNumber} began with ${describe(head.cursor, head.hasMore)} but its ` +
      `full body says ${describe(page.cursor, page.hasMore)}; stopping this resource. Page ` +
      `${pageNumber} was not stored; the pages before it are kept.`,
    {
      hint: 'The server (or a proxy) sent a page that contradicts itself; the next run resumes from the last stored page.',
    },
  );
}
