/**
 * Pure: what one row's chain entries say its history versions and live row must be, against what
 * the warehouse holds (`audit verify`, verify.ts, reads them and collects the problems).
 */
import type { AuditEntry, LiveRow, StoredVersion } from '../interfaces.js';
import { operationRule } from '../warehouse/audit-chain.js';
import type { Problem } from './problems.js';

interface ExpectedVersion {
  digest: string;
  from: string;
  to: string | null;
  seq: number;
  /** `_ocs_version_kind`, as the opening entry's operation says. */
  kind: string;
}

/** A row's content hash: its values and the choice's key it was served under (canonical.ts). */
export type RowHash = (row: StoredVersion['values'], servedUnder: string | null) => string;

/**
 * One row's problems: its entries replayed by the operations' rules give the versions its
 * history table must hold, in order, with their times and kinds, and what its live row must be
 * (present or not, `_deleted_at`, `_ocs_out_of_scope_since`); each stored version's and the live
 * row's values are hashed with `hash` (the canonical form).
 */
export function replayRow(
  table: string,
  rowId: string,
  entries: readonly AuditEntry[],
  versions: readonly StoredVersion[],
  live: LiveRow | undefined,
  hash: RowHash,
): Problem[] {
  const problems: Problem[] = [];
  const add = (problem: Omit<Problem, 'table' | 'rowId'>) =>
    problems.push({ table, rowId, ...problem });
  // Replay the row's entries: the versions the history table must hold, and the live row.
  const expected: ExpectedVersion[] = [];
  let open: ExpectedVersion | undefined;
  let liveState: 'none' | 'present' | 'marked_deleted' | 'absent' = 'none';
  let outOfScope: AuditEntry | undefined;
  let last: AuditEntry | undefined;
  for (const entry of entries) {
    const rule = operationRule(entry.operation);
    if (!rule || rule.subject !== 'version') {
      add({
        kind: 'entry_edited',
        seq: entry.seq,
        detail: `entry ${entry.seq} records "${entry.operation.slice(0, 40)}", which is no operation on a row of ${table}`,
      });
      continue;
    }
    if (rule.closes && !open) {
      add({
        kind: 'entry_edited',
        seq: entry.seq,
        detail: `entry ${entry.seq} (${entry.operation}) closes a version of row ${rowId} while none is open`,
      });
    }
    if (rule.opens && !rule.closes && open) {
      add({
        kind: 'entry_edited',
        seq: entry.seq,
        detail: `entry ${entry.seq} (${entry.operation}) opens a version of row ${rowId} while one is open`,
      });
    }
    if (rule.closes && open) {
      const closesKinds: readonly string[] | undefined = rule.closesKinds;
      if (closesKinds && !closesKinds.includes(open.kind)) {
        add({
          kind: 'entry_edited',
          seq: entry.seq,
          detail: `entry ${entry.seq} (${entry.operation}) closes a version of kind ${open.kind} (entry ${open.seq}), which it cannot follow`,
        });
      }
      if (rule.keepsContent && entry.digest !== open.digest) {
        add({
          kind: 'entry_edited',
          seq: entry.seq,
          detail: `entry ${entry.seq} (${entry.operation}) keeps the content as last served, yet its digest is not that of entry ${open.seq}`,
        });
      }
      open.to = entry.at;
      open = undefined;
    }
    if (rule.opens) {
      open = {
        digest: entry.digest,
        from: entry.at,
        to: null,
        seq: entry.seq,
        kind: rule.versionKind ?? '',
      };
      expected.push(open);
    }
    liveState = rule.live ?? liveState;
    const scope = rule.outOfScope ?? 'keep';
    if (scope === 'set') outOfScope = entry;
    else if (scope === 'clear') outOfScope = undefined;
    last = entry;
  }
  const computed = versions.map((version) => hash(version.values, version.servedUnder));
  compareVersions(expected, versions, computed, add);

  const lastVersion = expected[expected.length - 1];
  checkLive(
    table,
    rowId,
    live,
    { state: liveState, last, lastVersion, outOfScope, lastStored: versions[versions.length - 1] },
    hash,
    add,
  );
  return problems;
}

