/**
 * One resource's walk, on the sync's thread, which only fetches: pages are requested ahead
 * (read-ahead.ts; the next request leaves as soon as a body's head names its cursor), each body's
 * bytes go to the page pipeline (pipeline.ts), whose answer settles the page in order against the
 * one before (head, cursor, loops); the walk then tells the pipeline to write it with its cursor
 * and goes on while the page ahead commits (write-behind). After a complete walk, the rows it did
 * not see are marked.
 */
import type { ManifestEntry, PageHead, Warehouse, ExportSource } from '../../interfaces.js';
import type { Logger } from '../../log.js';
import type { SecretPolicy } from '../../sealing/policy.js';
import { selectionParameter, walkKey, type ServerScope } from '../chatbot-choice.js';
import type { ResourceWalkPlan } from '../walk-plan.js';
import { CursorTrail, checkPageHead } from '../cursor-trail.js';
import { hasNextPage } from '../plan.js';
import { readAhead } from '../read-ahead.js';
import type { ResourceReport, SyncOptions } from '../run-types.js';
import type { SchemaKeeper } from '../schema-keeper.js';
import type { SealedFieldBook } from '../sealed-book.js';
import type { SealedValueOpener } from '../../sealing/open-pool.js';
import type { PageSummary } from './messages.js';
import type { PagePipeline } from './pipeline.js';
import { refusedFieldWarning, type PageHost } from './prepare.js';

/** What a walk needs of its run. */
export interface WalkContext {
  options: Pick<
    SyncOptions,
    'pageSize' | 'pagesInFlight' | 'deletes' | 'secrets' | 'events' | 'signal'
  > & { source: ExportSource; warehouse: Warehouse; logger: Logger };
  runId: number;
  scope: ServerScope;
  /** The pass's signal: aborted by the run's, or when the chatbot choice changes. */
  signal: AbortSignal;
  schema: SchemaKeeper;
  sealed: SealedFieldBook;
  opener: SealedValueOpener;
  pipeline: PagePipeline;
  /** Rows and pages committed in this run. */
  totals: { rows: number; pages: number };
  policyOf(entry: ManifestEntry): SecretPolicy;
  historyFor(resource: string): boolean;
  /** A full refresh under a choice: its missing rows are settled after every walk (settle-under-choice.ts). */
  awaitProofs(resource: string, key: string): void;
  /** Throws InterruptedError when the run was asked to stop. */
  throwIfAborted(): void;
}

export interface WalkStart {
  entry: ManifestEntry;
  report: ResourceReport;
  /** The whole plan of the walk (walk-plan.ts), followed as it is. */
  plan: ResourceWalkPlan;
}

/** The cursor to store with a page: the server's when it gave one, else built from its last row. */
function cursorAfter(summary: PageSummary, previous: string | null): string | null {
  if (summary.cursor !== null) return summary.cursor;
  const last = summary.lastRowCursor;
  if (summary.rowCount === 0 || last === undefined) return previous;
  if ('error' in last) throw new Error(last.error);
  return last.cursor;
}

