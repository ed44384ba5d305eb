/**
 * Reads what `serve` needs from the warehouse (stored manifest, tables, history, sealed fields)
 * and plans it; refuses, with every reason at once, when something cannot be served faithfully.
 */
import { ServeRefusedError } from '../errors.js';
import type { ColumnSpec, Warehouse } from '../interfaces.js';
import { SEALED_FIELDS_STATE_KEY } from '../sync/engine.js';
import { parseSealedFieldsState } from '../sync/sealed-fields.js';
import { isSafeResourceName } from '../names.js';
import {
  planServe,
  TEAM_RESOURCE,
  type ServeFacts,
  type ServePlan,
  type StoredManifestEntry,
} from './plan.js';

/** What `serve` is asked to do, beside what the warehouse holds. */
export type PrepareServeOptions = Pick<
  ServeFacts,
  'policyFor' | 'excludedFields' | 'asOf' | 'allowIncomplete' | 'hasPublicKey' | 'hasArchiveKey'
>;

export interface PreparedServe {
  plan: ServePlan;
  manifestBody: string;
  openApiBody: string | undefined;
  schemaChecksum: string;
}

function parseStoredManifest(body: string): { checksum: string; entries: StoredManifestEntry[] } {
  const parsed = JSON.parse(body) as { schema_checksum: string; entries: StoredManifestEntry[] };
  return { checksum: parsed.schema_checksum, entries: parsed.entries };
}

export async function prepareServe(
  warehouse: Warehouse,
  options: PrepareServeOptions,
): Promise<PreparedServe> {
  const { archive } = warehouse;
  const manifest = await archive.exportDocument('manifest');
  if (manifest === undefined) {
    throw new ServeRefusedError([
      'The warehouse holds no manifest from the server: run `ocs-sync sync` (this version keeps it) first.',
    ]);
  }
  const { checksum, entries } = parseStoredManifest(manifest.body);
  const names = [TEAM_RESOURCE, ...entries.map((entry) => entry.resource)];
  const tables = new Map<string, ColumnSpec[] | undefined>();
  const historyTables = new Set<string>();
  for (const name of names) {
    if (!isSafeResourceName(name)) continue;
    const columns = await warehouse.describeTable(name);
    tables.set(name, columns);
    if (options.asOf !== undefined && columns && (await archive.hasHistory(name))) {
      historyTables.add(name);
    }
  }
  const plan = planServe({
    entries,
    tables,
    historyTables,
    sealedFields: Object.fromEntries(
      [
        ...parseSealedFieldsState(await warehouse.bookkeeping.getState(SEALED_FIELDS_STATE_KEY)),
      ].map(([resource, fields]) => [resource, [...fields]]),
    ),
    ...options,
  });
  if (plan.refusals.length > 0) throw new ServeRefusedError(plan.refusals);
  const openApi = await archive.exportDocument('openapi', checksum);
  return {
    plan,
    manifestBody: manifest.body,
    openApiBody: openApi?.body,
    schemaChecksum: checksum,
  };
}
