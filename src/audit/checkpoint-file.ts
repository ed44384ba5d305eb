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
 * Appends the checkpoints newer than the file's last whole checkpoint line (a run killed after
 * storing its checkpoint and before writing it here gets it written by the next run). A last line
 * cut short (a kill or a full disk mid-write) is a torn write, not a change: it is kept, never
 * cut away (the file only grows, and a copy already shipped holds it too), ended with a line break,
 * and the checkpoint it was is written whole after it; `audit verify` recognises it
 * (`tornCheckpointLines`). Returns how many checkpoints it wrote, and whether it ended a torn line.
 */
export async function appendCheckpoints(
  file: string,
  newerThan: (seq: number) => Promise<SignedCheckpoint[]>,
  modes: PrivateModes = DEFAULT_PRIVATE_MODES,
): Promise<{ appended: number; tornLine: boolean }> {
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
    const lines = tail.toString('utf8').split('\n');
    // After the last line break: '' in a whole file, else the start of a line cut short.
    const fragment = lines.pop() ?? '';
    // A tail read from mid-file starts mid-line.
    if (start > 0) lines.shift();
    const missing = await newerThan(lastCheckpointSeq(lines));
    const tornLine = fragment !== '';
    if (missing.length === 0 && !tornLine) return { appended: 0, tornLine };
    await handle.appendFile(
      (tornLine ? '\n' : '') +
        missing.map((checkpoint) => `${checkpointLine(checkpoint)}\n`).join(''),
      'utf8',
    );
    await handle.sync();
    return { appended: missing.length, tornLine };
  } catch (error) {
    throw fileError(file, error);
  } finally {
    await handle.close();
  }
}

/** The sequence number of the last whole checkpoint line; 0 when there is none. */
function lastCheckpointSeq(lines: readonly string[]): number {
  for (let index = lines.length - 1; index >= 0; index -= 1) {
    if (lines[index]!.trim() === '') continue;
    const parsed = parseCheckpointLine(lines[index]!);
    if ('checkpoint' in parsed) return parsed.checkpoint.seq;
  }
  return 0;
}

/**
 * Which unreadable lines are torn writes: a line that is the start of the line of a checkpoint
 * in `signed` (whole elsewhere in the file, or in the warehouse) is what a crash or a full disk
 * leaves, not a change. Returns the checkpoint each such line began, by line number.
 */
export function tornCheckpointLines(
  file: CheckpointFile,
  signed: readonly SignedCheckpoint[],
): Map<number, SignedCheckpoint> {
  const torn = new Map<number, SignedCheckpoint>();
  const whole = signed.map((checkpoint) => ({ checkpoint, line: checkpointLine(checkpoint) }));
  for (const { line, text, object } of file.unreadable) {
    if (object !== undefined) continue;
    const begun = whole.find((candidate) => candidate.line.startsWith(text));
    if (begun) torn.set(line, begun.checkpoint);
  }
  return torn;
}

export interface CheckpointFile {
  path: string;
  checkpoints: SignedCheckpoint[];
  /**
   * Lines that are not a checkpoint, with their line number (1-based) and their text; in a
   * bucket, objects that are not one (`object`: its s3:// name; never torn, as an object is
   * written whole or not at all).
   */
  unreadable: Array<{ line: number; reason: string; text: string; object?: string }>;
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
    const parsed = parseCheckpointLine(line);
    if ('checkpoint' in parsed) result.checkpoints.push(parsed.checkpoint);
    else result.unreadable.push({ line: index + 1, reason: parsed.reason, text: line });
  });
  return result;
}

export function parseCheckpointLine(
  line: string,
): { checkpoint: SignedCheckpoint } | { reason: string } {
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
