/**
 * The export API as the sync engine sees it: the manifest, pages and their rows, the source that
 * fetches them, and which fields are sealed. Re-exported by interfaces.ts (the glossary).
 */

export type CursorKind = 'pk' | 'updated_at_id';

export interface ManifestEntry {
  /** Django model label, e.g. `chat.chatmessage`. */
  model: string;
  /** Resource name: URL segment and table name. */
  resource: string;
  cursor: CursorKind;
  /** True when some fields of every row are sealed (the manifest does not say which). */
  secret: boolean;
  /** The server's class of the resource under a chatbot choice, as sent; absent on older servers. */
  scope?: string;
}

export interface Manifest {
  schemaChecksum: string;
  entries: ManifestEntry[];
}

/** One row as the server sent it. `id` is a number, or a bigint past 2^53. */
export type Row = Record<string, unknown> & { id: number | bigint };

export interface Page {
  rows: Row[];
  /** Cursor for the next page as the server gave it; null on the last page. */
  cursor: string | null;
  hasMore: boolean;
  /** True when the server answered with a bare JSON array instead of `{cursor, has_more, results}`. */
  bare: boolean;
  /**
   * `cursor` and `has_more` as the body's first bytes said them, when it started with them and
   * the caller asked (`onHead`): the walk checks them against the full parse.
   */
  head?: PageHead;
}

export interface PageBodyOptions<T> {
  signal?: AbortSignal;
  /** The chatbot choice's key (see ExportSource.page). */
  selection?: string;
  /** Told the page's `cursor` and `has_more` as soon as the body's first bytes hold them. */
  onHead?: (head: PageHead) => void;
  /**
   * Turns the body's bytes (a buffer of their own, which may be transferred) into the answer.
   * Throws source/page-body.ts's BodyNotJsonError for a body that is not JSON (asked again),
   * JsonTooDeepError for JSON nested too deep, anything else to fail the page.
   */
  decode(body: Uint8Array): T | Promise<T>;
}

/** `cursor` and `has_more` read from the first bytes of a page body, before the rest arrived. */
export interface PageHead {
  /** '' and null both mean none, as in Page.cursor. */
  cursor: string | null;
  hasMore: boolean;
}

/** The server's export API, seen from the sync engine. `HttpExportSource` is the real one. */
export interface ExportSource {
  /** `signal` (the run's) ends retries, their waits and pacing at once, as for every request. */
  manifest(signal?: AbortSignal): Promise<Manifest>;
  team(signal?: AbortSignal): Promise<Record<string, unknown>>;
  /**
   * The export OpenAPI document, or undefined when the server does not publish it (404, not JSON
   * or YAML, no answer): the schema is optional, the rows are the fallback.
   */
  openApi(signal?: AbortSignal): Promise<unknown>;
  /**
   * `selection`: the chatbot choice's key, sent only to a server that speaks the scoped protocol.
   * `onHead`: told, as soon as an answer's first bytes hold them, the page's `cursor` and
   * `has_more` (once per attempt whose body starts with them), so the next request can leave
   * before this body has arrived; the page then carries that head for the caller to check.
   */
  page(
    resource: string,
    cursor: string | null,
    limit: number,
    signal?: AbortSignal,
    selection?: string,
    onHead?: (head: PageHead) => void,
  ): Promise<Page>;
  /**
   * A page's body as bytes, handed to `decode` (on this thread or another: the sync's page thread
   * parses it) inside the request's attempt: a body `decode` finds is not JSON is asked for again.
   */
  pageBody<T>(
    resource: string,
    cursor: string | null,
    limit: number,
    options: PageBodyOptions<T>,
  ): Promise<{ value: T; head?: PageHead }>;
  close(): Promise<void>;
  /** HTTP requests sent so far, retries included (for run records and the benchmark). */
  readonly requestCount?: number;
}

/** Which fields of one resource hold sealed values (src/sync/sealed-fields.ts finds them). */
export interface SealedFields {
  /** Marked by the server's schema: a value there that is not sealed is refused, never stored. */
  readonly marked: ReadonlySet<string>;
  /** Every field known to hold sealed values: marked, or seen with a sealed value. */
  readonly all: ReadonlySet<string>;
}
