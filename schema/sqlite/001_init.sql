-- ocs-sync bookkeeping tables (SQLite). Times are ISO 8601 UTC text (`...Z`), which sorts in time
-- order and reads the same in every tool.

CREATE TABLE IF NOT EXISTS _ocs_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at TEXT NOT NULL
);

-- One row per sync pass.
CREATE TABLE _ocs_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('incremental', 'full_refresh')),
  status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'partial', 'failed', 'interrupted')),
  started_at TEXT NOT NULL,
  finished_at TEXT,
  schema_checksum TEXT,
  "rows" INTEGER NOT NULL DEFAULT 0,
  pages INTEGER NOT NULL DEFAULT 0,
  requests INTEGER NOT NULL DEFAULT 0,
  error TEXT
);

-- Where each resource's walk resumes, and how its last attempts went. The cursor is written in
-- the same transaction as the page it follows.
CREATE TABLE _ocs_resources (
  resource TEXT PRIMARY KEY,
  cursor TEXT,
  cursor_kind TEXT CHECK (cursor_kind IS NULL OR cursor_kind IN ('pk', 'updated_at_id')),
  last_run_id INTEGER,
  last_success_at TEXT,
  last_error TEXT,
  last_error_at TEXT,
  last_full_refresh_at TEXT
);

-- Per run, per resource outcome.
CREATE TABLE _ocs_resource_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL,
  resource TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed')),
  "rows" INTEGER NOT NULL DEFAULT 0,
  pages INTEGER NOT NULL DEFAULT 0,
  duration_ms INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  recorded_at TEXT NOT NULL
);
CREATE INDEX _ocs_resource_runs_by_resource ON _ocs_resource_runs (resource, run_id);
CREATE INDEX _ocs_resource_runs_by_run ON _ocs_resource_runs (run_id);

-- Logical column types of every resource table (SQLite's declared types are too loose to say
-- whether TEXT holds a date-time or JSON).
CREATE TABLE _ocs_columns (
  table_name TEXT NOT NULL,
  column_name TEXT NOT NULL,
  column_type TEXT NOT NULL
    CHECK (column_type IN ('integer', 'number', 'boolean', 'text', 'datetime', 'date', 'json')),
  position INTEGER NOT NULL,
  added_at TEXT NOT NULL,
  PRIMARY KEY (table_name, column_name)
);

-- Audit trail of every table creation, added column and widened column.
CREATE TABLE _ocs_schema_changes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  changed_at TEXT NOT NULL,
  from_checksum TEXT,
  to_checksum TEXT,
  table_name TEXT NOT NULL,
  column_name TEXT,
  change TEXT NOT NULL CHECK (change IN ('create_table', 'add_column', 'widen_column')),
  from_type TEXT,
  to_type TEXT,
  reason TEXT NOT NULL
);

-- Small key/value bookkeeping (last_schema_checksum, ...).
CREATE TABLE _ocs_state (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

-- The one-writer lock. owner_token tells apart two holders in one process (pid and host alike).
CREATE TABLE _ocs_lock (
  name TEXT PRIMARY KEY,
  pid INTEGER NOT NULL,
  host TEXT NOT NULL,
  since TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL,
  owner_token TEXT NOT NULL
);
