/**
 * The Ed25519 key pair that signs checkpoints (tweetnacl): `ocs-sync keygen --signing` writes it,
 * a sync signs with the private key (audit.signing_key_file), `audit verify` checks with the
 * public key. Key files hold base64 text: the 32-byte seed (mode 0600) and the 32-byte public key.
 * No message here ever contains key material.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import nacl from 'tweetnacl';
import { KeyError } from '../errors.js';
import type { CheckpointSigner, SignedCheckpoint } from '../interfaces.js';
import { decodeBase64Lenient } from '../sealing/base64.js';
import { readKeyFile, warnIfExposed, writeNewKeyFiles } from '../sealing/keys.js';
import { checkpointText } from '../warehouse/audit-chain.js';

export const SIGNING_KEY_FILE = 'ocs-audit-signing.key';
export const SIGNING_PUBLIC_KEY_FILE = 'ocs-audit-signing.pub';

const SEED_LENGTH = nacl.sign.seedLength;
const SECRET_KEY_LENGTH = nacl.sign.secretKeyLength;
const PUBLIC_KEY_LENGTH = nacl.sign.publicKeyLength;

export interface SigningKeyFiles {
  privateKeyPath: string;
  publicKeyPath: string;
  /** Base64 of the 32-byte public key. */
  publicKey: string;
}

/** A new Ed25519 key pair; never overwrites. */
export async function generateSigningKeyPair(outDir: string): Promise<SigningKeyFiles> {
  const privateKeyPath = path.resolve(outDir, SIGNING_KEY_FILE);
  const publicKeyPath = path.resolve(outDir, SIGNING_PUBLIC_KEY_FILE);
  const seed = nacl.randomBytes(SEED_LENGTH);
  const publicKey = Buffer.from(nacl.sign.keyPair.fromSeed(seed).publicKey).toString('base64');
  await writeNewKeyFiles(outDir, [
    { file: privateKeyPath, content: `${Buffer.from(seed).toString('base64')}\n`, mode: 0o600 },
    { file: publicKeyPath, content: `${publicKey}\n`, mode: 0o644 },
  ]);
  return { privateKeyPath, publicKeyPath, publicKey };
}

/** Signs checkpoints with the key in `file` (its 32-byte seed, or tweetnacl's 64-byte secret key). */
export function loadSigner(file: string, warn: (message: string) => void): CheckpointSigner {
  const text = readKeyFile(file, 'audit signing key file');
  warnIfExposed(file, 'Audit signing key file', warn);
  const bytes = decodeBase64Lenient(text.trim());
  if (bytes === undefined || (bytes.length !== SEED_LENGTH && bytes.length !== SECRET_KEY_LENGTH)) {
    const what = bytes === undefined ? 'not base64' : `${bytes.length} bytes`;
    const publicKey =
      bytes?.length === PUBLIC_KEY_LENGTH ? ' (that is the size of a public key)' : '';
    throw new KeyError(
      `The audit signing key file ${file} does not hold an Ed25519 private key (${what}${publicKey}).`,
      { hint: `Use the ${SIGNING_KEY_FILE} written by \`ocs-sync keygen --signing\`.` },
    );
  }
  if (bytes.length === SEED_LENGTH && looksLikePublicKeyFile(file, bytes)) {
    throw new KeyError(
      `The audit signing key file ${file} holds the public key, not the private one; no checkpoint signed with it would verify.`,
      {
        hint: `Point audit.signing_key_file at ${SIGNING_KEY_FILE}; keep ${SIGNING_PUBLIC_KEY_FILE} for \`audit verify --public-key\`.`,
      },
    );
  }
  // A 64-byte secret key is its seed and its public key: the public half must be the seed's own
  // (tweetnacl does not check), or every signature would fail to verify.
  const pair = nacl.sign.keyPair.fromSeed(new Uint8Array(bytes.subarray(0, SEED_LENGTH)));
  if (
    bytes.length === SECRET_KEY_LENGTH &&
    !Buffer.from(pair.publicKey).equals(Buffer.from(bytes.subarray(SEED_LENGTH)))
  ) {
    throw new KeyError(
      `The audit signing key file ${file} does not hold an Ed25519 private key (64 bytes whose second half is not the public key of the first).`,
      { hint: `Use the ${SIGNING_KEY_FILE} written by \`ocs-sync keygen --signing\`.` },
    );
  }
  const publicKey = Buffer.from(pair.publicKey).toString('base64');
  return {
    publicKey,
    sign: (message) =>
      Buffer.from(nacl.sign.detached(Buffer.from(message, 'utf8'), pair.secretKey)).toString(
        'base64',
      ),
  };
}

/**
 * A seed and a public key are both 32 bytes, so only the file tells them apart: its name (keygen's
 * public key file, or any `.pub`), or the same bytes as keygen's public key file beside it.
 */
function looksLikePublicKeyFile(file: string, bytes: Buffer): boolean {
  const name = path.basename(file);
  if (name === SIGNING_PUBLIC_KEY_FILE || name.endsWith('.pub')) return true;
  try {
    const beside = readFileSync(path.join(path.dirname(file), SIGNING_PUBLIC_KEY_FILE), 'utf8');
    return decodeBase64Lenient(beside.trim())?.equals(bytes) === true;
  } catch {
    return false;
  }
}

/** The public key in `file` (base64 of 32 bytes, as keygen writes ocs-audit-signing.pub). */
export function loadPublicKey(file: string): string {
  const text = readKeyFile(file, 'audit public key file');
  const bytes = decodeBase64Lenient(text.trim());
  if (bytes === undefined || bytes.length !== PUBLIC_KEY_LENGTH) {
    throw new KeyError(
      `The audit public key file ${file} does not hold an Ed25519 public key ` +
        `(${bytes === undefined ? 'not base64' : `${bytes.length} bytes`}).`,
      { hint: `Use the ${SIGNING_PUBLIC_KEY_FILE} written by \`ocs-sync keygen --signing\`.` },
    );
  }
  return Buffer.from(bytes).toString('base64');
}

/** Whether the checkpoint's signature is valid for `publicKey` (base64). */
export function hasValidSignature(checkpoint: SignedCheckpoint, publicKey: string): boolean {
  const key = decodeBase64Lenient(publicKey);
  const signature = decodeBase64Lenient(checkpoint.signature);
  if (key?.length !== PUBLIC_KEY_LENGTH || signature?.length !== nacl.sign.signatureLength) {
    return false;
  }
  return nacl.sign.detached.verify(
    Buffer.from(checkpointText(checkpoint), 'utf8'),
    new Uint8Array(signature),
    new Uint8Array(key),
  );
}
