/**
 * Opening a batch of sealed values as a secrets policy says: `plaintext` stores the opened value,
 * `reseal` the value sealed again to the archive public key. The same function runs on a thread
 * of the pool (open-pool.ts, open-thread.ts) and, with `secrets.open_threads: 0`, on the sync's
 * thread. A value that does not open gives a reason that is safe to show: never the value, the
 * plaintext or key material.
 */
import type { KeyObject } from 'node:crypto';
import { resealForArchive } from './archive.js';
import { openSealedValue } from './open.js';
import { SealedOpenError } from './sealed-open-error.js';

/** The policies that open values (the others never need the private key). */
export type OpeningPolicy = 'plaintext' | 'reseal';

/** The keys a thread of the pool holds: handed over once, when it starts. */
export interface OpeningKeys {
  privateKey?: KeyObject;
  archivePublicKey?: Uint8Array;
}

export interface OpenedValues {
  /** What is stored for each value, by its index in the batch (undefined where it failed). */
  values: unknown[];
  /** The values that did not open, by index, lowest first. */
  failures: Array<{ index: number; reason: string }>;
}

export function openSealedValues(
  policy: OpeningPolicy,
  tokens: readonly string[],
  keys: OpeningKeys,
): OpenedValues {
  const values: unknown[] = new Array(tokens.length);
  const failures: OpenedValues['failures'] = [];
  const { privateKey, archivePublicKey } = keys;
  for (let index = 0; index < tokens.length; index++) {
    try {
      if (privateKey === undefined) {
        throw new SealedOpenError('a private key is needed to open sealed values');
      }
      const opened = openSealedValue(tokens[index]!, privateKey);
      if (policy === 'plaintext') {
        values[index] = opened;
      } else {
        if (archivePublicKey === undefined) {
          throw new SealedOpenError('the archive public key is needed to seal values again');
        }
        values[index] = resealForArchive(opened, archivePublicKey);
      }
    } catch (error) {
      // Only our own reasons are shown; anything else is named by its class, never its message
      // (which nothing guarantees to be free of the value).
      const reason =
        error instanceof SealedOpenError
          ? error.reason
          : `could not be opened (${error instanceof Error ? error.name : 'unknown error'})`;
      failures.push({ index, reason });
    }
  }
  return { values, failures };
}

/** What a thread of the pool serves (open-thread.ts): one chunk of a page's values at a time. */
export interface OpenThreadApi {
  open(policy: OpeningPolicy, tokens: readonly string[]): OpenedValues;
}
