/**
 * Which integer columns reference which resource's `id`. The server's export says nothing about
 * foreign keys, so a column is a candidate by its name (pure, below) and becomes a relationship
 * only when the stored data agrees: every non-null value is an id of the target table.
 *
 * Candidates, for an integer column of table T (first rule that names a table wins):
 * 1. `working_version` references T itself (the server's versioned models point at their
 *    working copy).
 * 2. Dropping leading words of the column name one at a time (`input_chat_message`,
 *    `chat_message`, `message`): a resource whose model (manifest `app.model`) is those words
 *    run together (`chatmessage` -> chat_messages, `experiment` -> chatbots), or whose name is
 *    those words or their plural (`session` -> sessions).
 * 3. Failing that, resources whose model name ends with them (`run` -> evaluation_runs).
 * Several candidates are tried in order; the first that the data verifies is taken. A column with
 * no value yet keeps its single candidate as "assumed". Assumed: a name match plus matching ids
 * means a reference; columns named after no resource (`owner`, `created_by`) are never guessed.
 */
import type { ColumnSpec, ReferenceCheck } from '../interfaces.js';

export interface ReferenceCandidate {
  table: string;
  column: string;
  /** Tables whose `id` it may reference, most likely first. */
  targets: string[];
}

export interface Relationship {
  table: string;
  column: string;
  /** The referenced table (its `id`). */
  references: string;
  /** 'verified': every value is an id there; 'assumed': no value to check yet. */
  basis: 'verified' | 'assumed';
}

function pluralsOf(name: string): string[] {
  return [
    name,
    `${name}s`,
    `${name}es`,
    ...(name.endsWith('y') ? [`${name.slice(0, -1)}ies`] : []),
  ];
}

/** The name part of a Django model label: `chat.chatmessage` -> `chatmessage`. */
function modelName(label: string | undefined): string | undefined {
  return label?.slice(label.lastIndexOf('.') + 1).toLowerCase();
}

/**
 * @param tables every resource table with its data columns
 * @param models each resource's model label from the manifest (`chats` -> `chat.chat`)
 */
export function referenceCandidates(
  tables: ReadonlyMap<string, readonly ColumnSpec[]>,
  models: ReadonlyMap<string, string>,
): ReferenceCandidate[] {
  const names = [...tables.keys()].sort();
  const candidates: ReferenceCandidate[] = [];
  for (const [table, columns] of [...tables].sort(([a], [b]) => a.localeCompare(b))) {
    for (const column of columns) {
      if (column.type !== 'integer') continue;
      const targets = targetsFor(table, column.name, names, models);
      if (targets.length > 0) candidates.push({ table, column: column.name, targets });
    }
  }
  return candidates;
}

function targetsFor(
  table: string,
  column: string,
  names: readonly string[],
  models: ReadonlyMap<string, string>,
): string[] {
  if (column === 'working_version') return [table];
  const words = column.split('_').filter((word) => word !== '');
  const suffixes = words.map((_, index) => words.slice(index));
  for (const suffix of suffixes) {
    const joined = suffix.join('');
    const spelled = pluralsOf(suffix.join('_'));
    const exact = names.filter(
      (name) => modelName(models.get(name)) === joined || spelled.includes(name),
    );
    if (exact.length > 0) return exact;
  }
  for (const suffix of suffixes) {
    const joined = suffix.join('');
    if (joined.length < 3) continue;
    const ending = names.filter((name) => modelName(models.get(name))?.endsWith(joined));
    if (ending.length > 0) return ending;
  }
  return [];
}

/**
 * The relationship a candidate's checks support, or undefined. `checks` are in target order;
 * a check that is missing was not made (an earlier target was taken).
 */
export function decideRelationship(
  candidate: ReferenceCandidate,
  checks: ReadonlyArray<ReferenceCheck | undefined>,
): Relationship | undefined {
  const base = { table: candidate.table, column: candidate.column };
  for (const [index, check] of checks.entries()) {
    if (check === undefined) continue;
    if (check.values === 0) {
      // Nothing to verify yet: only an unambiguous name is assumed.
      return candidate.targets.length === 1
        ? { ...base, references: candidate.targets[0]!, basis: 'assumed' }
        : undefined;
    }
    if (check.unmatched === 0) {
      return { ...base, references: candidate.targets[index]!, basis: 'verified' };
    }
  }
  return undefined;
}

/** Reads the stored relationships (state key `relationships`); [] when absent or unreadable. */
export function parseRelationships(text: string | undefined): Relationship[] {
  if (!text) return [];
  try {
    const parsed = JSON.parse(text) as unknown;
    return Array.isArray(parsed) ? (parsed as Relationship[]) : [];
  } catch {
    return [];
  }
}

/** State keys: the relationships found, and each resource's model label (for `schema`). */
export const RELATIONSHIPS_STATE_KEY = 'relationships';
export const RESOURCE_MODELS_STATE_KEY = 'resource_models';
/**
 * State key: `yes` while the stored relationships and indexes were found on the tables as they
 * are. A run sets it to `no` before it walks and back to `yes` once it found them again, so a run
 * cut short in between leaves the next one to find them.
 */
export const RELATIONSHIPS_CURRENT_STATE_KEY = 'relationships_current';

/**
 * Whether a run may keep the relationships and indexes as they are: they were current when it
 * started, and it changed no table's rows, columns or models (checking every candidate column and
 * index again costs a small team's unchanged run more than all its requests). The team's row,
 * written every run, is not counted: its relationships are found again with the next change.
 */
export function relationshipsStillCurrent(run: {
  currentBefore: boolean;
  rowsWritten: number;
  rowsMarked: number;
  schemaChanges: number;
  modelsBefore: string | undefined;
  models: string;
}): boolean {
  return (
    run.currentBefore &&
    run.rowsWritten === 0 &&
    run.rowsMarked === 0 &&
    run.schemaChanges === 0 &&
    run.modelsBefore === run.models
  );
}

/** What finding relationships needs from the warehouse. */
export interface ReferenceChecker {
  checkReference(table: string, column: string, target: string): Promise<ReferenceCheck>;
}

/**
 * Checks the candidates against the stored data. A relationship verified before is kept without
 * a new scan while its column is still a candidate for the same table (checks are full scans).
 */
export async function findRelationships(
  checker: ReferenceChecker,
  candidates: readonly ReferenceCandidate[],
  previous: readonly Relationship[],
): Promise<Relationship[]> {
  const verified = new Map(
    previous
      .filter((relationship) => relationship.basis === 'verified')
      .map((relationship) => [`${relationship.table}.${relationship.column}`, relationship]),
  );
  const found: Relationship[] = [];
  for (const candidate of candidates) {
    const known = verified.get(`${candidate.table}.${candidate.column}`);
    if (known && candidate.targets.includes(known.references)) {
      found.push(known);
      continue;
    }
    const checks: ReferenceCheck[] = [];
    for (const target of candidate.targets) {
      const check = await checker.checkReference(candidate.table, candidate.column, target);
      checks.push(check);
      if (check.values === 0 || check.unmatched === 0) break;
    }
    const relationship = decideRelationship(candidate, checks);
    if (relationship) found.push(relationship);
  }
  return found;
}
