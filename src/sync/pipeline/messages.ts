/**
 * What the sync's thread and the page thread say to each other (pipeline.ts, page-thread.ts):
 * a walk's rules once, each page's bytes (moved, not copied), which parsed page to commit with
 * which cursor, and the page thread's questions to the run (PageHost) with their answers.
 */
import type { ColumnSpec, CursorKind, PageSinkSetup, PageWriteResult } from '../../interfaces.js';
import type { SealingKeys, SecretPolicy } from '../../sealing/policy.js';
import type { CarriedError } from './carried-errors.js';

/** What stays the same for every page of one walk. */
export interface WalkSetup {
  /** `<run id>/<resource>`: unique in the warehouse (PageWrite.walk). */
  walk: string;
  runId: number;
  resource: string;
  cursorKind: CursorKind;
  /** The page size asked for (a bare array as long has more after it). */
  limit: number;
  /** The table's columns as the walk starts. */
  columns: ColumnSpec[];
  excludedFields: readonly string[];
  sealed: { marked: ReadonlySet<string>; all: ReadonlySet<string> };
  policy: SecretPolicy;
  /** History versions are kept for the resource. */
  history: boolean;
  /** The chatbot choice's key the pages are served under (PageWrite.selection). */
  selection?: string;
}

/** What the sync's thread learns of a parsed page; its rows stay on the page thread. */
export interface PageSummary {
  /** Which parsed page of the walk this is (to commit it by). */
  seq: number;
  rowCount: number;
  /** The server's `cursor` ('' as null) and `has_more`; `bare` for a bare array. */
  cursor: string | null;
  hasMore: boolean;
  bare: boolean;
  /** The cursor after the last row, as the server would build it: asked for when it gave none. */
  lastRowCursor?: { cursor: string } | { error: string };
}

/** A committed page: what the warehouse wrote, and the fields refused for their names. */
export interface CommitResult extends PageWriteResult {
  refusedFields: string[];
}

/** The page thread's start: where it writes, and what it needs to apply secrets policies. */
export interface PageThreadSetup {
  sink: PageSinkSetup;
  keys: SealingKeys;
}

/** The questions a page's stages ask of the run (prepare.ts PageHost), by name. */
export type HostMethod = 'learnSealedFields' | 'applySchemaChanges' | 'open' | 'readRowsById';

export type ToPageThread =
  | { type: 'walk'; setup: WalkSetup }
  | { type: 'parse'; id: number; walk: string; bytes: Uint8Array }
  | { type: 'commit'; id: number; walk: string; seq: number; cursor: string | null }
  /** A parsed page the walk will not write. */
  | { type: 'drop'; walk: string; seq: number }
  /** Waits for the walk's pages in flight, then forgets the walk. */
  | { type: 'end-walk'; id: number; walk: string }
  | { type: 'answer'; call: number; value?: unknown; failed?: true }
  /** Waits for every page in flight, closes the sink; the thread then ends. */
  | { type: 'close'; id: number };

export type FromPageThread =
  | { type: 'done'; id: number; value?: unknown }
  | { type: 'failed'; id: number; error: CarriedError }
  | { type: 'call'; call: number; walk: string; method: HostMethod; args: unknown[] };
