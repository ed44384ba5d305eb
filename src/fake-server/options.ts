/**
 * What a fake server (server.ts) is started with, and what it gives back: its options and fault
 * knobs' types, the handle to a running one, its request log and the default API keys.
 */
import type { Row } from '../interfaces.js';
import type { FakeDataset } from './dataset.js';
import type { FixtureResource } from './fixture-schema.js';
import type { FakeManifestDocument } from './openapi.js';
import type { FakeFileContent, FakeFileContentFor } from './file-contents.js';
import type { FakeFault, FaultController, RandomFaults } from './faults.js';

export const DEFAULT_ADMIN_API_KEY = 'test-admin-key';
export const DEFAULT_MEMBER_API_KEY = 'test-member-key';

/** The endpoint name of `GET /api/files/{id}/content` in faults and the request log. */
export const FILE_CONTENT_ENDPOINT = 'file_content';

export interface FileContentProgress {
  fileId: string;
  /** Bytes of the body written so far, and the whole body's size. */
  sentBytes: number;
  size: number;
}

export interface PageServedInfo {
  resource: string;
  /** 0 for a request without cursor, then 1, 2, ... for the following pages of that walk. */
  pageIndex: number;
  /** The rows of the page as stored (before sealing). */
  rows: Row[];
  cursor: string | null;
  hasMore: boolean;
}

export interface RequestLogEntry {
  method: string;
  path: string;
  query: Record<string, string>;
  /** The HTTP status sent; 0 when the connection was dropped without an answer. */
  status: number;
  /** `manifest`, `team`, `schema`, a resource name, or undefined for other paths. */
  endpoint?: string;
  /** Set for requests to a resource of the served manifest (whatever the answer), not others. */
  resource?: string;
  /** The injected fault, if any. */
  fault?: FakeFault['kind'];
}

export interface FakeServerOptions {
  dataset: FakeDataset;
  /** The fixture the documents are built from (default: `dataset.fixture`). */
  fixture?: FixtureResource[];
  /** Serve this OpenAPI document (e.g. the real one) instead of one built from the fixture. */
  openApi?: unknown;
  /** Serve this manifest (real shape; `schema_checksum` is added when missing). */
  manifest?: unknown;
  /** Default: admin `test-admin-key`, non-admin `test-member-key`. */
  apiKeys?: { admin: string[]; nonAdmin: string[] };
  /**
   * The team's registered public key (PEM). Without it sealed resources answer 400 and `team/`
   * says `has_public_key: false`. Which fields are sealed is the fixture's `sealedFields`.
   */
  teamPublicKeyPem?: string;
  /** Fields of the team object to override. */
  team?: Record<string, unknown>;
  /** Default true; false makes `schema/` answer 404. */
  serveOpenApi?: boolean;
  /** The team's API budget: a fixed window of `limit` requests per `windowSeconds`. */
  rateLimit?: { limit: number; windowSeconds: number };
  /** Delay before every resource page. */
  pageLatencyMs?: number;
  /**
   * Benchmark only: each page's body as built, by resource, cursor, limit and selection. A page
   * found here is sent as it is, without building it again (nor calling onPageServed), so the
   * server costs next to nothing; whoever fills it clears it when the data changes.
   */
  pageBodies?: Map<string, Buffer>;
  /** Answer pages as a bare JSON array of rows (the interface document's loose form). */
  bareArrayPages?: boolean;
  /**
   * Test only. `results-first` writes `results` before `cursor` and `has_more`, as another server
   * version or a proxy that re-encodes JSON might (the real server writes them first).
   */
  pageKeyOrder?: 'server' | 'results-first';
  /**
   * Test only. A page head that lies: the body starts with these `cursor`/`has_more` values and
   * ends with the true ones, the keys sent twice (JSON parsers keep the last).
   */
  pageHeadLie?: (info: PageServedInfo) => { cursor?: string | null; hasMore?: boolean } | undefined;
  /**
   * Test only. Each page's body is sent up to the start of its rows (`"results":[`), then this is
   * awaited before the rest is sent (tests hold a body's tail until the next request arrives).
   */
  beforePageTail?: (info: PageServedInfo) => Promise<void>;
  /** Served instead of the computed schema checksum. */
  manifestChecksum?: string;
  /** Faults at a seeded random rate (the demo, the soak); read at each request. */
  randomFaults?: RandomFaults;
  /**
   * Headers a proxy in front of the server sets on every answer, over the server's own (e.g.
   * `{'x-ratelimit-limit': ''}`); read at each request. Default: none, as the real server.
   */
  proxyHeaders?: Record<string, string>;
  /** Called right after a page is produced, before it is sent (tests edit rows here). */
  onPageServed?: (info: PageServedInfo) => void | Promise<void>;
  /** Rewrites the manifest before it is served and used for routing (hostile-server tests). */
  transformManifest?: (manifest: FakeManifestDocument) => FakeManifestDocument;
  /**
   * The bytes of each `files` row (default: `sampleFileContent`); null answers 404 as the real
   * server does for a row without a blob.
   */
  fileContent?: FakeFileContentFor;
  /** Called after each chunk of a file content body is written (tests kill clients here). */
  onFileContent?: (progress: FileContentProgress) => void | Promise<void>;
  /**
   * Seal every value afresh on every request, as the real server does (default: once per row
   * version, which only saves time), for tests of what a client makes of new sealed text.
   */
  sealAfresh?: boolean;
  /** Rewrites each row as sent (after sealing). */
  transformRow?: (resource: string, row: Record<string, unknown>) => Record<string, unknown>;
  /**
   * Speak the next server version's export scoped to chosen chatbots (REFERENCE.md, last section):
   * every manifest entry gets `scope`, `team/` gets `exportable_chatbots` and `require_mfa`, a
   * `selection` that is not the current choice's key gets the 409, and pages serve only what the
   * choice reaches (chatbot-scope.ts). `chosen`: public ids of working-version chatbots (empty:
   * the whole team). Change it with `server.choice`.
   */
  chatbotChoice?: { chosen: string[] };
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Clock for the rate-limit window, in milliseconds (default Date.now). */
  now?: () => number;
}

/** The team's chatbot choice on a server started with `chatbotChoice`. */
export interface ChoiceController {
  /** Public ids of the chosen chatbots, as set (empty: the whole team). */
  current(): string[];
  set(publicIds: string[]): void;
  /** Sets the choice once `requests` more requests have arrived, before the next one is answered. */
  changeAfter(requests: number, publicIds: string[]): void;
  /** The selection key of the choice now (chosen chatbots deleted since do not count). */
  key(): string;
  /** What `team/` lists now. */
  exportable(): Array<{ public_id: string; name: string }>;
}

export interface FakeServer {
  /** Base URL without trailing slash, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  readonly dataset: FakeDataset;
  /** Present when started with `chatbotChoice`. */
  readonly choice?: ChoiceController;
  /** The live options: changes (onPageServed, pageLatencyMs, keys, ...) apply to the next request. */
  readonly options: FakeServerOptions;
  readonly faults: FaultController;
  readonly requests: RequestLogEntry[];
  /** The bytes served for a `files` row now (a `replace_file` fault changes them); null: 404. */
  fileContent(row: Row): FakeFileContent | null;
  /** The manifest as currently served. */
  manifest(): FakeManifestDocument;
  /** The OpenAPI document as currently served. */
  openApi(): unknown;
  /** Serve new documents (a schema change on the server); rows are not touched. */
  setSchema(
    documents: { fixture: FixtureResource[] } | { openApi: unknown; manifest: unknown },
  ): void;
  close(): Promise<void>;
}
