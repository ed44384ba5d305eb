-- `ocs-sync reset` is recorded as a run of kind `reset` (its resources in _ocs_resource_runs),
-- and `reset --drop-table` as a `drop_table` schema change. SQLite cannot change a CHECK
-- constraint, so both tables are rebuilt with their rows and ids.

CREATE TABLE _ocs_runs_with_reset (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('incremental', 'full_refresh', 'reset')),
  status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'partial', 'failed', 'interrupted')),
  started_at TEXT NOT NULL,
  finished_at TEXT,
  schema_checksum TEXT,
  "rows" INTEGER NOT NULL DEFAULT 0,
  pages INTEGER NOT NULL DEFAULT 0,
  requests INTEGER NOT NULL DEFAULT 0,
  error TEXT
);
INSERT INTO _ocs_runs_with_reset
  (id, kind, status, started_at, finished_at, schema_checksum, "rows", pages, requests, error)
SELECT id, kind, status, started_at, finished_at, schema_checksum, "rows", pages, requests, error
FROM _ocs_runs;
DROP TABLE _ocs_runs;
ALTER TABLE _ocs_runs_with_reset RENAME TO _ocs_runs;

CREATE TABLE _ocs_schema_changes_with_drop (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  changed_at TEXT NOT NULL,
  from_checksum TEXT,
  to_checksum TEXT,
  table_name TEXT NOT NULL,
  column_name TEXT,
  change TEXT NOT NULL
    CHECK (change IN ('create_table', 'add_column', 'widen_column', 'drop_table')),
  from_type TEXT,
  to_type TEXT,
  reason TEXT NOT NULL
);
INSERT INTO _ocs_schema_changes_with_drop
  (id, changed_at, from_checksum, to_checksum, table_name, column_name, change, from_type, to_type, reason)
SELECT id, changed_at, from_checksum, to_checksum, table_name, column_name, change, from_type, to_type, reason
FROM _ocs_schema_changes;
DROP TABLE _ocs_schema_changes;
ALTER TABLE _ocs_schema_changes_with_drop RENAME TO _ocs_schema_changes;
