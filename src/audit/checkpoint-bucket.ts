/**
 * Signed checkpoints in a bucket (`audit.checkpoint_file: s3://bucket/prefix/`): one object a
 * checkpoint, `<prefix>/<seq>.json`, holding the same canonical JSON as a line of the checkpoint
 * file. Written once (`If-None-Match: *`, after a HEAD), never replaced; with
 * `audit.checkpoint_retention`, under Object Lock retention, so nobody (in compliance mode, not
 * even the bucket's owner) can delete or change one before it ends. A run that adds no entry
 * signs the same head again: the bucket keeps the first checkpoint of each head, and the
 * warehouse all of them. A checkpoint a run could not upload is uploaded by the next run.
 */
import type { SignedCheckpoint } from '../interfaces.js';
import type { ObjectStore, RetentionMode } from '../storage/store.js';
import { readObjectText } from '../storage/store.js';
import { checkpointLine, parseCheckpointLine, type CheckpointFile } from './checkpoint-file.js';
import { createHash } from 'node:crypto';

const OBJECT_NAME = /^(\d{1,15})\.json$/;
/** Looked for one by one, newest first, before the bucket is listed instead. */
const HEADS_BEFORE_LISTING = 16;
/** Objects read at once by `audit verify`. */
const READS_AT_ONCE = 8;

export function checkpointKey(seq: number): string {
  return `${seq}.json`;
}

export interface Retention {
  mode: RetentionMode;
  days: number;
}

/**
 * Uploads the stored checkpoints the bucket lacks, oldest first; how many. `all` is every stored
 * checkpoint, oldest first (the warehouse's).
 */
export async function uploadCheckpoints(
  store: ObjectStore,
  all: readonly SignedCheckpoint[],
  retention?: Retention,
  now: () => number = Date.now,
): Promise<number> {
  // The first checkpoint of each head (seq).
  const bySeq = new Map<number, SignedCheckpoint>();
  for (const checkpoint of all)
    if (!bySeq.has(checkpoint.seq)) bySeq.set(checkpoint.seq, checkpoint);
  const ordered = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
  const missing = await missingFromBucket(store, ordered);
  for (const checkpoint of missing) {
    const body = Buffer.from(`${checkpointLine(checkpoint)}\n`, 'utf8');
    await store.put(checkpointKey(checkpoint.seq), body, {
      ifAbsent: true,
      sha256: createHash('sha256').update(body).digest('hex'),
      contentType: 'application/json',
      ...(retention
        ? {
            retention: {
              mode: retention.mode,
              until: new Date(now() + retention.days * 24 * 60 * 60 * 1000),
            },
          }
        : {}),
    });
  }
  return missing.length;
}

/** The checkpoints after the newest one the bucket holds (usually the last run's only). */
async function missingFromBucket(
  store: ObjectStore,
  ordered: readonly SignedCheckpoint[],
): Promise<SignedCheckpoint[]> {
  for (let back = 1; back <= Math.min(HEADS_BEFORE_LISTING, ordered.length); back += 1) {
    const index = ordered.length - back;
    if ((await store.head(checkpointKey(ordered[index]!.seq))) !== undefined) {
      return ordered.slice(index + 1);
    }
  }
  if (ordered.length <= HEADS_BEFORE_LISTING) return [...ordered];
  const present = new Set<number>();
  for await (const object of store.list('')) {
    const match = OBJECT_NAME.exec(object.key);
    if (match) present.add(Number(match[1]));
  }
  return ordered.filter((checkpoint) => !present.has(checkpoint.seq));
}

/** Every checkpoint object under the location, as `audit verify` reads a checkpoint file. */
export async function readCheckpointBucket(store: ObjectStore): Promise<CheckpointFile> {
  const result: CheckpointFile = { path: store.location, checkpoints: [], unreadable: [] };
  const keys: string[] = [];
  for await (const object of store.list('')) {
    // Top level only: the prefix may hold other things below it (a team's files).
    if (!object.key.includes('/') && object.key.endsWith('.json')) keys.push(object.key);
  }
  keys.sort((a, b) => seqOf(a) - seqOf(b) || (a < b ? -1 : 1));
  const texts = new Array<string | undefined>(keys.length);
  let next = 0;
  const reader = async () => {
    while (next < keys.length) {
      const index = next++;
      texts[index] = await readObjectText(store, keys[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(READS_AT_ONCE, keys.length) }, reader));
  keys.forEach((key, index) => {
    const text = texts[index];
    if (text === undefined) return; // Deleted while listed.
    const line = text.replace(/\n$/, '');
    const parsed = line.includes('\n')
      ? { reason: 'more than one line' }
      : parseCheckpointLine(line);
    const seq = OBJECT_NAME.exec(key)?.[1];
    if ('checkpoint' in parsed && seq !== undefined && parsed.checkpoint.seq === Number(seq)) {
      result.checkpoints.push(parsed.checkpoint);
    } else {
      result.unreadable.push({
        line: index + 1,
        reason:
          'checkpoint' in parsed
            ? `named for entry ${seq ?? '?'} but holds the checkpoint of entry ${parsed.checkpoint.seq}`
            : parsed.reason,
        text: line.slice(0, 200),
        object: store.where(key),
      });
    }
  });
  return result;
}

function seqOf(key: string): number {
  const match = OBJECT_NAME.exec(key);
  return match ? Number(match[1]) : Number.MAX_SAFE_INTEGER;
}
