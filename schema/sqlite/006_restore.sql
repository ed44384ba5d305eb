-- What `serve` needs to answer as the server did.
-- The manifest and the export OpenAPI document as the server served them, per schema checksum.
CREATE TABLE _ocs_export_documents (
  kind TEXT NOT NULL CHECK (kind IN ('manifest', 'openapi')),
  checksum TEXT NOT NULL,
  body TEXT NOT NULL,
  fetched_at TEXT NOT NULL,
  PRIMARY KEY (kind, checksum)
);

-- The server's value of a field where the column's type would give back a different one (an
-- offset other than Z, a NUL in PostgreSQL text, jsonb's key order). served_hash is the sha256 of
-- what the column gives back, so an original only applies while the stored value is unchanged.
CREATE TABLE _ocs_original_values (
  resource TEXT NOT NULL,
  id INTEGER NOT NULL,
  column_name TEXT NOT NULL,
  served_hash TEXT NOT NULL,
  original TEXT NOT NULL,
  PRIMARY KEY (resource, id, column_name, served_hash)
);
