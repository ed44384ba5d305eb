/**
 * The end of a run with audit on: a checkpoint of the chain's head, signed with the operator's key,
 * stored in the warehouse and appended to the checkpoint file (or uploaded to its bucket). A failure
 * here loses nothing already stored; it is reported (the run exits 3) and the next run writes the
 * missing lines (or objects).
 */
import { describeError } from '../errors.js';
import type { AuditOutcome, AuditStore, CheckpointSigner } from '../interfaces.js';
import type { Logger } from '../log.js';
import type { PrivateModes } from '../private-files.js';
import type { ObjectStore } from '../storage/store.js';
import { uploadCheckpoints, type Retention } from './checkpoint-bucket.js';
import { appendCheckpoints } from './checkpoint-file.js';
import { keyId } from './key-id.js';

/** Where checkpoints go: appended to a file, or one object each in a bucket. */
export type CheckpointTarget =
  | { kind: 'file'; file: string; modes?: PrivateModes }
  | { kind: 'bucket'; store: ObjectStore; retention?: Retention };

export async function writeCheckpoint(
  audit: AuditStore,
  signer: CheckpointSigner,
  target: CheckpointTarget,
  logger: Logger,
): Promise<AuditOutcome> {
  const file = target.kind === 'file' ? target.file : target.store.location;
  try {
    const checkpoint = await audit.checkpoint(signer);
    const { appended, tornLine } =
      target.kind === 'file'
        ? await appendCheckpoints(target.file, (seq) => audit.checkpoints(seq), target.modes)
        : {
            appended: await uploadCheckpoints(
              target.store,
              await audit.checkpoints(),
              target.retention,
            ),
            tornLine: false,
          };
    if (tornLine) {
      logger.warn(
        { file },
        'The last line of the checkpoint file was cut short (a crash or a full disk): it is kept on a line of its own, and the checkpoints after the last whole line are written whole after it',
      );
    }
    if (checkpoint) {
      logger.info(
        { run: checkpoint.run, seq: checkpoint.seq, key: keyId(signer.publicKey), file },
        target.kind === 'file'
          ? `Audit checkpoint at entry ${checkpoint.seq} signed and appended to ${file}`
          : `Audit checkpoint at entry ${checkpoint.seq} signed; ${appended} uploaded to ${file}`,
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
