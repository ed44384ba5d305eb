-- The analysts' warehouse. Date-time columns move to one fixed-width UTC form
-- (YYYY-MM-DDTHH:MM:SS.ffffffZ) so text order is time order, and each resource table gets a
-- `<table>__live` view: that part needs code and runs right after this file, in the same
-- transaction (src/warehouse/sqlite-migrations.ts). Here: the schema-change log learns
-- `drop_column` (a field newly listed in exclude_fields). SQLite cannot change a CHECK
-- constraint, so the table is rebuilt.

CREATE TABLE _ocs_schema_changes_with_drop (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  changed_at TEXT NOT NULL,
  from_checksum TEXT,
  to_checksum TEXT,
  table_name TEXT NOT NULL,
  column_name TEXT,
  change TEXT NOT NULL
    CHECK (change IN ('create_table', 'add_column', 'widen_column', 'drop_column')),
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
