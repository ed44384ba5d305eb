/**
 * `files verify`: every blob the ledger says is stored is re-hashed (streaming) against its
 * recorded digest and size. Reads only: it never changes the ledger or the store.
 */
import type { FileLedgerStore } from '../interfaces.js';
import type { ContentStore } from './content-store.js';

export interface VerifyProblem {
  fileId: string;
  sha256: string;
  problem: 'missing' | 'corrupt';
  detail?: string;
}

export interface VerifyReport {
  /** `ok` ledger rows checked, and distinct blobs re-hashed. */
  files: number;
  blobs: number;
  bytes: number;
  problems: VerifyProblem[];
}

export async function verifyBlobs(
  ledger: FileLedgerStore,
  store: ContentStore,
  options: { batchSize?: number; signal?: AbortSignal } = {},
): Promise<VerifyReport> {
  const report: VerifyReport = { files: 0, blobs: 0, bytes: 0, problems: [] };
  // One check per distinct blob, however many rows share it.
  const checked = new Map<string, Awaited<ReturnType<ContentStore['check']>>>();
  let afterId: string | null = null;
  for (;;) {
    options.signal?.throwIfAborted();
    const records = await ledger.records(afterId, options.batchSize ?? 1000);
    if (records.length === 0) break;
    afterId = records[records.length - 1]!.fileId;
    for (const record of records) {
      if (record.status !== 'ok' || record.sha256 === null) continue;
      report.files += 1;
      let result = checked.get(record.sha256);
      if (!result) {
        result = await store.check(record.sha256, record.size);
        checked.set(record.sha256, result);
        report.blobs += 1;
        if (result.status === 'ok') report.bytes += record.size ?? 0;
      }
      if (result.status !== 'ok') {
        report.problems.push({
          fileId: record.fileId,
          sha256: record.sha256,
          problem: result.status,
          ...(result.status === 'corrupt' ? { detail: result.reason } : {}),
        });
      }
    }
  }
  return report;
}
