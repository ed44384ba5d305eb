/** Keys of the warehouse's `_ocs_state` table, apart so read-only commands need not load the engine. */

/** The export schema checksum the tables were last brought up to. */
export const SCHEMA_CHECKSUM_STATE_KEY = 'schema_checksum';
/**
 * Every field known to hold sealed values, per resource (marked by the schema or seen sealed), a
 * JSON object of lists; kept for offline tools such as `unseal`, and so that a field once seen
 * sealed is treated as sealed from the first row of every later run.
 */
export const SEALED_FIELDS_STATE_KEY = 'sealed_fields';
/**
 * The fields the server's schema marks sealed, with the checksum of that schema, so a run whose
 * checksum is unchanged need not fetch the schema again: `{checksum, published, fields}`.
 */
export const MARKED_SEALED_FIELDS_STATE_KEY = 'sealed_fields_marked';
/** The last manifest's resources in its order (a JSON array), so `status` lists them that way. */
export const MANIFEST_ORDER_STATE_KEY = 'manifest_order';
/** Set when the warehouse keeps an audit chain: `{since}`. Once set, the chain stays on. */
export const AUDIT_STATE_KEY = 'audit';
/** The last `audit verify` result (VerificationRecord), for `status`. */
export const AUDIT_VERIFICATION_STATE_KEY = 'audit_last_verify';
/**
 * How long each resource's last complete walk took, from the start and from its cursor
 * (`{fromStart, resumed}`, milliseconds by resource), so that with `concurrency` above 1 the
 * longest walks start first (src/sync/walk-order.ts).
 */
export const WALK_DURATIONS_STATE_KEY = 'walk_durations';
