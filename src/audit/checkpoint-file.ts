/**
 * The checkpoint file (audit.checkpoint_file): one JSON line per checkpoint, appended at the end of
 * every run, for the operator to ship off the machine. Created private (data_file_mode, 0600 by
 * default: src/private-files.ts). A line is the canonical JSON of the signed checkpoint, so `audit
 * verify --checkpoints FILE` checks it exactly as the warehouse's copy.
 */
import { readFile } from 'node:fs/promises';
import { AuditError } from '../errors.js';
import {
  DEFAULT_PRIVATE_MODES,
  openPrivateAppendFile,
  type PrivateModes,
} from '../private-files.js';
import type { SignedCheckpoint } from '../interfaces.js';
import { CHECKPOINT_FORMAT } from '../warehouse/audit-chain.js';
import { canonicalJson } from '../warehouse/canonical.js';

/** The tail read to find the last line: far more than one checkpoint line. */
const TAIL_BYTES = 64 * 1024;

export function checkpointLine(checkpoint: SignedCheckpoint): string {
  return canonicalJson(checkpoint);
}

/**
 * Appends the checkpoints newer than the file's last line (a run killed after storing its
 * checkpoint and before writing it here gets it written by the next run). Returns how many.
 */
export async function appendCheckpoints(
  file: string,
  newerThan: (seq: number) => Promise<SignedCheckpoint[]>,
  modes: PrivateModes = DEFAULT_PRIVATE_MODES,
): Promise<number> {
  let handle;
  try {
    handle = await openPrivateAppendFile(file, modes);
  } catch (error) {
    throw fileError(file, error);
  }
  try {
    const { size } = await handle.stat();
    const start = Math.max(0, size - TAIL_BYTES);
    const tail = Buffer.alloc(size - start);
    if (tail.length > 0) await handle.read(tail, 0, tail.length, start);
    const lines = tail
      .toString('utf8')
      .split('\n')
      .filter((line) => line.trim() !== '');
    const last = lines.length > 0 ? parseLine(lines[lines.length - 1]!) : undefined;
    const lastSeq = last && 'checkpoint' in last ? last.checkpoint.seq : 0;
    const missing = await newerThan(lastSeq);
    if (missing.length === 0) return 0;
    // A file cut off mid-line (a disk that filled up) gets its next line on a line of its own.
    const separator = tail.length > 0 && tail[tail.length - 1] !== 0x0a ? '\n' : '';
    await handle.appendFile(
      separator + missing.map((checkpoint) => `${checkpointLine(checkpoint)}\n`).join(''),
      'utf8',
    );
    await handle.sync();
    return missing.length;
  } catch (error) {
    throw fileError(file, error);
  } finally {
    await handle.close();
  }
}

export interface CheckpointFile {
  path: string;
  checkpoints: SignedCheckpoint[];
  /** Lines that are not a checkpoint, with their line number (1-based). */
  unreadable: Array<{ line: number; reason: string }>;
}

export async function readCheckpointFile(file: string): Promise<CheckpointFile> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw fileError(file, error);
  }
  const result: CheckpointFile = { path: file, checkpoints: [], unreadable: [] };
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const parsed = parseLine(line);
    if ('checkpoint' in parsed) result.checkpoints.push(parsed.checkpoint);
    else result.unreadable.push({ line: index + 1, reason: parsed.reason });
  });
  return result;
}

function parseLine(line: string): { checkpoint: SignedCheckpoint } | { reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { reason: 'not JSON' };
  }
  const record = value as Record<string, unknown>;
  if (record === null || typeof record !== 'object' || record.format !== CHECKPOINT_FORMAT) {
    return { reason: `not a checkpoint (format is not "${CHECKPOINT_FORMAT}")` };
  }
  const numbers = ['seq', 'previous_seq'].every((key) => Number.isSafeInteger(record[key]));
  const texts = ['head', 'time', 'key', 'signature'].every(
    (key) => typeof record[key] === 'string',
  );
  const run = record.run === null || Number.isSafeInteger(record.run);
  const counts =
    record.counts !== null &&
    typeof record.counts === 'object' &&
    Object.values(record.counts as object).every((count) => Number.isSafeInteger(count));
  if (!numbers || !texts || !run || !counts) return { reason: 'a checkpoint with missing fields' };
  return { checkpoint: record as unknown as SignedCheckpoint };
}

function fileError(file: string, error: unknown): AuditError {
  const code = (error as NodeJS.ErrnoException).code;
  return new AuditError(
    `The checkpoint file ${file} cannot be ${code === 'ENOENT' ? 'found' : 'used'} (${code ?? 'error'}).`,
    {
      hint:
        code === 'ENOENT'
          ? 'Check audit.checkpoint_file / --checkpoints and that its folder exists.'
          : 'Give this user read and write access to the file and its folder.',
    },
  );
}
