-- The file ledger: per `files` row, the newest attempt to fetch its bytes into the blob store
-- (`<files.dir>/sha256/<first two hex>/<digest>`). A row is written only after its blob is on
-- disk under its final name, so an `ok` row always names a complete blob.
-- Same columns as schema/sqlite/003_files.sql.

CREATE TABLE _ocs_files (
  file_id bigint PRIMARY KEY,
  sha256 text,
  size bigint,
  content_type text,
  status text NOT NULL CHECK (status IN ('ok', 'missing', 'failed')),
  error text,
  -- The row's `updated_at` (fixed form ...ffffffZ) and `file` path this attempt was made for.
  updated_at text,
  file text,
  fetched_at timestamptz NOT NULL,
  -- Attempts in a row that stored nothing; missing and failed rows wait until next_attempt_at.
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz
);
CREATE INDEX _ocs_files_by_sha256 ON _ocs_files (sha256);
