/**
 * Glossary
 *
 * - Server: an Open Chat Studio instance; we read its team-export API (`/api/export/`).
 * - Manifest: the server's list of resources in dependency order, with each one's cursor kind and
 *   whether some of its fields are sealed, plus a checksum of the export schema.
 * - Resource: one exported model (`chat_messages`, `participants`, ...). One warehouse table each,
 *   named exactly as the resource.
 * - Page: one response of a resource: up to `limit` rows plus the cursor to ask for the next page.
 * - Cursor: where a resource walk resumes. `pk` resources: the last id as a decimal string.
 *   `updated_at_id` resources: base64 of `{"updated_at", "id"}` of the last row.
 * - Warehouse: where rows land (SQLite file or PostgreSQL schema): small parts (warehouse-parts.ts),
 *   each dialect's in its folder (src/warehouse/<dialect>/).
 * - Sealed field: a field the server encrypts under the team's public key; a secrets policy says
 *   what we store for it. The manifest only says a resource has some (`secret`); which fields is
 *   read from the OpenAPI field descriptions and from the shape of the values (sealed-fields.ts).
 * - Run: one `sync` pass over the manifest; recorded in `_ocs_runs`.
 * - Full refresh: a walk from the start that also finds rows the server no longer has.
 * - Logical column type: our database-neutral type of a column; each dialect maps it to SQL.
 * - Blob: the bytes of one `files` row (`GET /api/files/{id}/content`), stored once per content
 *   under its SHA-256 in the blob store; `_ocs_files` (the file ledger) says which row has which.
 * - Live view: `<table>__live`, a resource table's rows not marked deleted.
 * - Relationship: an integer column whose values are ids of another table, found by name and
 *   verified against the stored data (src/sync/relationships.ts).
 * - Excluded field: a field `exclude_fields` keeps out of the warehouse (table and history).
 * - Original value: the server's text of a value its column would give back differently, kept in
 *   `_ocs_original_values` so `serve` answers exactly as the server did.
 * - Canonical content: the text of a row's data fields defined from the server's values
 *   (warehouse/canonical.ts); its SHA-256 is a history version's `_content_hash`.
 * - Audit chain: `_ocs_audit`, one entry per history version, run record, reset and file-ledger
 *   record, each hashing the one before (warehouse/audit-chain.ts). On from a warehouse's first
 *   run (`audit.enabled`), it stays on.
 * - Checkpoint: the chain's head (last sequence number and hash) signed with the operator's
 *   Ed25519 key at the end of a run, kept in `_ocs_audit_checkpoints` and in a file shipped
 *   elsewhere, so a chain rebuilt without the key is caught (src/audit/).
 * - Chatbot choice: the chatbots a team admin lets the export serve (newer servers, `team/`'s
 *   `exportable_chatbots`); none chosen means the whole team. Its selection key (`all`, or 32 hex
 *   digits) goes with every page request as `selection` (src/sync/chatbot-choice.ts).
 * - Scope: how the manifest classes a resource under a choice: `owned` (a chatbot's own rows),
 *   `referenced` (shared rows the chosen chatbots reach), `excluded` (served empty).
 * - Out of scope: a row the current choice does not serve (the server may still have it);
 *   marked `_ocs_out_of_scope_since`, never `_deleted_at`.
 * - Page pipeline: a walk's pages, from the bytes the sync's thread fetched to rows committed with
 *   their cursors: the page thread parses and prepares them, a page sink writes them (SQLite's on
 *   its writer thread) in walk order (src/sync/pipeline/).
 * - Deletion proof: under a choice, what shows a missing row last served under the same choice is
 *   gone from the server and not merely out of scope: its resource is owned (a chatbot's own rows
 *   never leave an unchanged choice), or the rows served in the same full refresh still reach it
 *   (src/sync/choice-reach.ts).
 * - Progress: a stage of a run moving one step (a page committed, a file stored, deleted rows
 *   marked). Every stage reports its steps to the run's ProgressListener; the daemon's /healthz
 *   counts any step as life and names the latest.
 */

// The shared types live in files by subject; this file names them all, under the glossary.
export type * from './export-types.js';
export type * from './warehouse-types.js';
export type * from './warehouse-parts.js';
export type * from './audit-types.js';
export type * from './file-ledger-types.js';

/** One step of a stage of a run (glossary: Progress), e.g. "downloading file contents: 3 of 9 files". */
export interface StageProgress {
  /** What is being done, for people: `syncing chat_messages`, `downloading file contents`. */
  stage: string;
  /** Steps of this stage done so far ... */
  done: number;
  /** ... of this many, when the stage knows. */
  total?: number;
  /** What a step is: `rows`, `files`. */
  unit: string;
}

/**
 * Told of every step of every stage of a run, as it happens. Any stage may call it (the walk, the
 * files step, deletion marking; later ones too): it must be cheap and must not throw.
 */
export type ProgressListener = (progress: StageProgress) => void;
