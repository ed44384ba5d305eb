/** Keys of the warehouse's `_ocs_state` table, apart so read-only commands need not load the engine. */

/** The export schema checksum the tables were last brought up to. */
export const SCHEMA_CHECKSUM_STATE_KEY = 'schema_checksum';
/** Which fields of which resources are sealed, kept for offline tools such as `unseal`. */
export const SEALED_FIELDS_STATE_KEY = 'sealed_fields';
/** The last manifest's resources in its order (a JSON array), so `status` lists them that way. */
export const MANIFEST_ORDER_STATE_KEY = 'manifest_order';
