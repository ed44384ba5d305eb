/**
 * Loading and generating keys: the team's RSA private key (opens sealed values) and the archive
 * X25519 key pair (reseal policy). No message here ever contains key material.
 */
import { createPrivateKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { constants as fsConstants, readFileSync } from 'node:fs';
import { access, mkdir, open, unlink } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import nacl from 'tweetnacl';
import { KeyError } from '../errors.js';
import { exposedMode } from '../private-files.js';
import { decodeBase64Lenient } from './base64.js';

export const MIN_RSA_BITS = 2048;
export const DEFAULT_RSA_BITS = 3072;
export const TEAM_PRIVATE_KEY_FILE = 'ocs-team-private.pem';
export const TEAM_PUBLIC_KEY_FILE = 'ocs-team-public.pem';
export const ARCHIVE_SECRET_KEY_FILE = 'ocs-archive-secret.key';
export const ARCHIVE_PUBLIC_KEY_FILE = 'ocs-archive-public.key';
export const ARCHIVE_KEY_LENGTH = nacl.box.publicKeyLength;

const PASSPHRASE_HINT = 'Set OCS_PRIVATE_KEY_PASSPHRASE to the passphrase of the private key.';

export interface PrivateKeySource {
  /** Path of a PEM file (OCS_PRIVATE_KEY_FILE / private_key_file). */
  file?: string;
  /** PEM text (OCS_PRIVATE_KEY). Literal `\n` sequences are accepted for one-line env values. */
  pem?: string;
  /** For an encrypted PEM (OCS_PRIVATE_KEY_PASSPHRASE). */
  passphrase?: string;
}

/** The team's RSA private key, checked to be RSA and at least 2048 bits. */
export function loadPrivateKey(
  source: PrivateKeySource,
  warn: (message: string) => void,
): KeyObject {
  const hasFile = source.file !== undefined && source.file !== '';
  const hasPem = source.pem !== undefined && source.pem.trim() !== '';
  if (hasFile && hasPem) {
    throw new KeyError(
      'Both a private key file and private key text (OCS_PRIVATE_KEY) are set; use only one.',
    );
  }
  if (!hasFile && !hasPem) {
    throw new KeyError('No private key given.', {
      hint: 'Set OCS_PRIVATE_KEY_FILE (or private_key_file) to a PEM file, or OCS_PRIVATE_KEY to the PEM text.',
    });
  }
  let pem: string;
  let origin: string;
  if (hasFile) {
    const file = source.file as string;
    origin = `private key file ${file}`;
    pem = readKeyFile(file, 'private key file');
    warnIfExposed(file, 'Private key file', warn);
  } else {
    origin = 'OCS_PRIVATE_KEY';
    pem = source.pem as string;
    if (!pem.includes('\n') && pem.includes('\\n')) pem = pem.replace(/\\n/g, '\n');
  }
  return parsePrivateKeyPem(pem, source.passphrase, origin);
}

function parsePrivateKeyPem(
  pem: string,
  passphrase: string | undefined,
  origin: string,
): KeyObject {
  if (
    /-----BEGIN (RSA )?PUBLIC KEY-----/.test(pem) &&
    !/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)
  ) {
    throw new KeyError(
      `The ${origin} holds a public key; ocs-sync needs the matching private key.`,
    );
  }
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)) {
    throw new KeyError(
      `The ${origin} is not a PEM private key (expected a "-----BEGIN PRIVATE KEY-----" or ` +
        '"-----BEGIN RSA PRIVATE KEY-----" block).',
    );
  }
  const encrypted = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type:\s*4,ENCRYPTED/.test(pem);
  const hasPassphrase = passphrase !== undefined && passphrase !== '';
  if (encrypted && !hasPassphrase) {
    throw new KeyError(`The ${origin} is encrypted and no passphrase was given.`, {
      hint: PASSPHRASE_HINT,
    });
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({
      key: pem,
      format: 'pem',
      passphrase: hasPassphrase ? passphrase : undefined,
    });
  } catch {
    // OpenSSL's own message adds nothing useful and must not be trusted to be free of key data.
    if (encrypted) {
      throw new KeyError(`Could not decrypt the ${origin}: wrong passphrase?`, {
        hint: PASSPHRASE_HINT,
      });
    }
    throw new KeyError(
      `The ${origin} could not be read as a private key (damaged or unsupported PEM).`,
    );
  }
  checkRsaKey(key, origin);
  return key;
}

