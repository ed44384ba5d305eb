/**
 * `ocs-sync audit verify`: checks that the warehouse is exactly what its audit chain says, reading
 * one consistent snapshot in batches (memory stays flat whatever the archive's size):
 *
 * 1. The chain: sequence numbers without gaps, every entry's hash recomputed from its fields and
 *    the previous hash, the head row at its end, every checkpoint's signature, and the chain
 *    passing through every signed head (a chain rebuilt without the key cannot).
 * 2. Every resource table: the entries of each row replayed (AUDIT_OPERATIONS) give the versions
 *    the history table must hold, in order, with their times and kinds; each version's digest is
 *    recomputed from its stored values and the choice's key it was served under; the live row
 *    must be what the last entry left (deleted or not, out of the chatbot choice since when).
 * 3. Every chained bookkeeping table: each record's digest recomputed equals its last entry's.
 * 4. Every chatbot choice recorded: its key is the one its chatbots' ids give.
 */
import type {
  AuditEntry,
  AuditSnapshot,
  AuditedTable,
  ChatbotChoiceRecord,
  ChainHead,
  LiveRow,
  ProgressListener,
  SignedCheckpoint,
  StoredRecord,
  StoredVersion,
} from '../interfaces.js';
import {
  AUDITED_RECORD_TABLES,
  GENESIS_HASH,
  entryHash,
  operationRule,
} from '../warehouse/audit-chain.js';
import { selectionKey } from '../export-api/selection.js';
import { printable } from '../printable.js';
import { rowContentHasher } from '../warehouse/canonical.js';
import { tornCheckpointLines, type CheckpointFile } from './checkpoint-file.js';
import { keyId } from './key-id.js';
import type { Problem } from './problems.js';
import { replayRow } from './replay.js';
import { hasValidSignature } from './signing.js';

export interface VerifyReport {
  intact: boolean;
  head: ChainHead;
  entries: number;
  tables: number;
  versions: number;
  liveRows: number;
  records: number;
  checkpoints: {
    /** In the warehouse, in the file, and checked against the chain (distinct heads). */
    stored: number;
    file: number;
    checked: number;
    /** Whether signatures were checked against a public key given by the operator. */
    signatures: boolean;
    key?: string;
    filePath?: string;
  };
  /** The first `problemLimit` problems, ordered by sequence number where they have one. */
  problems: Problem[];
  problemCount: number;
  first?: Problem;
  /** What is worth knowing but changes nothing (a checkpoint line torn by a crash). */
  warnings: string[];
}

export interface VerifyOptions {
  snapshot: AuditSnapshot;
  /** The operator's public key (base64): checkpoints not signed by it are problems. */
  publicKey?: string;
  /** The off-box checkpoint file. */
  checkpointFile?: CheckpointFile;
  batchSize?: number;
  problemLimit?: number;
  /** Told after each batch: the chain's entries checked (of the head's), then each table's versions. */
  onProgress?: ProgressListener;
}

const DEFAULT_BATCH = 2000;

/** The longest problem detail kept (it quotes stored text). */
const DETAIL_LENGTH = 1000;

/** Reads a sorted list a batch at a time, after the last item read. */
class BatchCursor<T> {
  private buffer: T[] = [];
  private index = 0;
  private exhausted = false;

  constructor(
    private readonly fetch: (last: T | undefined) => Promise<T[]>,
    private readonly batchSize: number,
  ) {}

  async peek(): Promise<T | undefined> {
    if (this.index < this.buffer.length) return this.buffer[this.index];
    if (this.exhausted) return undefined;
    const last = this.buffer[this.buffer.length - 1];
    this.buffer = await this.fetch(last);
    this.index = 0;
    if (this.buffer.length < this.batchSize) this.exhausted = true;
    return this.buffer[0];
  }

  async next(): Promise<T | undefined> {
    const item = await this.peek();
    if (item !== undefined) this.index += 1;
    return item;
  }

  /** Every next item whose key is `key`. */
  async takeWhile(key: bigint, keyOf: (item: T) => string): Promise<T[]> {
    const taken: T[] = [];
    for (;;) {
      const item = await this.peek();
      if (item === undefined || BigInt(keyOf(item)) !== key) return taken;
      taken.push(item);
      this.index += 1;
    }
  }
}

function smallest(keys: Array<string | undefined>): bigint | undefined {
  let found: bigint | undefined;
  for (const key of keys) {
    if (key === undefined) continue;
    const value = BigInt(key);
    if (found === undefined || value < found) found = value;
  }
  return found;
}

