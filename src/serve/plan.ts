/**
 * Pure planning for `serve`: from what the warehouse holds, decide how each resource of the stored
 * manifest is served, and collect every reason it could not be served faithfully, so `serve`
 * refuses once with all of them rather than hand the importer a partial team.
 */
import type { ColumnSpec, CursorKind } from '../interfaces.js';
import type { SecretPolicy } from '../sealing/policy.js';
import { isSafeResourceName, valueByName } from '../names.js';

export interface StoredManifestEntry {
  model: string;
  resource: string;
  cursor: CursorKind;
  secret: boolean;
  /** The class under a chatbot choice, when the server sent one. */
  scope?: string;
}

export interface ServeFacts {
  entries: readonly StoredManifestEntry[];
  /** Stored columns per table (undefined: no table); must include `team`. */
  tables: ReadonlyMap<string, ColumnSpec[] | undefined>;
  /** Tables with a `<table>__history`. */
  historyTables: ReadonlySet<string>;
  /** Sealed fields per resource (the `sealed_fields` state key). */
  sealedFields: Readonly<Record<string, readonly string[]>>;
  policyFor(resource: string): SecretPolicy;
  /** Fields the sync was told to leave out (`exclude_fields`), per resource. */
  excludedFields?: Readonly<Record<string, readonly string[]>>;
  asOf?: string;
  allowIncomplete: boolean;
  hasPublicKey: boolean;
  hasArchiveKey: boolean;
}

export interface ServedResource {
  resource: string;
  cursor: CursorKind;
  /** The stored data columns, in table order (the server's field order). */
  columns: ColumnSpec[];
  sealedFields: string[];
  /** `empty`: not in the warehouse, served as an empty walk (only with --allow-incomplete). */
  source: 'live' | 'history' | 'empty';
  /** Served empty while `serve` presents a chatbot choice (the manifest's `excluded`). */
  excludedUnderChoice?: boolean;
}

export interface ServePlan {
  team: ServedResource;
  resources: Map<string, ServedResource>;
  /**
   * The server spoke the scoped protocol (manifest `scope`, `team/`'s `exportable_chatbots`):
   * `serve` speaks it too.
   */
  scoped: boolean;
  /** Why serve must not start; empty when it may. */
  refusals: string[];
  /** What the operator should know (served incomplete, served sealed to the original key). */
  warnings: string[];
}

export const TEAM_RESOURCE = 'team';

function list(names: string[]): string {
  return names.join(', ');
}

export function planServe(facts: ServeFacts): ServePlan {
  const refusals: string[] = [];
  const warnings: string[] = [];
  const missing: string[] = [];
  const dropped: string[] = [];
  const withoutHistory: string[] = [];
  const withoutUpdatedAt: string[] = [];
  const needPublicKey: string[] = [];
  const needArchiveKey: string[] = [];
  const servedSealed: string[] = [];
  const source = facts.asOf === undefined ? ('live' as const) : ('history' as const);

  const plan = (resource: string, cursor: CursorKind, secret: boolean): ServedResource => {
    const columns = isSafeResourceName(resource) ? facts.tables.get(resource) : undefined;
    const sealedFields = secret ? [...(valueByName(facts.sealedFields, resource) ?? [])] : [];
    if (columns === undefined) {
      missing.push(resource);
      return { resource, cursor, columns: [], sealedFields, source: 'empty' };
    }
    if (facts.asOf !== undefined && !facts.historyTables.has(resource))
      withoutHistory.push(resource);
    if (cursor === 'updated_at_id' && !columns.some((column) => column.name === 'updated_at')) {
      withoutUpdatedAt.push(resource);
    }
    if (secret) {
      const policy = facts.policyFor(resource);
      if (policy === 'drop') dropped.push(resource);
      if ((policy === 'plaintext' || policy === 'reseal') && !facts.hasPublicKey) {
        needPublicKey.push(resource);
      }
      if (policy === 'reseal' && !facts.hasArchiveKey) needArchiveKey.push(resource);
      if (policy === 'sealed') servedSealed.push(resource);
    }
    if (secret && facts.policyFor(resource) === 'drop') {
      return { resource, cursor, columns: [], sealedFields, source: 'empty' };
    }
    return { resource, cursor, columns, sealedFields, source };
  };

  const team = plan(TEAM_RESOURCE, 'pk', false);
  const resources = new Map<string, ServedResource>();
  for (const entry of facts.entries) {
    const served = plan(entry.resource, entry.cursor, entry.secret);
    if (entry.scope === 'excluded') served.excludedUnderChoice = true;
    resources.set(entry.resource, served);
  }
  const scoped =
    facts.entries.some((entry) => entry.scope !== undefined) ||
    team.columns.some((column) => column.name === 'exportable_chatbots');

  if (missing.includes(TEAM_RESOURCE)) {
    refusals.push('The warehouse has no team row: run `ocs-sync sync` first.');
  }
  const incomplete: string[] = [];
  const others = missing.filter((name) => name !== TEAM_RESOURCE);
  if (others.length > 0) {
    incomplete.push(`not in the warehouse (never synced or excluded): ${list(others)}`);
  }
  if (dropped.length > 0) {
    incomplete.push(`sealed fields dropped by the "drop" secrets policy: ${list(dropped)}`);
  }
  const excluded = Object.entries(facts.excludedFields ?? {})
    .filter(([resource, fields]) => facts.tables.has(resource) && fields.length > 0)
    .flatMap(([resource, fields]) => fields.map((field) => `${resource}.${field}`));
  if (excluded.length > 0) {
    incomplete.push(`fields left out by exclude_fields: ${list(excluded)}`);
  }
  if (incomplete.length > 0) {
    const what = `These resources cannot be served as the server had them: ${incomplete.join('; ')}.`;
    if (facts.allowIncomplete) warnings.push(`${what} They are served empty (fields: left out).`);
    else refusals.push(`${what} Pass --allow-incomplete to serve them empty (fields: left out).`);
  }
  if (withoutHistory.length > 0) {
    refusals.push(
      `--as-of needs history, and these resources have none: ${list(withoutHistory)} ` +
        '(set `history` for them in the config; history starts with the next sync).',
    );
  }
  if (withoutUpdatedAt.length > 0) {
    refusals.push(
      `These updated_at_id resources have no updated_at column to page by: ${list(withoutUpdatedAt)}.`,
    );
  }
  if (needPublicKey.length > 0) {
    refusals.push(
      `Sealed fields of ${list(needPublicKey)} are stored opened and must be sealed again: ` +
        'pass --public-key with the restore public key (from `ocs-sync keygen`).',
    );
  }
  if (needArchiveKey.length > 0) {
    refusals.push(
      `Sealed fields of ${list(needArchiveKey)} are stored resealed to the archive key: ` +
        'pass --archive-key with the archive secret key to open them.',
    );
  }
  if (servedSealed.length > 0) {
    warnings.push(
      `${list(servedSealed)} are served sealed as the server sent them: the importer needs the ` +
        "team's original private key to open them.",
    );
  }
  return { team, resources, scoped, refusals, warnings };
}
