/**
 * Rows as the server rendered them: stored values read back, date-times in the server's form,
 * the server's own text where a column changed it, sealed fields sealed again.
 */
import type { KeyObject } from 'node:crypto';
import type { OriginalValue, Row } from '../interfaces.js';
import { isArchived, openArchived } from '../sealing/archive.js';
import { isSealedToken } from '../sealing/detect.js';
import { sealValue } from '../sealing/seal.js';
import { servedTimestamp, servedValueHash } from '../warehouse/original-values.js';
import { fromJsonText } from '../warehouse/values.js';
import type { ServedResource } from './plan.js';

export interface SealingForServe {
  /** The restore public key values are sealed to. */
  publicKey?: KeyObject;
  /** Opens values the `reseal` policy stored. */
  archiveSecretKey?: Uint8Array;
}

/** A value serve cannot render; the reason is safe to log (names no value). */
export class UnservableValueError extends Error {}

/** A sealed field's value as the server would send it. */
export function sealedForServe(
  value: unknown,
  sealing: SealingForServe,
  where: () => string,
): unknown {
  if (value === null || value === undefined) return null;
  // Kept as the server sent it (the `sealed` policy): served as it is.
  if (isSealedToken(value)) return value;
  let plain: unknown = value;
  if (isArchived(value)) {
    if (!sealing.archiveSecretKey) {
      throw new UnservableValueError(`${where()} is resealed to the archive key; no --archive-key`);
    }
    plain = openArchived(value, sealing.archiveSecretKey);
  }
  if (!sealing.publicKey) {
    throw new UnservableValueError(`${where()} is stored opened; no --public-key to seal it to`);
  }
  return sealValue(plain, sealing.publicKey);
}

/**
 * Renders read rows in place of the server: `id` first, then the columns in table order.
 * `originals` are those kept for these rows; one applies only while the stored value is the one
 * it was kept for.
 */
export function renderRows(
  resource: ServedResource,
  rows: readonly Row[],
  originals: readonly OriginalValue[],
  sealing: SealingForServe,
): Record<string, unknown>[] {
  const byKey = new Map<string, OriginalValue[]>();
  for (const original of originals) {
    const key = `${original.id}\u0000${original.column}`;
    const found = byKey.get(key);
    if (found) found.push(original);
    else byKey.set(key, [original]);
  }
  const sealed = new Set(resource.sealedFields);
  return rows.map((row) => {
    const id = String(row.id);
    const rendered: Record<string, unknown> = { id: row.id };
    for (const column of resource.columns) {
      let value: unknown = row[column.name] ?? null;
      if (column.type === 'datetime' && typeof value === 'string') value = servedTimestamp(value);
      const candidates = value === null ? undefined : byKey.get(`${id}\u0000${column.name}`);
      if (candidates) {
        const hash = servedValueHash(value);
        const original = candidates.find((candidate) => candidate.servedHash === hash);
        if (original) value = fromJsonText(original.original);
      }
      if (sealed.has(column.name)) {
        value = sealedForServe(
          value,
          sealing,
          () => `${resource.resource}.${column.name} of row ${id}`,
        );
      }
      rendered[column.name] = value;
    }
    return rendered;
  });
}
