import { ExitCode, UsageError } from '../errors.js';
import {
  DEFAULT_RSA_BITS,
  generateArchiveKeyPair,
  generateTeamKeyPair,
  loadArchiveSecretKey,
} from '../sealing/keys.js';
import { unsealArchived } from '../sealing/unseal.js';
import { keyId } from '../audit/key-id.js';
import { generateSigningKeyPair } from '../audit/signing.js';
import { SEALED_FIELDS_STATE_KEY } from '../warehouse/state-keys.js';
import type { CommandContext } from './context.js';
import { createWarehouse } from './wiring.js';

export async function runKeygenCommand(
  context: CommandContext,
  options: { out: string; bits: string; archive?: boolean; signing?: boolean },
): Promise<number> {
  const { out } = context.output;
  if (options.archive && options.signing) {
    throw new UsageError('--archive and --signing make different key pairs; give one of them.');
  }
  if (options.signing) {
    const pair = await generateSigningKeyPair(options.out);
    out(
      `Wrote the audit signing key to ${pair.privateKeyPath} (mode 0600) and its public key to ${pair.publicKeyPath} (key ${keyId(pair.publicKey)}).`,
    );
    out('');
    out('Sign a checkpoint at the end of every run:');
    out(`  OCS_AUDIT=true OCS_AUDIT_SIGNING_KEY_FILE=${pair.privateKeyPath} \\`);
    out('  OCS_AUDIT_CHECKPOINT_FILE=/path/to/ocs-checkpoints.jsonl npx ocs-sync sync');
    out('Ship the checkpoint file and the public key off this machine; verify with:');
    out(
      `  npx ocs-sync audit verify --public-key ${pair.publicKeyPath} --checkpoints /path/to/ocs-checkpoints.jsonl`,
    );
    return ExitCode.ok;
  }
  if (options.archive) {
    const archive = await generateArchiveKeyPair(options.out);
    out(`Wrote the archive secret key to ${archive.secretKeyPath} (mode 0600). Keep it offline.`);
    out('');
    out('Put the archive public key in the config of the machine that syncs:');
    out(`  secrets:\n    default: reseal\n    archive_public_key: ${archive.publicKey}`);
    out(`or: OCS_ARCHIVE_PUBLIC_KEY=${archive.publicKey}`);
    out('');
    out(`Open resealed values later with: ocs-sync unseal --archive-key ${archive.secretKeyPath}`);
    return ExitCode.ok;
  }
  const bits = Number(options.bits ?? DEFAULT_RSA_BITS);
  if (!Number.isInteger(bits))
    throw new UsageError(`--bits must be a whole number, got ${options.bits}.`);
  const pair = await generateTeamKeyPair(options.out, bits);
  out(
    `Wrote the team private key to ${pair.privateKeyPath} (mode 0600) and the public key to ${pair.publicKeyPath}.`,
  );
  out('');
  out(
    '1. Register this public key on your team in Open Chat Studio (team settings, export public key):',
  );
  out('');
  out(pair.publicKeyPem.trimEnd());
  out('');
  out('2. Give ocs-sync the private key:');
  out(`     OCS_PRIVATE_KEY_FILE=${pair.privateKeyPath} npx ocs-sync sync`);
  out('   Sealed fields are then stored opened (secrets.default: plaintext).');
  return ExitCode.ok;
}

export async function runUnsealCommand(
  context: CommandContext,
  options: { archiveKey: string; resource?: string[]; inPlace?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const logger = context.logger(config);
  const secretKey = loadArchiveSecretKey(options.archiveKey, (message) => logger.warn(message));
  const warehouse = await createWarehouse(config, logger, { mustExist: true });
  try {
    const recorded = await warehouse.bookkeeping.getState(SEALED_FIELDS_STATE_KEY);
    const sealedFields = recorded ? (JSON.parse(recorded) as Record<string, string[]>) : {};
    const wanted = options.resource;
    for (const name of wanted ?? []) {
      if (!Object.hasOwn(sealedFields, name)) {
        throw new UsageError(
          `The warehouse has no sealed fields recorded for ${JSON.stringify(name)}; known: ${Object.keys(sealedFields).join(', ') || 'none (run a sync first)'}.`,
        );
      }
    }
    const targets = Object.entries(sealedFields)
      .filter(([resource]) => !wanted || wanted.includes(resource))
      .flatMap(([table, columns]) => columns.map((column) => ({ table, column })));
    const result = await unsealArchived(warehouse, {
      secretKey,
      targets,
      inPlace: options.inPlace === true,
      write: (line) => context.output.out(line),
      onMissing: 'skip',
    });
    logger.info(result, `Unsealed ${result.opened} value(s)${options.inPlace ? ' in place' : ''}`);
    return ExitCode.ok;
  } finally {
    await warehouse.close();
  }
}
