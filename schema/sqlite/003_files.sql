-- The file ledger: per `files` row, the newest attempt to fetch its bytes into the blob store
-- (`<files.dir>/sha256/<first two hex>/<digest>`). A row is written only after its blob is on
-- disk under its final name, so an `ok` row always names a complete blob.

CREATE TABLE _ocs_files (
  file_id INTEGER PRIMARY KEY,
  sha256 TEXT,
  size INTEGER,
  content_type TEXT,
  status TEXT NOT NULL CHECK (status IN ('ok', 'missing', 'failed')),
  error TEXT,
  -- The row's `updated_at` (fixed form ...ffffffZ) and `file` path this attempt was made for.
  updated_at TEXT,
  file TEXT,
  fetched_at TEXT NOT NULL,
  -- Attempts in a row that stored nothing; missing and failed rows wait until next_attempt_at.
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TEXT
);
CREATE INDEX _ocs_files_by_sha256 ON _ocs_files (sha256);