/** The live row against what the row's last entry left. */
function checkLive(
  table: string,
  rowId: string,
  live: LiveRow | undefined,
  after: {
    state: 'none' | 'present' | 'marked_deleted' | 'absent';
    last: AuditEntry | undefined;
    lastVersion: ExpectedVersion | undefined;
    /** The scope exit the row is still out of scope since, if any. */
    outOfScope: AuditEntry | undefined;
    /** The last version stored (to tell an edited `_ocs_served_under` from edited values). */
    lastStored: StoredVersion | undefined;
  },
  hash: RowHash,
  add: (problem: Omit<Problem, 'table' | 'rowId'>) => void,
): void {
  const { state: liveState, last, lastVersion, outOfScope } = after;
  const seq = last?.seq;
  if (liveState === 'none') {
    if (live) {
      add({
        kind: 'row_inserted',
        detail: `row ${rowId} is in ${table}, but no chain entry explains it`,
      });
    }
    return;
  }
  if (liveState === 'absent') {
    if (live) {
      add({
        kind: 'row_inserted',
        seq,
        detail: `row ${rowId} was removed by a full refresh (entry ${seq}) but is in ${table} again, with no version`,
      });
    }
    return;
  }
  if (!live) {
    add({
      kind: 'row_deleted',
      seq,
      detail: `row ${rowId} is missing from ${table}; its last entry (${seq}, ${last?.operation}) keeps it`,
    });
    return;
  }
  if (liveState === 'present' && live.deletedAt !== null) {
    add({
      kind: 'deleted_at_edited',
      seq,
      detail: `row ${rowId} of ${table} has _deleted_at set (${live.deletedAt}), but its last entry (${seq}, ${last?.operation}) keeps it live`,
    });
  }
  if (liveState === 'marked_deleted' && live.deletedAt !== last?.at) {
    add({
      kind: 'deleted_at_edited',
      seq,
      detail:
        live.deletedAt === null
          ? `row ${rowId} of ${table} was marked deleted (entry ${seq}), but its _deleted_at was cleared`
          : `row ${rowId} of ${table} has _deleted_at ${live.deletedAt}, not ${last?.at} as entry ${seq} says`,
    });
  }
  const since = outOfScope?.at ?? null;
  if (live.outOfScopeSince !== since) {
    add({
      kind: 'out_of_scope_edited',
      seq: outOfScope?.seq ?? seq,
      detail:
        since === null
          ? `row ${rowId} of ${table} has _ocs_out_of_scope_since ${live.outOfScopeSince}, but no scope exit leaves it out of the chatbot choice (last entry ${seq}, ${last?.operation})`
          : live.outOfScopeSince === null
            ? `row ${rowId} of ${table} left the chatbot choice at entry ${outOfScope!.seq}, but its _ocs_out_of_scope_since was cleared`
            : `row ${rowId} of ${table} has _ocs_out_of_scope_since ${live.outOfScopeSince}, not ${since} as entry ${outOfScope!.seq} says`,
    });
  }
  if (lastVersion && hash(live.values, live.servedUnder) !== lastVersion.digest) {
    const storedKey = after.lastStored?.servedUnder ?? null;
    const keyEdited =
      storedKey !== live.servedUnder && hash(live.values, storedKey) === lastVersion.digest;
    add(
      keyEdited
        ? {
            kind: 'served_under_edited',
            seq: lastVersion.seq,
            detail: `row ${rowId} of ${table} has _ocs_served_under ${JSON.stringify(live.servedUnder)}, not ${JSON.stringify(storedKey)} as its last version (entry ${lastVersion.seq})`,
          }
        : {
            kind: 'row_edited',
            seq: lastVersion.seq,
            detail: `the values of row ${rowId} in ${table} differ from its last version (entry ${lastVersion.seq})`,
          },
    );
  }
}

