/**
 * A walk's pages from bytes to a page sink, wherever they run (the page thread, or the sync's
 * own thread for a warehouse only it can write): parse each body as it arrives and tell the
 * walk what the page says of the next one; when the walk says so, prepare the page (prepare.ts),
 * note the originals of values its columns give back differently, and hand it to the sink while
 * the page ahead of it commits. Pages of a walk are prepared one after another, in the order the
 * walk commits them.
 */
import type { Page, PageSink, Warehouse } from '../../interfaces.js';
import type { SealingKeys } from '../../sealing/policy.js';
import { decodePageBody } from '../../source/page-body.js';
import { pageJsonTexts } from '../../source/json-texts.js';
import { notWrittenError } from '../../warehouse/commit-order.js';
import { dialectRules } from '../../warehouse/open.js';
import { originalValuesOf } from '../../warehouse/original-values.js';
import { deriveCursor } from '../plan.js';
import type { CommitResult, PageSummary, WalkSetup } from './messages.js';
import { preparePage, type PageHost, type PageRules, type WalkColumns } from './prepare.js';

interface WalkWork {
  setup: WalkSetup;
  rules: PageRules;
  state: WalkColumns;
  host: PageHost;
  nextSeq: number;
  /** Parsed pages the walk has not committed yet, by seq, with their bodies' text. */
  parsed: Map<number, { page: Page; text: string }>;
  /** The last page's preparation: the next one starts after it. */
  preparing: Promise<unknown>;
  /** The last page handed to the sink, until a stage waits for it. */
  committing?: Promise<unknown>;
  /** A page failed before it reached the sink: no page after it is written. */
  failed: boolean;
}

/**
 * What the page stages serve, wherever they run: to the sync's thread over the bridge from the
 * page thread, or in the sync's own thread (pipeline.ts). A walk's host is not sent: each side
 * knows its own (servePageStages).
 */
export interface PageStagesApi {
  startWalk(setup: WalkSetup): void;
  parse: PageStages['parse'];
  commit: PageStages['commit'];
  drop: PageStages['drop'];
  endWalk: PageStages['endWalk'];
  close: PageStages['close'];
}

/** The stages' API, each walk's questions asked of `hostOf(walk)`. */
export function servePageStages(
  stages: PageStages,
  hostOf: (walk: string) => PageHost,
): PageStagesApi {
  return {
    startWalk: (setup) => stages.startWalk(setup, hostOf(setup.walk)),
    parse: (walk, bytes) => stages.parse(walk, bytes),
    commit: (walk, seq, cursor) => stages.commit(walk, seq, cursor),
    drop: (walk, seq) => stages.drop(walk, seq),
    endWalk: (walk) => stages.endWalk(walk),
    close: () => stages.close(),
  };
}

export class PageStages {
  private readonly walks = new Map<string, WalkWork>();

  constructor(
    private readonly sink: PageSink,
    private readonly dialect: Warehouse['dialect'],
    private readonly keys: SealingKeys,
  ) {}

  startWalk(setup: WalkSetup, host: PageHost): void {
    this.walks.set(setup.walk, {
      setup,
      rules: {
        resource: setup.resource,
        excludedFields: setup.excludedFields,
        policy: setup.policy,
        keys: this.keys,
        history: setup.history,
      },
      state: { columns: setup.columns, sealed: setup.sealed },
      host: this.forgettingShapes(host),
      nextSeq: 1,
      parsed: new Map(),
      preparing: Promise.resolve(),
      failed: false,
    });
  }