/**
 * The problems found: the first `limit` kept, every one counted, and the first broken link kept
 * whenever it was found. The chain's own breaks (links, checkpoints) come first, since what
 * follows from them is their consequence; then the rest; each in entry order.
 */
class Findings {
  readonly list: Problem[] = [];
  count = 0;
  first?: Problem;
  private readonly chainBreaks = new Set<Problem>();

  constructor(private readonly limit: number) {}

  add(problem: Problem, chainBreak = false): void {
    // What a problem quotes comes from the warehouse, where anyone with write access may have put
    // control characters or pages of text: escaped and cut before it is shown or kept.
    problem.detail = printable(problem.detail, { max: DETAIL_LENGTH });
    if (problem.table !== undefined) problem.table = printable(problem.table, { max: 200 });
    this.count += 1;
    if (chainBreak) this.chainBreaks.add(problem);
    if (this.list.length < this.limit) this.list.push(problem);
    if (!this.first || this.compare(problem, this.first) < 0) this.first = problem;
  }

  addChainBreak(problem: Problem): void {
    this.add(problem, true);
  }

  compare(left: Problem, right: Problem): number {
    const rank = (problem: Problem) => (this.chainBreaks.has(problem) ? 0 : 1);
    return rank(left) - rank(right) || (left.seq ?? Infinity) - (right.seq ?? Infinity);
  }

  /** The kept problems in that order, the first broken link first. */
  sorted(): Problem[] {
    const kept = [...this.list].sort((left, right) => this.compare(left, right));
    return this.first && !kept.includes(this.first) ? [this.first, ...kept] : kept;
  }
}

export async function verifyAudit(options: VerifyOptions): Promise<VerifyReport> {
  const { snapshot } = options;
  const batchSize = options.batchSize ?? DEFAULT_BATCH;
  const findings = new Findings(options.problemLimit ?? 100);
  const stored = await snapshot.checkpoints();
  const warnings: string[] = [];
  const trusted = checkCheckpoints(stored, options, findings, warnings);
  const chain = await walkChain(snapshot, trusted, batchSize, findings, options.onProgress);
  const counts = { tables: 0, versions: 0, liveRows: 0, records: 0 };

  const known = await snapshot.tables();
  const knownNames = new Set(known.map((table) => table.table));
  const recordTables = new Set<string>(AUDITED_RECORD_TABLES);
  const chainedOnly = [...chain.tables].filter(
    (name) => !knownNames.has(name) && !recordTables.has(name),
  );
  const tables = [
    ...known,
    ...(await Promise.all(chainedOnly.map((name) => snapshot.table(name)))),
  ];
  for (const table of tables) {
    if (table.table.startsWith('_ocs_')) continue;
    counts.tables += 1;
    const seen = await verifyTable(snapshot, table, batchSize, findings, options.onProgress);
    counts.versions += seen.versions;
    counts.liveRows += seen.liveRows;
  }
  for (const table of AUDITED_RECORD_TABLES) {
    counts.records += await verifyRecords(snapshot, table, batchSize, findings);
  }
  verifyChoices(await snapshot.chatbotChoices(), findings);

  const problems = findings.sorted();
  return {
    intact: findings.count === 0,
    head: chain.head,
    entries: chain.entries,
    ...counts,
    checkpoints: {
      stored: stored.length,
      file: options.checkpointFile?.checkpoints.length ?? 0,
      checked: trusted.length,
      signatures: options.publicKey !== undefined,
      key: options.publicKey === undefined ? undefined : keyId(options.publicKey),
      filePath: options.checkpointFile?.path,
    },
    problems,
    problemCount: findings.count,
    first: findings.first,
    warnings,
  };
}

function describeCheckpoint(checkpoint: SignedCheckpoint): string {
  return `the checkpoint of run ${checkpoint.run ?? '-'} (seq ${checkpoint.seq})`;
}

function sameCheckpoint(left: SignedCheckpoint, right: SignedCheckpoint): boolean {
  return (
    left.run === right.run &&
    left.seq === right.seq &&
    left.head === right.head &&
    left.previous_seq === right.previous_seq &&
    left.time === right.time &&
    left.key === right.key &&
    left.signature === right.signature &&
    JSON.stringify(Object.entries(left.counts).sort()) ===
      JSON.stringify(Object.entries(right.counts).sort())
  );
}

/**
 * Signatures, and the warehouse's checkpoints against the file's. Returns the checkpoints the
 * chain must pass through: those signed by the operator's key (or, without one, every checkpoint
 * whose signature holds for the key it names), one per sequence number.
 */
