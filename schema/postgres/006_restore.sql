-- What `serve` needs to answer as the server did.
-- The manifest and the export OpenAPI document as the server served them, per schema checksum.
CREATE TABLE _ocs_export_documents (
  kind text NOT NULL CHECK (kind IN ('manifest', 'openapi')),
  checksum text NOT NULL,
  body text NOT NULL,
  fetched_at timestamptz NOT NULL,
  PRIMARY KEY (kind, checksum)
);

-- The server's value of a field where the column's type would give back a different one (an
-- offset other than Z, a NUL in PostgreSQL text, jsonb's key order). served_hash is the sha256 of
-- what the column gives back, so an original only applies while the stored value is unchanged.
CREATE TABLE _ocs_original_values (
  resource text NOT NULL,
  id bigint NOT NULL,
  column_name text NOT NULL,
  served_hash text NOT NULL,
  original text NOT NULL,
  PRIMARY KEY (resource, id, column_name, served_hash)
);
