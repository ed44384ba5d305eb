-- A `decimal` logical type: an exact number holding both 64-bit integers and doubles. `number`
-- now means a double. Before this, `number` columns already held 64-bit integers exactly too
-- (an integer column widened by a fraction), which is what `decimal` means now: relabel them.
-- SQLite cannot change a CHECK constraint, so the table is rebuilt.

CREATE TABLE _ocs_columns_with_decimal (
  table_name TEXT NOT NULL,
  column_name TEXT NOT NULL,
  column_type TEXT NOT NULL CHECK (
    column_type IN ('integer', 'number', 'decimal', 'boolean', 'text', 'datetime', 'date', 'json')
  ),
  position INTEGER NOT NULL,
  added_at TEXT NOT NULL,
  PRIMARY KEY (table_name, column_name)
);

INSERT INTO _ocs_columns_with_decimal (table_name, column_name, column_type, position, added_at)
SELECT table_name, column_name,
  CASE column_type WHEN 'number' THEN 'decimal' ELSE column_type END, position, added_at
FROM _ocs_columns;

DROP TABLE _ocs_columns;
ALTER TABLE _ocs_columns_with_decimal RENAME TO _ocs_columns;
