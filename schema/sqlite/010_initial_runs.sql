-- A warehouse's initial load is a run kind of its own, `initial`: every sync run until the first
-- that ends ok or partial. SQLite cannot change a CHECK constraint, so the table is rebuilt with
-- its rows and ids.

CREATE TABLE _ocs_runs_with_initial (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('initial', 'incremental', 'full_refresh', 'reset')),
  status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'partial', 'failed', 'interrupted')),
  started_at TEXT NOT NULL,
  finished_at TEXT,
  schema_checksum TEXT,
  "rows" INTEGER NOT NULL DEFAULT 0,
  pages INTEGER NOT NULL DEFAULT 0,
  requests INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  selection_key TEXT
);
INSERT INTO _ocs_runs_with_initial
  (id, kind, status, started_at, finished_at, schema_checksum, "rows", pages, requests, error, selection_key)
SELECT id, kind, status, started_at, finished_at, schema_checksum, "rows", pages, requests, error, selection_key
FROM _ocs_runs;
DROP TABLE _ocs_runs;
ALTER TABLE _ocs_runs_with_initial RENAME TO _ocs_runs;
