/**
 * Opening sealed values with the team's private key (the reverse of seal.ts). Every failure is a
 * SealedOpenError whose reason never carries the token, the plaintext or key material.
 */
import { constants, privateDecrypt, type KeyObject } from 'node:crypto';
import { decodeBase64Lenient } from './base64.js';
import { FERNET_KEY_LENGTH, fernetDecrypt } from './fernet.js';
import { decodeJson } from './json-text.js';
import { RSA_OAEP_HASH } from './seal.js';
import { SealedOpenError } from './sealed-open-error.js';

export { SealedOpenError } from './sealed-open-error.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The JSON value that was sealed; integers past 2^53 come back as bigint. */
export function openSealedValue(sealed: string, privateKey: KeyObject): unknown {
  if (typeof sealed !== 'string') throw new SealedOpenError('not a sealed value (not a string)');
  const { wrappedKey, token } = readEnvelope(sealed);
  const fernetKey = unwrapFernetKey(wrappedKey, privateKey);
  const plaintext = fernetDecrypt(fernetKey, token);
  let text: string;
  try {
    text = utf8.decode(plaintext);
  } catch {
    throw new SealedOpenError('plaintext is not UTF-8');
  }
  try {
    return decodeJson(text);
  } catch {
    throw new SealedOpenError('plaintext is not JSON');
  }
}

function readEnvelope(sealed: string): { wrappedKey: Buffer; token: string } {
  const bytes = decodeBase64Lenient(sealed);
  if (bytes === undefined || bytes.length === 0)
    throw new SealedOpenError('not a sealed value (not base64)');
  let envelope: unknown;
  try {
    envelope = JSON.parse(utf8.decode(bytes));
  } catch {
    throw new SealedOpenError('not a sealed value (envelope is not JSON)');
  }
  if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) {
    throw new SealedOpenError('not a sealed value (envelope is not a JSON object)');
  }
  const { k, v } = envelope as { k?: unknown; v?: unknown };
  if (typeof k !== 'string' || typeof v !== 'string') {
    throw new SealedOpenError('not a sealed value (envelope lacks the "k" and "v" texts)');
  }
  const wrappedKey = decodeBase64Lenient(k);
  if (wrappedKey === undefined || wrappedKey.length === 0) {
    throw new SealedOpenError('wrapped key ("k") is not base64');
  }
  return { wrappedKey, token: v };
}

function unwrapFernetKey(wrappedKey: Buffer, privateKey: KeyObject): Buffer {
  if (privateKey.type !== 'private')
    throw new SealedOpenError('a private key is needed to open sealed values');
  const modulusBytes = Math.ceil((privateKey.asymmetricKeyDetails?.modulusLength ?? 0) / 8);
  if (modulusBytes > 0 && wrappedKey.length !== modulusBytes) {
    throw new SealedOpenError(
      `key does not match (wrapped key is ${wrappedKey.length * 8} bits, private key is ${modulusBytes * 8})`,
    );
  }
  let unwrapped: Buffer;
  try {
    unwrapped = privateDecrypt(
      { key: privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: RSA_OAEP_HASH },
      wrappedKey,
    );
  } catch {
    throw new SealedOpenError('key does not match (RSA-OAEP failed)');
  }
  // The server wraps Fernet.generate_key()'s base64url text; raw 32 bytes are accepted too.
  if (unwrapped.length === FERNET_KEY_LENGTH) return unwrapped;
  const decoded = decodeBase64Lenient(unwrapped.toString('latin1'));
  if (decoded === undefined || decoded.length !== FERNET_KEY_LENGTH) {
    throw new SealedOpenError('unwrapped key is not a Fernet key');
  }
  return decoded;
}
