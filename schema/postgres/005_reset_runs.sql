-- `ocs-sync reset` is recorded as a run of kind `reset` (its resources in _ocs_resource_runs),
-- and `reset --drop-table` as a `drop_table` schema change.

ALTER TABLE _ocs_runs DROP CONSTRAINT IF EXISTS _ocs_runs_kind_check;
ALTER TABLE _ocs_runs ADD CONSTRAINT _ocs_runs_kind_check
  CHECK (kind IN ('incremental', 'full_refresh', 'reset'));

ALTER TABLE _ocs_schema_changes DROP CONSTRAINT IF EXISTS _ocs_schema_changes_change_check;
ALTER TABLE _ocs_schema_changes ADD CONSTRAINT _ocs_schema_changes_change_check
  CHECK (change IN ('create_table', 'add_column', 'widen_column', 'drop_table'));
