-- The audit chain (audit.enabled; src/warehouse/audit-chain.ts). One entry per history version
-- written, run record, reset and file-ledger record, each hashing the one before it: an entry's
-- hash is the SHA-256 of its fields and the previous entry's hash, so any change made behind the
-- tool's back breaks the chain from there on. Times are text in the fixed form
-- YYYY-MM-DDTHH:MM:SS.ffffffZ on both dialects, so the same chain reads the same everywhere.
CREATE TABLE _ocs_audit (
  seq INTEGER PRIMARY KEY,
  run_id INTEGER,
  table_name TEXT NOT NULL,
  row_id INTEGER NOT NULL,
  operation TEXT NOT NULL,
  at TEXT NOT NULL,
  -- Versions: the version's _content_hash; records: the record's digest.
  digest TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
);
-- `audit verify` walks each table's entries by row, beside the table's rows.
CREATE INDEX _ocs_audit_by_row ON _ocs_audit (table_name, row_id, seq);

-- The last entry: a writer locks it, links its entries after it and moves it, in one transaction.
CREATE TABLE _ocs_audit_head (
  one INTEGER PRIMARY KEY CHECK (one = 1),
  seq INTEGER NOT NULL,
  hash TEXT NOT NULL
);
INSERT INTO _ocs_audit_head (one, seq, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- Signed checkpoints of the head, one per run (audit.signing_key_file), also appended to
-- audit.checkpoint_file. The signature is over the canonical JSON of the other columns.
CREATE TABLE _ocs_audit_checkpoints (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER,
  seq INTEGER NOT NULL,
  previous_seq INTEGER NOT NULL,
  head_hash TEXT NOT NULL,
  counts TEXT NOT NULL,
  created_at TEXT NOT NULL,
  public_key TEXT NOT NULL,
  signature TEXT NOT NULL
);
