/**
 * The end of a run with audit on: a checkpoint of the chain's head, signed with the operator's key,
 * stored in the warehouse and appended to the checkpoint file. A failure here loses nothing already
 * stored; it is reported (the run exits 3) and the next run writes the missing lines.
 */
import { describeError } from '../errors.js';
import type { AuditOutcome, AuditStore, CheckpointSigner } from '../interfaces.js';
import type { Logger } from '../log.js';
import type { PrivateModes } from '../private-files.js';
import { appendCheckpoints } from './checkpoint-file.js';
import { keyId } from './key-id.js';

export async function writeCheckpoint(
  audit: AuditStore,
  signer: CheckpointSigner,
  file: string,
  logger: Logger,
  modes?: PrivateModes,
): Promise<AuditOutcome> {
  try {
    const checkpoint = await audit.checkpoint(signer);
    const { appended, tornLine } = await appendCheckpoints(
      file,
      (seq) => audit.checkpoints(seq),
      modes,
    );
    if (tornLine) {
      logger.warn(
        { file },
        'The last line of the checkpoint file was cut short (a crash or a full disk): it is kept on a line of its own, and the checkpoints after the last whole line are written whole after it',
      );
    }
    if (checkpoint) {
      logger.info(
        { run: checkpoint.run, seq: checkpoint.seq, key: keyId(signer.publicKey), file },
        `Audit checkpoint at entry ${checkpoint.seq} signed and appended to ${file}`,
      );
    }
    return {
      checkpoint: checkpoint && { run: checkpoint.run, seq: checkpoint.seq, head: checkpoint.head },
      appended,
      checkpointFile: file,
    };
  } catch (error) {
    const message = describeError(error);
    logger.error({ err: message, file }, 'The audit checkpoint could not be written');
    return { checkpointFile: file, error: message };
  }
}