function checkCheckpoints(
  stored: SignedCheckpoint[],
  options: VerifyOptions,
  findings: Findings,
  warnings: string[],
): SignedCheckpoint[] {
  const file = options.checkpointFile;
  const trusted = new Map<number, SignedCheckpoint>();
  const signed: SignedCheckpoint[] = [];
  const judge = (checkpoint: SignedCheckpoint, where: string) => {
    const key = options.publicKey ?? checkpoint.key;
    if (options.publicKey !== undefined && checkpoint.key !== options.publicKey) {
      findings.addChainBreak({
        kind: 'checkpoint_unsigned',
        seq: checkpoint.seq,
        detail: `${describeCheckpoint(checkpoint)} in ${where} names another key (${keyId(checkpoint.key)}), not ${keyId(options.publicKey)}`,
      });
      return;
    }
    if (!hasValidSignature(checkpoint, key)) {
      findings.addChainBreak({
        kind: options.publicKey === undefined ? 'checkpoint_edited' : 'checkpoint_unsigned',
        seq: checkpoint.seq,
        detail: `${describeCheckpoint(checkpoint)} in ${where} is not signed by key ${keyId(key)}: its signature does not match what it says`,
      });
      return;
    }
    signed.push(checkpoint);
    if (!trusted.has(checkpoint.seq)) trusted.set(checkpoint.seq, checkpoint);
  };
  for (const checkpoint of stored) judge(checkpoint, '_ocs_audit_checkpoints');
  if (file) {
    for (const checkpoint of file.checkpoints) {
      judge(checkpoint, `the checkpoint file ${file.path}`);
      const twin = stored.find(
        (candidate) => candidate.seq === checkpoint.seq && candidate.run === checkpoint.run,
      );
      if (!twin) {
        findings.addChainBreak({
          kind: 'checkpoint_deleted',
          seq: checkpoint.seq,
          detail: `${describeCheckpoint(checkpoint)} in the checkpoint file is missing from _ocs_audit_checkpoints`,
        });
      } else if (!sameCheckpoint(twin, checkpoint)) {
        findings.addChainBreak({
          kind: 'checkpoint_edited',
          seq: checkpoint.seq,
          detail: `${describeCheckpoint(checkpoint)} in _ocs_audit_checkpoints differs from the one in the checkpoint file`,
        });
      }
    }
  }
  if (file) checkUnreadableLines(file, signed, findings, warnings);
  return [...trusted.values()].sort((left, right) => left.seq - right.seq);
}

/**
 * A line of the checkpoint file that is not a checkpoint is a change, unless it is the start of
 * a signed checkpoint's line: what a crash or a full disk leaves of a write (a warning).
 */
function checkUnreadableLines(
  file: CheckpointFile,
  signed: readonly SignedCheckpoint[],
  findings: Findings,
  warnings: string[],
): void {
  const torn = tornCheckpointLines(file, signed);
  for (const unreadable of file.unreadable) {
    const begun = torn.get(unreadable.line);
    if (begun) {
      warnings.push(
        `line ${unreadable.line} of the checkpoint file ${printable(file.path)} is cut short: it is the start of ${describeCheckpoint(begun)}, which is whole in ${file.checkpoints.includes(begun) ? 'the file' : '_ocs_audit_checkpoints'} (a write torn by a crash or a full disk, not a change)`,
      );
      continue;
    }
    findings.addChainBreak({
      kind: 'checkpoint_edited',
      detail:
        unreadable.object === undefined
          ? `line ${unreadable.line} of the checkpoint file ${file.path} is ${unreadable.reason}`
          : `the checkpoint object ${unreadable.object} is ${unreadable.reason}`,
    });
  }
}

