-- A `decimal` logical type (numeric): an exact number holding both 64-bit integers and doubles.
-- `number` columns are now created as double precision. Those created before this are numeric,
-- which is what `decimal` means now: relabel them, so writes to them stay exact.

ALTER TABLE _ocs_columns DROP CONSTRAINT IF EXISTS _ocs_columns_column_type_check;
ALTER TABLE _ocs_columns ADD CONSTRAINT _ocs_columns_column_type_check CHECK (
  column_type IN ('integer', 'number', 'decimal', 'boolean', 'text', 'datetime', 'date', 'json')
);
UPDATE _ocs_columns SET column_type = 'decimal' WHERE column_type = 'number';