/** The stored versions against the ones the entries say, naming the first difference. */
function compareVersions(
  expected: ExpectedVersion[],
  versions: readonly StoredVersion[],
  computed: string[],
  add: (problem: Omit<Problem, 'table' | 'rowId'>) => void,
): void {
  const expectedKeys = expected.map((version) => `${version.digest} ${version.from}`);
  const storedKeys = versions.map((version, index) => `${computed[index]} ${version.validFrom}`);
  const at = (index: number) => ({
    version: index + 1,
    versionId: versions[index]?.versionId,
    seq: expected[index]?.seq,
  });
  if (versions.length > expected.length) {
    const index = firstUnmatched(storedKeys, expectedKeys);
    add({
      kind: 'version_inserted',
      version: index + 1,
      versionId: versions[index]!.versionId,
      detail: `version ${index + 1} (_version_id ${versions[index]!.versionId}) is not in the chain: ${versions.length} versions stored, ${expected.length} chained`,
    });
    return;
  }
  if (versions.length < expected.length) {
    const index = firstUnmatched(expectedKeys, storedKeys);
    add({
      kind: 'version_deleted',
      version: index + 1,
      seq: expected[index]!.seq,
      detail: `the version chained at entry ${expected[index]!.seq} (version ${index + 1}) is missing: ${versions.length} versions stored, ${expected.length} chained`,
    });
    return;
  }
  for (let index = 0; index < expected.length; index += 1) {
    const want = expected[index]!;
    const have = versions[index]!;
    if (storedKeys[index] !== expectedKeys[index]) {
      if (
        [...storedKeys].sort().join('\n') === [...expectedKeys].sort().join('\n') &&
        computed[index] !== want.digest
      ) {
        add({
          kind: 'version_reordered',
          ...at(index),
          detail: `the versions are out of the chain's order from version ${index + 1} (_version_id ${have.versionId}, entry ${want.seq})`,
        });
        return;
      }
      if (computed[index] !== want.digest) {
        add({
          kind: 'value_edited',
          ...at(index),
          detail: `the stored values (or _ocs_served_under) of version ${index + 1} (_version_id ${have.versionId}) no longer give the digest chained at entry ${want.seq}`,
        });
      } else {
        add({
          kind: 'valid_time_edited',
          ...at(index),
          detail: `version ${index + 1} (_version_id ${have.versionId}) has _valid_from ${have.validFrom}, not ${want.from} as entry ${want.seq} says`,
        });
      }
      continue;
    }
    if (have.kind !== want.kind) {
      add({
        kind: 'version_kind_edited',
        ...at(index),
        detail: `version ${index + 1} (_version_id ${have.versionId}) has _ocs_version_kind ${JSON.stringify(have.kind)}, not ${JSON.stringify(want.kind)} as entry ${want.seq} says`,
      });
    }
    if (have.contentHash !== want.digest) {
      add({
        kind: 'value_edited',
        ...at(index),
        detail: `the _content_hash of version ${index + 1} (_version_id ${have.versionId}) was edited: it is not the digest chained at entry ${want.seq}`,
      });
    }
    if (have.validTo !== want.to) {
      add({
        kind: 'valid_time_edited',
        ...at(index),
        detail: `version ${index + 1} (_version_id ${have.versionId}) has _valid_to ${have.validTo ?? 'null'}, not ${want.to ?? 'null'} as the chain says`,
      });
    }
  }
}

/** The index of the first key of `keys` that `others` does not account for (as multisets). */
function firstUnmatched(keys: string[], others: string[]): number {
  const available = new Map<string, number>();
  for (const key of others) available.set(key, (available.get(key) ?? 0) + 1);
  for (let index = 0; index < keys.length; index += 1) {
    const left = available.get(keys[index]!) ?? 0;
    if (left === 0) return index;
    available.set(keys[index]!, left - 1);
  }
  return Math.min(keys.length - 1, others.length);
}