/** Pass 1: the chain's links, its head row, and the signed heads it must pass through. */
async function walkChain(
  snapshot: AuditSnapshot,
  trusted: SignedCheckpoint[],
  batchSize: number,
  findings: Findings,
  onProgress: VerifyOptions['onProgress'],
): Promise<{ head: ChainHead; entries: number; tables: Set<string> }> {
  const bySeq = new Map<number, SignedCheckpoint[]>();
  const countsAt = new Map<number, Map<string, number>>();
  for (const checkpoint of trusted) {
    bySeq.set(checkpoint.seq, [...(bySeq.get(checkpoint.seq) ?? []), checkpoint]);
    countsAt.set(checkpoint.previous_seq, new Map());
    countsAt.set(checkpoint.seq, new Map());
  }
  const counts = new Map<string, number>();
  const tables = new Set<string>();
  let expected = 1;
  let previous = GENESIS_HASH;
  let entries = 0;
  let after = 0;
  // For people watching: what the head says there is (the walk itself trusts only the links).
  const total = onProgress ? (await snapshot.head()).seq : undefined;
  if (countsAt.has(0)) countsAt.set(0, new Map());
  for (;;) {
    const batch = await snapshot.entries(after, batchSize);
    for (const entry of batch) {
      entries += 1;
      if (entry.seq !== expected) {
        findings.addChainBreak({
          kind: 'entries_deleted',
          seq: entry.seq,
          table: entry.table,
          rowId: entry.rowId,
          detail: `chain entries ${expected}${entry.seq - 1 > expected ? `..${entry.seq - 1}` : ''} are missing: entry ${entry.seq} follows entry ${expected - 1}`,
        });
      } else if (entry.prevHash !== previous) {
        findings.addChainBreak({
          kind: 'entry_edited',
          seq: entry.seq,
          table: entry.table,
          rowId: entry.rowId,
          detail: `entry ${entry.seq}'s previous hash is not the hash of entry ${entry.seq - 1}: one of them was edited, or entries were put in between`,
        });
      }
      if (entryHash(entry) !== entry.hash) {
        findings.addChainBreak({
          kind: 'entry_edited',
          seq: entry.seq,
          table: entry.table,
          rowId: entry.rowId,
          detail: `entry ${entry.seq}'s hash does not match its fields: its run, table, row id, operation, time, digest or hash was edited`,
        });
      }
      if (!operationRule(entry.operation)) {
        findings.addChainBreak({
          kind: 'entry_edited',
          seq: entry.seq,
          table: entry.table,
          rowId: entry.rowId,
          detail: `entry ${entry.seq} has an unknown operation ${JSON.stringify(entry.operation.slice(0, 40))}`,
        });
      }
      counts.set(entry.operation, (counts.get(entry.operation) ?? 0) + 1);
      if (countsAt.has(entry.seq)) countsAt.set(entry.seq, new Map(counts));
      for (const checkpoint of bySeq.get(entry.seq) ?? []) {
        if (checkpoint.head !== entry.hash) {
          findings.addChainBreak({
            kind: 'chain_rewritten',
            seq: entry.seq,
            table: entry.table,
            rowId: entry.rowId,
            detail: `the chain does not pass through the signed head of ${describeCheckpoint(checkpoint)}: entries up to ${entry.seq} were rewritten`,
          });
        }
      }
      tables.add(entry.table);
      previous = entry.hash;
      expected = entry.seq + 1;
      after = entry.seq;
    }
    onProgress?.({ stage: 'checking the audit chain', done: entries, total, unit: 'entries' });
    if (batch.length < batchSize) break;
  }
  const last = expected - 1;
  const head = await snapshot.head();
  if (head.seq !== last || head.hash !== previous) {
    findings.addChainBreak({
      kind: head.seq > last ? 'entries_cut' : 'entry_edited',
      seq: last,
      detail:
        head.seq > last
          ? `entries after ${last} were cut: the head row says the chain ends at ${head.seq}`
          : `the head row (_ocs_audit_head: seq ${head.seq}) does not name the chain's last entry (${last})`,
    });
  }
  for (const checkpoint of trusted) {
    if (checkpoint.seq > last) {
      findings.addChainBreak({
        kind: 'entries_cut',
        seq: last,
        detail: `entries cut after ${describeCheckpoint(checkpoint)}: the chain ends at ${last}, before that signed head`,
      });
      continue;
    }
    const before = countsAt.get(checkpoint.previous_seq);
    const at = countsAt.get(checkpoint.seq);
    if (!before || !at) continue;
    const operations = new Set([...at.keys(), ...Object.keys(checkpoint.counts)]);
    const differs = [...operations].some(
      (operation) =>
        (at.get(operation) ?? 0) - (before.get(operation) ?? 0) !==
        (checkpoint.counts[operation] ?? 0),
    );
    if (differs) {
      findings.addChainBreak({
        kind: 'chain_rewritten',
        seq: checkpoint.seq,
        detail: `the entries between ${checkpoint.previous_seq} and ${checkpoint.seq} do not add up to the counts signed in ${describeCheckpoint(checkpoint)}`,
      });
    }
  }
  return { head: { seq: last, hash: previous }, entries, tables };
}