function checkRsaKey(key: KeyObject, origin: string): void {
  const type = key.asymmetricKeyType;
  if (type !== 'rsa') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    const found =
      type === 'rsa-pss'
        ? 'an RSA-PSS key (signing only)'
        : `a key of type ${type ?? 'unknown'}${curve ? ` (curve ${curve})` : ''}`;
    throw new KeyError(
      `The ${origin} holds ${found}; sealed values need an RSA key (RSA-OAEP) of at least ${MIN_RSA_BITS} bits.`,
    );
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < MIN_RSA_BITS) {
    throw new KeyError(
      `The ${origin} holds an RSA key of ${bits} bits; at least ${MIN_RSA_BITS} bits are needed.`,
      {
        hint: 'Generate a new key pair with `ocs-sync keygen` and register its public key on the team.',
      },
    );
  }
}

export function readKeyFile(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EACCES' || code === 'EPERM'
          ? 'cannot be read (permission denied)'
          : code === 'EISDIR'
            ? 'is a directory'
            : `cannot be read (${code ?? 'unknown error'})`;
    throw new KeyError(`The ${what} ${keyFileShown(file)} ${why}.`);
  }
}

/**
 * A key file's name for a message when it cannot be read: a path as written when it holds a `/`
 * (as `/run/secrets/…` and `./NAME` do), else not at all, since a key pasted there by mistake
 * would be printed for anyone who reads the logs.
 */
export function keyFileShown(file: string): string {
  return file.includes('/')
    ? file
    : '(name not shown: it has no / and may be a key written there by mistake; write a file of this folder as ./NAME)';
}

/**
 * Warn when anyone but the owner may read (or change) a secret key file. A key in a Kubernetes
 * Secret volume is owned by root and readable by the pod's group (fsGroup), which is the only way
 * a non-root pod can read it: group access there is no warning, others' access still is.
 */
export function warnIfExposed(file: string, what: string, warn: (message: string) => void): void {
  const mode = exposedMode(file);
  if (mode === undefined) return;
  warn(
    `${what} ${file} is accessible to group or others (mode ${mode.toString(8).padStart(4, '0')}); ` +
      `restrict it with: chmod 600 ${file}`,
  );
}

export interface TeamKeyPairFiles {
  privateKeyPath: string;
  publicKeyPath: string;
  publicKeyPem: string;
}

/**
 * A new RSA key pair for the team: `ocs-team-private.pem` (PKCS#8, mode 0600) and
 * `ocs-team-public.pem` (SPKI, to register on the team). Never overwrites.
 */
export async function generateTeamKeyPair(
  outDir: string,
  bits = DEFAULT_RSA_BITS,
): Promise<TeamKeyPairFiles> {
  if (!Number.isInteger(bits) || bits < MIN_RSA_BITS || bits > 16384) {
    throw new KeyError(
      `RSA key size ${bits} is not allowed; use ${MIN_RSA_BITS} to 16384 bits (default ${DEFAULT_RSA_BITS}).`,
    );
  }
  const privateKeyPath = path.resolve(outDir, TEAM_PRIVATE_KEY_FILE);
  const publicKeyPath = path.resolve(outDir, TEAM_PUBLIC_KEY_FILE);
  await prepareOutput(outDir, [privateKeyPath, publicKeyPath]);
  const { privateKey, publicKey } = await promisify(generateKeyPair)('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  await writeKeyFiles([
    { file: privateKeyPath, content: privateKey, mode: 0o600 },
    { file: publicKeyPath, content: publicKey, mode: 0o644 },
  ]);
  return { privateKeyPath, publicKeyPath, publicKeyPem: publicKey };
}

export interface ArchiveKeyPairFiles {
  secretKeyPath: string;
  publicKeyPath: string;
  /** Base64 of the 32-byte X25519 public key (what `archive_public_key` takes). */
  publicKey: string;
}

