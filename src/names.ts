/**
 * Which names from the server may become SQL identifiers. Everything else is refused before it
 * gets near SQL (and identifiers are double-quoted as well).
 */

/** Resource (table) names: the documented rule. */
const SAFE_NAME = /^[a-z][a-z0-9_]{0,62}$/;

/**
 * Field names may also start with one underscore: the real export schema has
 * `custom_actions._operations` and `custom_action_operations._operation_schema`, and refusing them
 * would drop those fields from every sync. Such names must not collide with our own columns.
 */
const UNDERSCORE_FIELD = /^_[a-z][a-z0-9_]{0,61}$/;

/** Columns ocs-sync adds to resource and history tables. */
export const RESERVED_COLUMNS: ReadonlySet<string> = new Set([
  '_synced_at',
  '_run_id',
  '_deleted_at',
  '_version_id',
  '_valid_from',
  '_valid_to',
  '_content_hash',
  '_ocs_out_of_scope_since',
  '_ocs_served_under',
  '_ocs_version_kind',
]);

export function isSafeResourceName(name: string): boolean {
  return SAFE_NAME.test(name);
}

export function isSafeFieldName(name: string): boolean {
  if (SAFE_NAME.test(name)) return true;
  return UNDERSCORE_FIELD.test(name) && !RESERVED_COLUMNS.has(name) && !name.startsWith('_ocs');
}

/**
 * The value kept under a name from the server or the configuration, if any. Such names are keys
 * of plain records, and `constructor`, `toString` or `__proto__` must not find Object.prototype's
 * member of that name.
 */
export function valueByName<T>(
  record: Readonly<Record<string, T>> | undefined,
  name: string,
): T | undefined {
  return record !== undefined && Object.hasOwn(record, name) ? record[name] : undefined;
}

/** A record without a prototype, for names as keys (`__proto__` is then an ordinary key). */
export function recordByName<T>(entries: Iterable<readonly [string, T]> = []): Record<string, T> {
  const record = Object.create(null) as Record<string, T>;
  for (const [name, value] of entries) record[name] = value;
  return record;
}
