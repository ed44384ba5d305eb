/**
 * Where a SQLite warehouse's pages go, on whichever thread hands them over: each is encoded
 * there (page-writes.ts) and committed by a committer (page-committer.ts), on the writer thread
 * for a file. The warehouse writes its own pages through one; the sync's page thread opens one
 * of its own on a port to the same writer thread (openSqlitePageSink), so its pages never pass
 * through the sync's thread. Loads no kysely: the page thread starts with only what it needs.
 */
import type { MessagePort } from 'node:worker_threads';
import type { PageSink, PageSinkSetup, PageWrite, PageWriteResult } from '../../interfaces.js';
import { nowSortableUtc } from '../../timestamps.js';
import { FailedWalks } from '../commit-order.js';
import { assertSafeTableName } from '../identifiers.js';
import { PortCommitter, type PageCommitter } from './page-committer.js';
import { encodePage } from './page-encoding.js';

export interface SqlitePageSinkSetup extends PageSinkSetup {
  readonly dialect: 'sqlite';
  description: string;
  /** The warehouse keeps an audit chain: every page keeps history, each version chained. */
  audit: boolean;
  /** A port to the warehouse's writer thread (WriterThreadCommitter.attach). */
  port: MessagePort;
}

export class SqlitePageSink implements PageSink {
  /** Walks with a page that failed before reaching the committer (a value that does not fit). */
  private readonly failedWalks = new FailedWalks();

  constructor(
    private readonly committer: PageCommitter,
    private readonly audit: () => boolean,
  ) {}

  writePage(page: PageWrite): Promise<PageWriteResult> {
    let committed: Promise<number>;
    try {
      this.failedWalks.assertOpen(page.walk, page.resource);
      assertSafeTableName(page.resource);
      const audit = this.audit();
      // With the chain on, every row has versions: the chain must hold each one.
      const encoded = encodePage(
        audit ? { ...page, history: true } : page,
        nowSortableUtc(),
        audit,
      );
      committed = this.committer.commit(encoded);
    } catch (error) {
      this.failedWalks.fail(page.walk);
      return Promise.reject(error);
    }
    return committed.then((versionsWritten) => ({
      rowsWritten: page.rows.length,
      valuesAltered: 0,
      versionsWritten,
    }));
  }

  forget(): void {
    this.committer.forget();
  }

  close(): Promise<void> {
    return this.committer.close();
  }
}

/** The page thread's sink: pages committed through its port to the writer thread. */
export function openSqlitePageSink(setup: SqlitePageSinkSetup): PageSink {
  return new SqlitePageSink(new PortCommitter(setup.port, setup.description), () => setup.audit);
}
