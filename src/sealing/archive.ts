/**
 * The archive format for the `reseal` policy: the value's JSON sealed with an anonymous
 * X25519/XSalsa20-Poly1305 box (tweetnacl) to the archive public key, so the warehouse holds
 * ciphertext that only the archive secret key (kept offline by compliance) can open.
 *
 * Text: `ocsarchive:v1:` + base64(ephemeralPublicKey(32) | nonce(24) | box).
 */
import nacl from 'tweetnacl';
import { KeyError } from '../errors.js';
import { decodeBase64Lenient } from './base64.js';
import { decodeJson, encodeJson } from './json-text.js';
import { SealedOpenError } from './sealed-open-error.js';

export const ARCHIVE_PREFIX = 'ocsarchive:v1:';
const KEY_LENGTH = nacl.box.publicKeyLength;
const NONCE_LENGTH = nacl.box.nonceLength;
const MIN_LENGTH = KEY_LENGTH + NONCE_LENGTH + nacl.box.overheadLength;

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function isArchived(text: unknown): text is string {
  return typeof text === 'string' && text.startsWith(ARCHIVE_PREFIX);
}

export function resealForArchive(value: unknown, archivePublicKey: Uint8Array): string {
  if (!(archivePublicKey instanceof Uint8Array) || archivePublicKey.length !== KEY_LENGTH) {
    throw new KeyError(`The archive public key must be ${KEY_LENGTH} bytes.`);
  }
  const ephemeral = nacl.box.keyPair();
  const nonce = nacl.randomBytes(NONCE_LENGTH);
  const message = new TextEncoder().encode(encodeJson(value, 'compact'));
  const box = nacl.box(message, nonce, archivePublicKey, ephemeral.secretKey);
  // The ephemeral secret key is not needed again; wipe it.
  ephemeral.secretKey.fill(0);
  const packed = Buffer.concat([ephemeral.publicKey, nonce, box]);
  return ARCHIVE_PREFIX + packed.toString('base64');
}

/** The value an archived text holds; SealedOpenError with a safe reason when it cannot be opened. */
export function openArchived(text: string, archiveSecretKey: Uint8Array): unknown {
  if (!(archiveSecretKey instanceof Uint8Array) || archiveSecretKey.length !== KEY_LENGTH) {
    throw new KeyError(`The archive secret key must be ${KEY_LENGTH} bytes.`);
  }
  if (!isArchived(text))
    throw new SealedOpenError(
      `not an archived value (no ${ARCHIVE_PREFIX} prefix)`,
      'archived value',
    );
  const packed = decodeBase64Lenient(text.slice(ARCHIVE_PREFIX.length));
  if (packed === undefined)
    throw new SealedOpenError('archived value is not base64', 'archived value');
  if (packed.length < MIN_LENGTH)
    throw new SealedOpenError('archived value is too short', 'archived value');
  const ephemeralPublicKey = packed.subarray(0, KEY_LENGTH);
  const nonce = packed.subarray(KEY_LENGTH, KEY_LENGTH + NONCE_LENGTH);
  const box = packed.subarray(KEY_LENGTH + NONCE_LENGTH);
  const message = nacl.box.open(box, nonce, ephemeralPublicKey, archiveSecretKey);
  if (message === null) {
    throw new SealedOpenError(
      'authentication failed: wrong archive secret key or tampered value',
      'archived value',
    );
  }
  let json: string;
  try {
    json = utf8.decode(message);
  } catch {
    throw new SealedOpenError('plaintext is not UTF-8', 'archived value');
  }
  try {
    return decodeJson(json);
  } catch {
    throw new SealedOpenError('plaintext is not JSON', 'archived value');
  }
}