  /** Parses a page body of the walk; keeps the rows for commit() and says what the page holds. */
  parse(walk: string, bytes: Uint8Array): PageSummary {
    const work = this.work(walk);
    const { setup } = work;
    const { page, text } = decodePageBody(bytes, setup.resource, setup.limit);
    const seq = work.nextSeq++;
    work.parsed.set(seq, { page, text });
    const summary: PageSummary = {
      seq,
      rowCount: page.rows.length,
      cursor: page.cursor,
      hasMore: page.hasMore,
      bare: page.bare,
    };
    const last = page.rows[page.rows.length - 1];
    if (page.cursor === null && last !== undefined) {
      try {
        summary.lastRowCursor = { cursor: deriveCursor(setup.cursorKind, last) };
      } catch (error) {
        summary.lastRowCursor = { error: (error as Error).message };
      }
    }
    return summary;
  }

  /** Forgets a parsed page the walk will not write (its request was given up, or it is empty). */
  drop(walk: string, seq: number): void {
    this.walks.get(walk)?.parsed.delete(seq);
  }

  /** Prepares parsed page `seq` and hands it to the sink with `cursor`; resolves once it committed. */
  commit(walk: string, seq: number, cursor: string | null): Promise<CommitResult> {
    const work = this.work(walk);
    const parsed = work.parsed.get(seq);
    if (parsed === undefined) {
      return Promise.reject(new Error(`page ${seq} of ${walk} was not parsed, or already written`));
    }
    work.parsed.delete(seq);
    const handedOver = work.preparing.then(() => {
      // As the sink refuses the pages after one that failed to commit (commit-order.ts).
      if (work.failed) throw notWrittenError(work.setup.resource);
      return this.prepareAndHandOver(work, parsed, cursor);
    });
    work.preparing = handedOver.catch(() => {
      work.failed = true;
    });
    return handedOver.then(({ written }) => written);
  }

  /** Waits for the walk's pages in flight, then forgets it. */
  async endWalk(walk: string): Promise<void> {
    const work = this.walks.get(walk);
    if (!work) return;
    work.parsed.clear();
    await work.preparing;
    await work.committing?.catch(() => undefined);
    this.walks.delete(walk);
  }

  /** Waits for every walk's pages, then closes the sink. */
  async close(): Promise<void> {
    await Promise.all([...this.walks.keys()].map((walk) => this.endWalk(walk)));
    await this.sink.close();
  }

  /**
   * The walk's host, but the sink forgets its statements once the run changed the tables' shapes
   * (they were prepared for the old ones). Made from the host, not spread: the page thread's host
   * answers any question and has no own keys (messages.ts, askRun).
   */
  private forgettingShapes(host: PageHost): PageHost {
    const own = Object.create(host) as PageHost;
    own.applySchemaChanges = async (changes, columns) => {
      const applied = await host.applySchemaChanges(changes, columns);
      this.sink.forget();
      return applied;
    };
    return own;
  }

  private work(walk: string): WalkWork {
    const work = this.walks.get(walk);
    if (!work) throw new Error(`${walk} is not a walk of this pipeline`);
    return work;
  }

  private async prepareAndHandOver(
    work: WalkWork,
    { page, text }: { page: Page; text: string },
    cursor: string | null,
  ): Promise<{ written: Promise<CommitResult> }> {
    const { setup } = work;
    // Waits for the page ahead to commit (a stage about to change the warehouse).
    const settle = async () => {
      const pending = work.committing;
      work.committing = undefined;
      await pending;
    };
    const prepared = await preparePage(page.rows, work.rules, work.state, work.host, settle);
    const written = this.sink.writePage({
      runId: setup.runId,
      resource: setup.resource,
      columns: prepared.columns,
      rows: prepared.rows,
      cursor,
      cursorKind: setup.cursorKind,
      history: setup.history,
      selection: setup.selection,
      walk: setup.walk,
      originals: originalValuesOf(
        dialectRules(this.dialect).values,
        prepared.columns,
        prepared.rows,
      ),
      // json columns store the body's own text of each value (never parsed and written again).
      jsonTexts: pageJsonTexts(text, page.rows, page.bare),
    });
    work.committing = written;
    written.catch(() => undefined);
    // In an object: the caller goes on before the page committed.
    return {
      written: written.then((result) => ({ ...result, refusedFields: prepared.refusedFields })),
    };
  }
}