export async function walkResource(context: WalkContext, start: WalkStart): Promise<void> {
  const { entry, report, plan } = start;
  const { fullRefresh, missing } = plan;
  const { options, scope, schema, runId } = context;
  const { source, warehouse, logger, pageSize } = options;
  const { resource } = entry;
  const policy = context.policyOf(entry);
  // Fixed for the walk: every page is requested, and committed, under this choice (a server
  // without choices: nothing, as before choices were known).
  const key = walkKey(scope);
  const selection = selectionParameter(scope);
  const servedUnder = scope.kind === 'unscoped' ? undefined : key;

  const columns = (await schema.ensureTable(resource, schema.desiredColumns(entry, policy))) ?? [];
  let cursor = plan.cursor;
  if (plan.cursorKindChanged) {
    logger.warn(
      { resource },
      'The cursor kind changed on the server; walking this resource from the start',
    );
  } else if (plan.restartReason !== undefined) {
    logger.debug({ resource, reason: plan.restartReason }, `${resource}: walking from the start`);
  }
  const history = context.historyFor(resource);

  const walk = context.pipeline.startWalk(
    {
      walk: `${runId}/${resource}`,
      runId,
      resource,
      cursorKind: entry.cursor,
      limit: pageSize,
      columns,
      excludedFields: schema.excludedFields(resource),
      sealed: context.sealed.of(resource),
      policy,
      history,
      selection: servedUnder,
    },
    pageHost(context, entry, policy),
  );
  const trail = new CursorTrail(resource, cursor);
  let pageNumber = 0;
  type Fetched = { value: PageSummary; head?: PageHead };
  const pages = readAhead<Fetched, { summary: PageSummary; after: string | null }>(
    {
      start: cursor,
      fetch: (from, signal, announce) =>
        source.pageBody(resource, from, pageSize, {
          signal,
          selection,
          onHead: (head) =>
            announce(head.hasMore && head.cursor !== null ? head.cursor : undefined),
          decode: (bytes) => walk.parse(bytes, signal),
        }),
      settle: (from, { value: summary, head }) => {
        pageNumber += 1;
        checkPageHead(resource, pageNumber, { ...summary, head });
        const after = cursorAfter(summary, from);
        const last = !hasNextPage(summary, pageSize) || after === null;
        // Any cursor followed before in this walk, not only the last one, would loop forever.
        if (!last) trail.follow(after);
        return { value: { summary, after }, next: last ? undefined : after };
      },
      discard: ({ value: summary }) => walk.drop(summary.seq),
      // A head naming a cursor this walk followed already leads back: nothing is sent from it,
      // and settling that page stops the walk (CursorTrail).
      worthAsking: (next) => !trail.followed(next),
    },
    options.pagesInFlight,
    // The pass's signal follows the run's: one listener per walk, released when it ends.
    context.signal,
  );

  // Write-behind: the pipeline prepares and hands over the next page while the one ahead
  // commits; pages of the walk commit in the order they are handed over and none after one that
  // failed (warehouse/commit-order.ts).
  let committing: Promise<void> | undefined;
  try {
    for await (const { summary, after } of pages) {
      context.throwIfAborted();
      if (summary.rowCount === 0 && (after === cursor || fullRefresh)) {
        walk.drop(summary.seq);
        continue;
      }
      warehouse.assertLockHeld();
      const written = walk
        // A full refresh leaves the incremental cursor alone until it has walked everything.
        .commit(summary.seq, fullRefresh ? null : after)
        .then((result) => {
          for (const field of result.refusedFields) {
            const message = refusedFieldWarning(resource, field);
            if (!report.warnings.includes(message)) {
              report.warnings.push(message);
              logger.error({ resource }, message);
            }
          }
          report.rows += result.rowsWritten;
          report.pages += 1;
          context.totals.rows += result.rowsWritten;
          context.totals.pages += 1;
          report.valuesAltered += result.valuesAltered;
          options.events?.onPageWritten?.({
            resource,
            rows: result.rowsWritten,
            valuesAltered: result.valuesAltered,
          });
          options.events?.onProgress?.({
            stage: `${fullRefresh ? 'full refresh of' : 'syncing'} ${resource}`,
            done: report.rows,
            unit: 'rows',
          });
        });
      // Awaited below or in `finally`; a failure of the page ahead of it is the one reported.
      written.catch(() => undefined);
      cursor = after;
      const ahead = committing;
      committing = written;
      await ahead;
    }
    const last = committing;
    committing = undefined;
    await last;
  } finally {
    // Never leave a page committing behind a failure or an abort.
    await committing?.catch(() => undefined);
    await walk.end().catch(() => undefined);
  }
  if (report.valuesAltered > 0) {
    // Reported, not a failure: the rows are stored, minus characters the database cannot hold.
    logger.warn(
      { resource, valuesAltered: report.valuesAltered },
      `${report.valuesAltered} value(s) of ${resource} had NUL characters removed to fit the database`,
    );
  }
  if (missing !== 'none') context.throwIfAborted();
  await markMissing(context, { resource, report, key, plan, history });
  // The cursor moves to where the walk ended (a stored one stays only under its own choice).
  const ended = cursor ?? plan.keptCursor;
  if (fullRefresh && ended !== null) {
    await warehouse.saveCursor({
      runId,
      resource,
      cursor: ended,
      cursorKind: entry.cursor,
      selection: servedUnder,
    });
  }
}

/**
 * Only a complete walk may say what is gone or out of the choice. One statement on the
 * warehouse's side, whatever the table's size: nothing per row here.
 */
async function markMissing(
  context: WalkContext,
  walk: {
    resource: string;
    report: ResourceReport;
    key: string;
    plan: ResourceWalkPlan;
    history: boolean;
  },
): Promise<void> {
  const { resource, report, key, plan, history } = walk;
  const { missing } = plan;
  if (missing === 'none') return;
  const { warehouse, deletes, events } = context.options;
  if (missing === 'out_of_scope' && plan.provesDeletions) {
    // Settled when every walk is done: the proofs read what the other walks served.
    context.awaitProofs(resource, key);
    return;
  }
  const marking =
    missing === 'out_of_scope'
      ? `marking rows of ${resource} the chatbot choice no longer serves`
      : `marking rows of ${resource} the server no longer has`;
  events?.onProgress?.({ stage: marking, done: 0, unit: 'rows' });
  if (missing === 'delete') {
    report.deleted = await warehouse.markMissingAsDeleted(
      resource,
      context.runId,
      deletes,
      history,
    );
  } else {
    const marked = await warehouse.markMissingUnderChoice(resource, context.runId, {
      selection: key,
      mode: deletes,
      history,
    });
    report.deleted = marked.deleted;
    report.outOfScope = marked.outOfScope;
  }
  events?.onProgress?.({
    stage: marking,
    done: report.deleted + (report.outOfScope ?? 0),
    unit: 'rows',
  });
}

/** What the pages of a walk ask of the run (prepare.ts), answered on the sync's thread. */
function pageHost(context: WalkContext, entry: ManifestEntry, policy: SecretPolicy): PageHost {
  const { resource } = entry;
  return {
    learnSealedFields: async (fields) => {
      await context.sealed.learn(entry, fields, policy);
      return context.sealed.of(resource);
    },
    applySchemaChanges: (changes, planned) => context.schema.apply(changes, planned),
    openSealedValues: (opening, tokens) => context.opener.open(opening, tokens, context.signal),
    readRowsById: (stored, ids) =>
      context.options.warehouse.reads.readRowsById(resource, stored, ids),
  };
}