/** A new X25519 key pair for the reseal policy: base64 text files, the secret one mode 0600. */
export async function generateArchiveKeyPair(outDir: string): Promise<ArchiveKeyPairFiles> {
  const secretKeyPath = path.resolve(outDir, ARCHIVE_SECRET_KEY_FILE);
  const publicKeyPath = path.resolve(outDir, ARCHIVE_PUBLIC_KEY_FILE);
  await prepareOutput(outDir, [secretKeyPath, publicKeyPath]);
  const pair = nacl.box.keyPair();
  const publicKey = Buffer.from(pair.publicKey).toString('base64');
  await writeKeyFiles([
    {
      file: secretKeyPath,
      content: Buffer.from(pair.secretKey).toString('base64') + '\n',
      mode: 0o600,
    },
    { file: publicKeyPath, content: publicKey + '\n', mode: 0o644 },
  ]);
  return { secretKeyPath, publicKeyPath, publicKey };
}

/** The archive secret key from its file (base64 of 32 bytes). */
export function loadArchiveSecretKey(file: string, warn?: (message: string) => void): Uint8Array {
  const text = readKeyFile(file, 'archive secret key file');
  if (warn) warnIfExposed(file, 'Archive secret key file', warn);
  const bytes = decodeBase64Lenient(text.trim());
  if (bytes === undefined || bytes.length !== ARCHIVE_KEY_LENGTH) {
    throw new KeyError(
      `The archive secret key file ${file} does not hold a base64 ${ARCHIVE_KEY_LENGTH}-byte key ` +
        `(${bytes === undefined ? 'not base64' : `${bytes.length} bytes`}).`,
      { hint: 'Use the ocs-archive-secret.key written by `ocs-sync keygen --archive`.' },
    );
  }
  return new Uint8Array(bytes);
}

/** The archive public key from its base64 text (archive_public_key / OCS_ARCHIVE_PUBLIC_KEY). */
export function parseArchivePublicKey(base64: string): Uint8Array {
  const bytes = decodeBase64Lenient(base64.trim());
  if (bytes === undefined || bytes.length !== ARCHIVE_KEY_LENGTH) {
    throw new KeyError(
      `The archive public key is not a base64 ${ARCHIVE_KEY_LENGTH}-byte key ` +
        `(${bytes === undefined ? 'not base64' : `${bytes.length} bytes`}).`,
      { hint: 'Use the text of ocs-archive-public.key written by `ocs-sync keygen --archive`.' },
    );
  }
  return new Uint8Array(bytes);
}

async function prepareOutput(outDir: string, files: string[]): Promise<void> {
  try {
    await mkdir(outDir, { recursive: true, mode: 0o700 });
  } catch {
    throw new KeyError(`Cannot create the key directory ${outDir}.`);
  }
  for (const file of files) {
    const exists = await access(file, fsConstants.F_OK).then(
      () => true,
      () => false,
    );
    if (exists) {
      throw new KeyError(`Refusing to overwrite ${file}: it already exists.`, {
        hint: 'Move the existing key away first, or choose another directory with --out.',
      });
    }
  }
}

/** New key files in `outDir` (created 0700 when missing): refuses to overwrite any. */
export async function writeNewKeyFiles(
  outDir: string,
  files: Array<{ file: string; content: string; mode: number }>,
): Promise<void> {
  await prepareOutput(
    outDir,
    files.map(({ file }) => file),
  );
  await writeKeyFiles(files);
}

/** Write each file exclusively; on any failure remove what this call created. */
async function writeKeyFiles(
  files: Array<{ file: string; content: string; mode: number }>,
): Promise<void> {
  const created: string[] = [];
  try {
    for (const { file, content, mode } of files) {
      let handle;
      try {
        handle = await open(file, 'wx', mode);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        throw new KeyError(
          code === 'EEXIST'
            ? `Refusing to overwrite ${file}: it already exists.`
            : `Cannot write ${file} (${code ?? 'error'}).`,
        );
      }
      created.push(file);
      try {
        // Exact mode regardless of the umask.
        await handle.chmod(mode);
        await handle.writeFile(content, 'utf8');
        await handle.sync();
      } catch (error) {
        throw new KeyError(
          `Cannot write ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'}).`,
        );
      } finally {
        await handle.close();
      }
    }
  } catch (error) {
    await Promise.all(created.map((file) => unlink(file).catch(() => undefined)));
    throw error;
  }
}
