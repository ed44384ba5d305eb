-- The analysts' warehouse. The schema-change log learns `drop_column` (a field newly listed in
-- exclude_fields). Each resource table gets a `<table>__live` view: that part needs code and runs
-- right after this file, in the same transaction (src/warehouse/postgres-migrations.ts).
-- Date-times stay timestamptz here.

ALTER TABLE _ocs_schema_changes DROP CONSTRAINT IF EXISTS _ocs_schema_changes_change_check;
ALTER TABLE _ocs_schema_changes ADD CONSTRAINT _ocs_schema_changes_change_check CHECK (
  change IN ('create_table', 'add_column', 'widen_column', 'drop_column')
);
