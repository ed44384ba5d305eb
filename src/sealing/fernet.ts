/**
 * Fernet tokens (https://github.com/fernet/spec) built from node:crypto primitives:
 * version 0x80 | 8-byte big-endian seconds | 16-byte IV | AES-128-CBC/PKCS7 ciphertext | HMAC-SHA256.
 * The 32-byte key: first 16 bytes sign, last 16 bytes encrypt.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import { decodeBase64Lenient } from './base64.js';
import { SealedOpenError } from './sealed-open-error.js';

const VERSION = 0x80;
const HEADER_LENGTH = 1 + 8 + 16;
const HMAC_LENGTH = 32;
const BLOCK_LENGTH = 16;
export const FERNET_KEY_LENGTH = 32;

export interface FernetEncryptOptions {
  /** Seconds since the epoch; defaults to now. */
  timestamp?: number;
  /** 16 bytes; defaults to random. */
  iv?: Buffer;
}

/** A new Fernet key as Python's `Fernet.generate_key()` returns it: base64url text of 32 random bytes. */
export function generateFernetKeyText(): string {
  return toPaddedBase64Url(randomBytes(FERNET_KEY_LENGTH));
}

/** Python's urlsafe_b64encode: url-safe alphabet, with `=` padding. */
function toPaddedBase64Url(bytes: Buffer): string {
  return bytes.toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
}

/** The token as base64url text with padding (as Python writes it). */
export function fernetEncrypt(
  key: Buffer,
  plaintext: Buffer,
  options: FernetEncryptOptions = {},
): string {
  if (key.length !== FERNET_KEY_LENGTH) throw new RangeError('A Fernet key is 32 bytes');
  const iv = options.iv ?? randomBytes(16);
  if (iv.length !== 16) throw new RangeError('A Fernet IV is 16 bytes');
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const header = Buffer.alloc(HEADER_LENGTH);
  header[0] = VERSION;
  header.writeBigUInt64BE(BigInt(timestamp), 1);
  iv.copy(header, 9);
  const cipher = createCipheriv('aes-128-cbc', key.subarray(16, 32), iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const signed = Buffer.concat([header, ciphertext]);
  const mac = createHmac('sha256', key.subarray(0, 16)).update(signed).digest();
  return toPaddedBase64Url(Buffer.concat([signed, mac]));
}

/**
 * Verify then decrypt. The HMAC is checked (in constant time) before any decryption so a tampered
 * token never reaches the cipher. Timestamps are not checked: sealed values have no time to live.
 */
export function fernetDecrypt(key: Buffer, token: string): Buffer {
  if (key.length !== FERNET_KEY_LENGTH)
    throw new SealedOpenError('unwrapped Fernet key is not 32 bytes');
  const bytes = decodeBase64Lenient(token);
  if (bytes === undefined) throw new SealedOpenError('Fernet token is not base64');
  const ciphertextLength = bytes.length - HEADER_LENGTH - HMAC_LENGTH;
  if (ciphertextLength < BLOCK_LENGTH || ciphertextLength % BLOCK_LENGTH !== 0) {
    throw new SealedOpenError('Fernet token has the wrong length');
  }
  if (bytes[0] !== VERSION) throw new SealedOpenError('Fernet token has an unknown version byte');
  const signed = bytes.subarray(0, bytes.length - HMAC_LENGTH);
  const mac = bytes.subarray(bytes.length - HMAC_LENGTH);
  const expected = createHmac('sha256', key.subarray(0, 16)).update(signed).digest();
  if (!timingSafeEqual(mac, expected))
    throw new SealedOpenError('HMAC mismatch: tampered or wrong key');
  const iv = bytes.subarray(9, HEADER_LENGTH);
  const decipher = createDecipheriv('aes-128-cbc', key.subarray(16, 32), iv);
  try {
    return Buffer.concat([
      decipher.update(bytes.subarray(HEADER_LENGTH, signed.length)),
      decipher.final(),
    ]);
  } catch {
    throw new SealedOpenError('bad padding');
  }
}
