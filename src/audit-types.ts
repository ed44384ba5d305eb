/**
 * The audit chain: its entries, checkpoints, what `audit verify` reads (AuditSnapshot) and the
 * chain as a warehouse keeps it (AuditStore). Re-exported by interfaces.ts (the glossary).
 */
import type { Row } from './export-types.js';
import type { ChatbotChoiceRecord, ColumnSpec } from './warehouse-types.js';

/**
 * What a chain entry records. Versions: `create`, `change` (open a version), `delete`, `remove`
 * (close it by a full refresh), `scope_exit`, `scope_return` (the team's chatbot choice stopped or
 * started serving the row again); records: `insert`, `update`. An open set: a new kind is added
 * here and in AUDIT_OPERATIONS (warehouse/audit-chain.ts), whose rules `audit verify` replays.
 */
export type AuditOperation =
  'create' | 'change' | 'delete' | 'remove' | 'scope_exit' | 'scope_return' | 'insert' | 'update';

/** An entry before it is linked into the chain. */
export interface PendingEntry {
  /** The run it belongs to; null for a record written outside a run (`files verify --refetch`). */
  runId: number | null;
  table: string;
  /** Row id (resource rows, runs) or key (file ledger), decimal. */
  rowId: string;
  operation: AuditOperation;
  /** Versions: `_valid_from` (opening) or `_valid_to` (closing); records: when written. Fixed form. */
  at: string;
  /** Versions: the version's `_content_hash`; records: the record's digest. sha256 hex. */
  digest: string;
}

/** One `_ocs_audit` row. */
export interface AuditEntry extends PendingEntry {
  seq: number;
  prevHash: string;
  hash: string;
}

export interface ChainHead {
  seq: number;
  hash: string;
}

/** What a checkpoint says; signed as its canonical JSON text (checkpointText). */
export interface CheckpointBody {
  format: 'ocs-sync audit checkpoint v1';
  /** The newest run recorded when it was made. */
  run: number | null;
  /** Last sequence number, and that entry's hash (the head). */
  seq: number;
  head: string;
  /** The previous checkpoint's sequence number (0 for the first). */
  previous_seq: number;
  /** Entries per operation in (previous_seq, seq]. */
  counts: Record<string, number>;
  /** When it was made, fixed form. */
  time: string;
  /** The Ed25519 public key that signs it, base64. */
  key: string;
}

export interface SignedCheckpoint extends CheckpointBody {
  /** Ed25519 signature of checkpointText(body), base64. */
  signature: string;
}

export interface CheckpointSigner {
  /** The public key, base64. */
  publicKey: string;
  /** Signs the text (UTF-8); the signature in base64. The private key stays inside. */
  sign(text: string): string;
}

/** What the end of a run did for the audit chain (src/audit/checkpoints.ts). */
export interface AuditOutcome {
  /** The checkpoint signed and stored, when a signing key is configured. */
  checkpoint?: { run: number | null; seq: number; head: string };
  /** Lines appended to the checkpoint file. */
  appended?: number;
  checkpointFile?: string;
  /** Why the checkpoint could not be written or appended (the run's data is kept). */
  error?: string;
}

/** The outcome of the last `audit verify`, kept for `status`. */
export interface VerificationRecord {
  at: string;
  intact: boolean;
  entries: number;
  problems: number;
  /** The first broken link, in words. */
  first?: string;
  /** Whether checkpoint signatures were checked against a public key. */
  signatures: boolean;
  checkpoints: number;
}

/** The audit chain as a warehouse keeps it. */
export interface AuditStore {
  /** Whether this warehouse keeps an audit chain. Once on, it stays on. */
  readonly enabled: boolean;
  /**
   * Turns the chain on; nothing when it is on already. Refused (AuditError) for a warehouse that
   * already holds runs or tables without a chain: the chain must witness everything from the first.
   */
  enable(): Promise<void>;
  /** Signs and stores a checkpoint of the head; undefined when the chain is empty. */
  checkpoint(signer: CheckpointSigner): Promise<SignedCheckpoint | undefined>;
  /** The stored checkpoints past a sequence number (default: all), oldest first. */
  checkpoints(afterSeq?: number): Promise<SignedCheckpoint[]>;
  /** One consistent read of everything `audit verify` needs. */
  snapshot(): Promise<AuditSnapshot>;
  recordVerification(record: VerificationRecord): Promise<void>;
}

/** A resource table as verify walks it. */
export interface AuditedTable {
  table: string;
  columns: ColumnSpec[];
  /** Whether the resource table and its history table exist. */
  live: boolean;
  history: boolean;
}

/** A history version read back: values decoded as readRows decodes them. */
export interface StoredVersion {
  id: string;
  versionId: string;
  values: Row;
  /** `_ocs_served_under`: the chatbot choice's key it was served under (part of its content). */
  servedUnder: string | null;
  validFrom: string;
  validTo: string | null;
  contentHash: string;
  /** `_ocs_version_kind`. */
  kind: string;
}

/** A live row read back: its values decoded, and our own columns (times in the fixed form). */
export interface LiveRow {
  id: string;
  values: Row;
  servedUnder: string | null;
  deletedAt: string | null;
  outOfScopeSince: string | null;
}

/** A bookkeeping record read back: its key and the digest of what it holds. */
export interface StoredRecord {
  key: string;
  digest: string;
}

/**
 * Everything `audit verify` reads, from one consistent view of the warehouse. Every list is read
 * in batches after a position, so memory stays flat whatever the archive's size.
 */
export interface AuditSnapshot {
  head(): Promise<ChainHead>;
  /** Entries in sequence order after `afterSeq`. */
  entries(afterSeq: number, limit: number): Promise<AuditEntry[]>;
  /** One table's entries in (row id, seq) order after a position. */
  entriesOf(
    table: string,
    after: { rowId: string; seq: number } | null,
    limit: number,
  ): Promise<AuditEntry[]>;
  /** Every resource table the warehouse records columns for. */
  tables(): Promise<AuditedTable[]>;
  /** A table known only from the chain (no columns recorded for it). */
  table(name: string): Promise<AuditedTable>;
  /** Versions in (id, _version_id) order after a position. */
  versions(
    table: AuditedTable,
    after: { id: string; versionId: string } | null,
    limit: number,
  ): Promise<StoredVersion[]>;
  /** Live rows in id order after an id. */
  liveRows(table: AuditedTable, afterId: string | null, limit: number): Promise<LiveRow[]>;
  /** A bookkeeping table's records in key order after a key. */
  records(table: string, afterKey: string | null, limit: number): Promise<StoredRecord[]>;
  checkpoints(): Promise<SignedCheckpoint[]>;
  /** The chatbot choices recorded (`_ocs_chatbot_choices`: a few rows). */
  chatbotChoices(): Promise<ChatbotChoiceRecord[]>;
  close(): Promise<void>;
}