/** Pass 2 for one resource table: each row's entries against its versions and live row. */
async function verifyTable(
  snapshot: AuditSnapshot,
  table: AuditedTable,
  batchSize: number,
  findings: Findings,
  onProgress: VerifyOptions['onProgress'],
): Promise<{ versions: number; liveRows: number }> {
  const name = table.table;
  const entries = new BatchCursor<AuditEntry>(
    (last) =>
      snapshot.entriesOf(name, last ? { rowId: last.rowId, seq: last.seq } : null, batchSize),
    batchSize,
  );
  const first = await entries.peek();
  if (!table.history || !table.live) {
    if (first) {
      const missing = !table.history ? `${name}__history` : name;
      findings.add({
        kind: 'table_dropped',
        table: name,
        seq: first.seq,
        detail: `the table ${missing} is gone, yet the chain holds entries for ${name} (from ${first.seq})`,
      });
      return { versions: 0, liveRows: 0 };
    }
  }
  const versions = new BatchCursor<StoredVersion>(
    (last) =>
      table.history
        ? snapshot.versions(
            table,
            last ? { id: last.id, versionId: last.versionId } : null,
            batchSize,
          )
        : Promise.resolve([]),
    batchSize,
  );
  const live = new BatchCursor<LiveRow>(
    (last) =>
      table.live ? snapshot.liveRows(table, last ? last.id : null, batchSize) : Promise.resolve([]),
    batchSize,
  );
  const hash = rowContentHasher(table.columns);
  let versionCount = 0;
  let liveCount = 0;
  let reported = 0;
  const stage = `checking ${printable(name, { max: 60 })}`;
  for (;;) {
    const id = smallest([
      (await entries.peek())?.rowId,
      (await versions.peek())?.id,
      (await live.peek())?.id,
    ]);
    if (id === undefined) break;
    const rowEntries = await entries.takeWhile(id, (entry) => entry.rowId);
    const rowVersions = await versions.takeWhile(id, (version) => version.id);
    const liveRow = (await live.peek())?.id === id.toString() ? await live.next() : undefined;
    versionCount += rowVersions.length;
    if (liveRow) liveCount += 1;
    for (const problem of replayRow(name, id.toString(), rowEntries, rowVersions, liveRow, hash)) {
      findings.add(problem);
    }
    if (versionCount - reported >= batchSize) {
      reported = versionCount;
      onProgress?.({ stage, done: versionCount, unit: 'versions' });
    }
  }
  if (versionCount > reported) onProgress?.({ stage, done: versionCount, unit: 'versions' });
  return { versions: versionCount, liveRows: liveCount };
}

/** Pass 3 for one bookkeeping table: each record against its last entry. */
async function verifyRecords(
  snapshot: AuditSnapshot,
  table: string,
  batchSize: number,
  findings: Findings,
): Promise<number> {
  const entries = new BatchCursor<AuditEntry>(
    (last) =>
      snapshot.entriesOf(table, last ? { rowId: last.rowId, seq: last.seq } : null, batchSize),
    batchSize,
  );
  const records = new BatchCursor<StoredRecord>(
    (last) => snapshot.records(table, last ? last.key : null, batchSize),
    batchSize,
  );
  let count = 0;
  for (;;) {
    const key = smallest([(await entries.peek())?.rowId, (await records.peek())?.key]);
    if (key === undefined) break;
    const recordEntries = await entries.takeWhile(key, (entry) => entry.rowId);
    const record =
      (await records.peek())?.key === key.toString() ? await records.next() : undefined;
    const last = recordEntries[recordEntries.length - 1];
    const rowId = key.toString();
    if (record) count += 1;
    if (record && !last) {
      findings.add({
        kind: 'record_inserted',
        table,
        rowId,
        detail: `${table} record ${rowId} is not in the chain`,
      });
    } else if (!record && last) {
      findings.add({
        kind: 'record_deleted',
        table,
        rowId,
        seq: last.seq,
        detail: `${table} record ${rowId} (chained at entry ${last.seq}) is missing`,
      });
    } else if (record && last && record.digest !== last.digest) {
      findings.add({
        kind: 'record_edited',
        table,
        rowId,
        seq: last.seq,
        detail: `${table} record ${rowId} no longer gives the digest chained at entry ${last.seq}`,
      });
    }
  }
  return count;
}

/**
 * Pass 4: each chatbot choice's key against its chatbots. A run's key is chained with its record,
 * and a key is the SHA-256 of the chosen public ids, so the ids a choice lists can be checked;
 * their names (shown by `status` and `runs`) cannot.
 */
function verifyChoices(choices: readonly ChatbotChoiceRecord[], findings: Findings): void {
  for (const choice of choices) {
    const ids = choice.chatbots.map((chatbot) => chatbot.publicId);
    const edited =
      ids.length > 0 ? selectionKey(ids) !== choice.key : /^[0-9a-f]{32}$/.test(choice.key);
    if (!edited) continue;
    findings.add({
      kind: 'choice_edited',
      table: '_ocs_chatbot_choices',
      detail: `the chatbots listed for the choice ${JSON.stringify(choice.key)} are not the ones its key was computed from`,
    });
  }
}
