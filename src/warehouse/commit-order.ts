/**
 * The rule that lets the sync hand a page to the warehouse before the page ahead of it has
 * committed: pages of one walk (PageWrite.walk) commit in the order they were handed over, and
 * none after a page of that walk failed. Otherwise a later page's cursor would move past rows
 * that were never stored. Each dialect applies it where its commits run (the SQLite writer
 * thread, PostgreSQL's chain of page transactions).
 */
import { WarehouseError } from '../errors.js';

/** Walks are short-lived; a few dozen failed ones is more than can still have pages coming. */
const REMEMBERED_FAILURES = 64;

export class FailedWalks {
  private readonly failed = new Set<string>();

  /** Throws for a page of a walk an earlier page of which failed. */
  assertOpen(walk: string | undefined, resource: string): void {
    if (walk !== undefined && this.failed.has(walk)) throw notWrittenError(resource);
  }

  fail(walk: string | undefined): void {
    if (walk === undefined) return;
    this.failed.add(walk);
    if (this.failed.size > REMEMBERED_FAILURES) {
      this.failed.delete(this.failed.values().next().value!);
    }
  }
}

export function notWrittenError(resource: string): WarehouseError {
  return new WarehouseError(
    `A page of ${resource} was not written because an earlier page of ${resource} failed; its cursor stays before both.`,
  );
}
