/**
 * Sealing, exactly as the server does it: a fresh Fernet key per value, the value's JSON (Python
 * `json.dumps` form) encrypted into a Fernet token, the Fernet key's base64url text wrapped with
 * RSA-OAEP (SHA-256, MGF1 SHA-256) under the team's public key, and the envelope
 * base64(`{"k": base64(wrapped), "v": token}`). Used by the fake server and by tests; the sync
 * itself only opens values.
 */
import { constants, createPublicKey, publicEncrypt, type KeyObject } from 'node:crypto';
import { fernetEncrypt, generateFernetKeyText, type FernetEncryptOptions } from './fernet.js';
import { encodeJson } from './json-text.js';

export const RSA_OAEP_HASH = 'sha256';

export function sealValue(
  value: unknown,
  publicKey: KeyObject | string,
  options: FernetEncryptOptions = {},
): string {
  const key = typeof publicKey === 'string' ? createPublicKey(publicKey) : publicKey;
  // The server wraps the key *text* Fernet.generate_key() returns, not the 32 raw bytes.
  const fernetKeyText = generateFernetKeyText();
  const fernetKey = Buffer.from(fernetKeyText, 'base64url');
  const token = fernetEncrypt(fernetKey, Buffer.from(encodeJson(value, 'python'), 'utf8'), options);
  const wrapped = publicEncrypt(
    { key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: RSA_OAEP_HASH },
    Buffer.from(fernetKeyText, 'ascii'),
  );
  const envelope = `{"k": ${JSON.stringify(wrapped.toString('base64'))}, "v": ${JSON.stringify(token)}}`;
  return Buffer.from(envelope, 'utf8').toString('base64');
}
