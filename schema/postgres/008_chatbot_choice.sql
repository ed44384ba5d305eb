-- The team's chatbot choice (newer servers let a team admin choose which chatbots the export
-- serves). Every resource table gains `_ocs_out_of_scope_since` and `_ocs_served_under`, every
-- history table `_ocs_version_kind`, and the `__live` views are rebuilt (postgres-migrations.ts).

-- The choice each run walked under, and what each key stood for.
ALTER TABLE _ocs_runs ADD COLUMN selection_key text;
CREATE TABLE _ocs_chatbot_choices (
  selection_key text PRIMARY KEY,
  -- JSON list of {"public_id", "name"}, sorted by public_id; [] for the whole team.
  chatbots text NOT NULL,
  first_seen_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL
);

-- The key each cursor was committed under (null: the whole team), and whether the choice
-- excludes the resource.
ALTER TABLE _ocs_resources ADD COLUMN cursor_selection text;
ALTER TABLE _ocs_resources ADD COLUMN excluded_at timestamptz;

-- A resource the choice excludes is recorded as `excluded`.
ALTER TABLE _ocs_resource_runs DROP CONSTRAINT IF EXISTS _ocs_resource_runs_status_check;
ALTER TABLE _ocs_resource_runs ADD CONSTRAINT _ocs_resource_runs_status_check
  CHECK (status IN ('ok', 'skipped', 'failed', 'excluded'));
