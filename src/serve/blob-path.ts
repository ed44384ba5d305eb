import { join } from 'node:path';

/**
 * Where a blob with this sha256 lives under the files directory: `<dir>/sha256/<2 hex>/<hex>`.
 * The same layout the file-contents sync writes (CONTRACTS.md); the lead reconciles it with
 * `src/files/blob-store.ts` when both land.
 */
export function blobPath(dir: string, sha256: string): string {
  return join(dir, 'sha256', sha256.slice(0, 2), sha256);
}
