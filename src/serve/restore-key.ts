import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { KeyError } from '../errors.js';
import { MIN_RSA_BITS } from '../sealing/keys.js';

/** The restore public key (PEM): RSA of at least 2048 bits, as the server accepts for a team. */
export function loadRestorePublicKey(file: string): KeyObject {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (error) {
    throw new KeyError(
      `Cannot read the public key file ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}.`,
    );
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch {
    throw new KeyError(`${file} is not a PEM public key.`, {
      hint: 'Use the ocs-team-public.pem written by `ocs-sync keygen`.',
    });
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < MIN_RSA_BITS) {
    throw new KeyError(
      `${file} is not an RSA public key of at least ${MIN_RSA_BITS} bits; the server's importer needs one.`,
    );
  }
  return key;
}
