-- A warehouse's initial load is a run kind of its own, `initial`: every sync run until the first
-- that ends ok or partial.

ALTER TABLE _ocs_runs DROP CONSTRAINT IF EXISTS _ocs_runs_kind_check;
ALTER TABLE _ocs_runs ADD CONSTRAINT _ocs_runs_kind_check
  CHECK (kind IN ('initial', 'incremental', 'full_refresh', 'reset'));
