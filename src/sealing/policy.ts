/**
 * The secrets policy: what the warehouse stores for a sealed field.
 * - plaintext: the opened value (JSON column). Needs the team's private key.
 * - sealed:    the server's token as it came (text column). Needs no key.
 * - reseal:    opened, then sealed again to the archive public key (text column). Needs both keys.
 * - drop:      null (text column). Needs no key.
 */
import type { KeyObject } from 'node:crypto';
import { ConfigError, KeyError, SealedValueError } from '../errors.js';
import type { ColumnType, Row, SealedFields } from '../interfaces.js';
import { isSealedToken } from './detect.js';
import type { SealedValueOpener } from './open-pool.js';
import type { OpeningPolicy } from './open-values.js';

import { SECRET_POLICIES, type SecretPolicy } from './policy-names.js';
export { SECRET_POLICIES, type SecretPolicy };

export interface SealingKeys {
  privateKey?: KeyObject;
  archivePublicKey?: Uint8Array;
}

export function isSecretPolicy(value: unknown): value is SecretPolicy {
  return typeof value === 'string' && (SECRET_POLICIES as readonly string[]).includes(value);
}

export function needsPrivateKey(policy: SecretPolicy): boolean {
  return policy === 'plaintext' || policy === 'reseal';
}

export function needsArchivePublicKey(policy: SecretPolicy): boolean {
  return policy === 'reseal';
}

/** The logical type of a sealed field's column under a policy. */
export function sealedColumnType(policy: SecretPolicy): ColumnType {
  return policy === 'plaintext' ? 'json' : 'text';
}

/** Throws KeyError when the keys do not cover what the policy needs. */
export function checkSealingKeys(policy: SecretPolicy, keys: SealingKeys): void {
  if (needsPrivateKey(policy) && keys.privateKey === undefined) {
    throw new KeyError(
      `The secrets policy "${policy}" needs the team's private key to open sealed fields.`,
      {
        hint: 'Set OCS_PRIVATE_KEY_FILE (or OCS_PRIVATE_KEY), or choose the "sealed" or "drop" policy.',
      },
    );
  }
  if (needsArchivePublicKey(policy) && keys.archivePublicKey === undefined) {
    throw new KeyError('The secrets policy "reseal" needs the archive public key.', {
      hint: 'Create one with `ocs-sync keygen --archive` and set archive_public_key (OCS_ARCHIVE_PUBLIC_KEY).',
    });
  }
}

/**
 * New row objects with each sealed field replaced as the policy says; the input is not changed.
 * `drop` stores null whatever came. Otherwise null and an empty string stay as they are (nothing
 * was sealed: the server seals every value it has, null included), a sealed value is transformed,
 * and any other value is refused in
 * a field the server's schema marks sealed (storing it could put an unsealed secret in the
 * warehouse) and kept as plain data in a field known sealed only from earlier values.
 *
 * The values a policy opens (`plaintext`, `reseal`) are opened as one batch by `opener` (the
 * pool of threads, or this thread when none is given); the first problem in row order, a value
 * that does not open or a plain value in a marked field, fails the whole page.
 */
export async function applySealingPolicy(
  resource: string,
  rows: Row[],
  sealed: SealedFields,
  policy: SecretPolicy,
  keys: SealingKeys,
  options: { opener?: Pick<SealedValueOpener, 'open'>; signal?: AbortSignal } = {},
): Promise<Row[]> {
  if (!isSecretPolicy(policy)) {
    throw new ConfigError([
      `unknown secrets policy ${JSON.stringify(policy)}; use one of ${SECRET_POLICIES.join(', ')}`,
    ]);
  }
  if (sealed.all.size === 0) return rows;
  checkSealingKeys(policy, keys);
  const copies: Row[] = [];
  /** Where each value to open sits, and the values, in row order. */
  const places: Array<{ row: number; field: string }> = [];
  const tokens: string[] = [];
  let refused: SealedValueError | undefined;
  scan: for (const row of rows) {
    const copy: Row = { ...row };
    copies.push(copy);
    for (const field of sealed.all) {
      if (!Object.prototype.hasOwnProperty.call(row, field)) continue;
      const value = row[field];
      if (policy === 'drop' || value === undefined) {
        copy[field] = null;
        continue;
      }
      if (value === null || value === '') continue;
      if (isSealedToken(value)) {
        // `sealed` keeps the token the copy already holds.
        if (policy === 'sealed') continue;
        places.push({ row: copies.length - 1, field });
        tokens.push(value);
      } else if (sealed.marked.has(field)) {
        // Nothing after it matters: the page is not stored.
        refused = new SealedValueError(
          resource,
          String(row.id),
          field,
          `the server's schema marks it sealed, but its value (a JSON ${jsonKind(value)}) is not a sealed value; the page was not stored`,
          "Report it to the server's operators; `secrets: {resources: {RESOURCE: drop}}` stores null for this resource's sealed fields meanwhile.",
        );
        break scan;
      }
    }
  }
  if (tokens.length > 0) {
    // Loaded only when used: the sync's page thread is always given the run's opener.
    const opener = options.opener ?? new (await import('./open-pool.js')).InThreadOpener(keys);
    const opened = await opener.open(policy as OpeningPolicy, tokens, options.signal);
    const [failure] = opened.failures;
    if (failure !== undefined) {
      const place = places[failure.index]!;
      throw new SealedValueError(
        resource,
        String(rows[place.row]!.id),
        place.field,
        failure.reason,
      );
    }
    places.forEach((place, index) => {
      copies[place.row]![place.field] = opened.values[index];
    });
  }
  if (refused) throw refused;
  return copies;
}

function jsonKind(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  return typeof value === 'object' ? 'object' : typeof value;
}
