/**
 * What the sync keeps so that `serve` can answer as the server did: the manifest and the export
 * OpenAPI document per schema checksum. (The server's text of every value a column would give back
 * differently is kept with its page: warehouse/original-values.ts, PageWrite.originals.)
 */
import type { ExportSource, Manifest, Warehouse } from '../interfaces.js';
import { toJsonText } from '../warehouse/values.js';

/**
 * The manifest in the server's shape: exactly its two keys, each entry exactly its four, and the
 * entry's `scope` when the server sent one (the scoped protocol), as sent.
 */
export function manifestDocument(manifest: Manifest): string {
  return toJsonText({
    schema_checksum: manifest.schemaChecksum,
    entries: manifest.entries.map(({ model, resource, cursor, secret, scope }) => ({
      model,
      resource,
      cursor,
      secret,
      ...(scope === undefined ? {} : { scope }),
    })),
  });
}

/**
 * Saves the manifest, and the OpenAPI document when this run fetched it; fetches the document
 * when none is stored for this checksum yet (a warehouse synced before `serve` existed).
 */
export async function keepExportDocuments(
  warehouse: Warehouse,
  source: ExportSource,
  manifest: Manifest,
  fetchedOpenApi: unknown,
  signal?: AbortSignal,
): Promise<void> {
  const { archive } = warehouse;
  const checksum = manifest.schemaChecksum;
  await archive.saveExportDocument('manifest', checksum, manifestDocument(manifest));
  let document = fetchedOpenApi;
  const stored = await archive.exportDocument('openapi', checksum);
  if (document === undefined && stored === undefined) {
    document = await source.openApi(signal);
  }
  if (document !== undefined) {
    await archive.saveExportDocument('openapi', checksum, toJsonText(document));
  }
}
