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
import { printable } from '../printable.js';

export class CursorTrail {
  /** Hash of each cursor followed -> the number of the page fetched with it (1 = the first). */
  private readonly followed = new Map<string, number>();
  private pages = 0;

  /** `start`: the cursor the walk's first request uses (null: from the beginning). */
  constructor(
    private readonly resource: string,
    start: string | null,
  ) {
    this.pages = 1;
    if (start !== null) this.followed.set(hashOf(start), 1);
  }

  /**
   * The cursor the page just fetched hands out, which the next request will follow. Throws when
   * an earlier request of this walk already followed it.
   */
  follow(cursor: string): void {
    const hash = hashOf(cursor);
    const seenAt = this.followed.get(hash);
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
    this.followed.set(hash, this.pages);
  }
}

function hashOf(cursor: string): string {
  return createHash('sha256').update(cursor).digest('base64').slice(0, 12);
}
