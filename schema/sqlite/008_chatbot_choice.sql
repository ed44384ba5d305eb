-- The team's chatbot choice (newer servers let a team admin choose which chatbots the export
-- serves). Every resource table gains `_ocs_out_of_scope_since` and `_ocs_served_under`, every
-- history table `_ocs_version_kind`, and the `__live` views are rebuilt (sqlite-migrations.ts).

-- The choice each run walked under, and what each key stood for.
ALTER TABLE _ocs_runs ADD COLUMN selection_key TEXT;
CREATE TABLE _ocs_chatbot_choices (
  selection_key TEXT PRIMARY KEY,
  -- JSON list of {"public_id", "name"}, sorted by public_id; [] for the whole team.
  chatbots TEXT NOT NULL,
  first_seen_at TEXT NOT NULL,
  last_seen_at TEXT NOT NULL
);

-- The key each cursor was committed under (null: the whole team), and whether the choice
-- excludes the resource.
ALTER TABLE _ocs_resources ADD COLUMN cursor_selection TEXT;
ALTER TABLE _ocs_resources ADD COLUMN excluded_at TEXT;

-- A resource the choice excludes is recorded as `excluded`. SQLite cannot change a CHECK
-- constraint, so the table is rebuilt with its rows, ids and indexes.
CREATE TABLE _ocs_resource_runs_with_excluded (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL,
  resource TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed', 'excluded')),
  "rows" INTEGER NOT NULL DEFAULT 0,
  pages INTEGER NOT NULL DEFAULT 0,
  duration_ms INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  recorded_at TEXT NOT NULL
);
INSERT INTO _ocs_resource_runs_with_excluded
  (id, run_id, resource, status, "rows", pages, duration_ms, error, recorded_at)
SELECT id, run_id, resource, status, "rows", pages, duration_ms, error, recorded_at
FROM _ocs_resource_runs;
DROP TABLE _ocs_resource_runs;
ALTER TABLE _ocs_resource_runs_with_excluded RENAME TO _ocs_resource_runs;
CREATE INDEX _ocs_resource_runs_by_resource ON _ocs_resource_runs (resource, run_id);
CREATE INDEX _ocs_resource_runs_by_run ON _ocs_resource_runs (run_id);
