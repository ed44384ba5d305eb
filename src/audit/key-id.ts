import { createHash } from 'node:crypto';

/**
 * A short name of an Ed25519 public key (base64): the first 16 hex digits of its SHA-256. Apart
 * from signing.ts so that `status` shows it without loading tweetnacl.
 */
export function keyId(publicKey: string): string {
  return createHash('sha256').update(Buffer.from(publicKey, 'base64')).digest('hex').slice(0, 16);
}
