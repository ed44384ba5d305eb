/**
 * What the warehouse says of a team after a run: its last sync run as recorded, its last success,
 * the failures in a row since, each resource's rows and freshness, the files and the audit
 * archive. Read-only, through the warehouse reader; the metrics of a run (metrics.ts) are set from
 * it, so what the daemon serves and what a run that exits pushes are the warehouse's own record,
 * whichever process made it: a failed run never erases the last success.
 */
import type { ResourceStatus, RunKind, RunStatus } from '../interfaces.js';
import { SYNC_RUN_KINDS, type RunRecord, type WarehouseReader } from '../warehouse/reader.js';

export interface WarehouseFacts {
  /** The newest sync run recorded (times as epoch ms; `finishedAt` null while it runs). */
  lastRun:
    | {
        kind: RunKind;
        status: RunStatus;
        startedAt: number;
        finishedAt: number | null;
        rows: number;
        pages: number;
        requests: number;
      }
    | undefined;
  /** When the last run that ended ok or partial finished (epoch ms). */
  lastSuccessAt: number | undefined;
  /** Sync runs that failed in a row since the last success (interrupted ones are passed over). */
  consecutiveFailures: number;
  resources: ResourceStatus[];
  /** The file ledger by status, and the bytes kept. */
  files: { ok: number; missing: number; failed: number; bytes: number } | undefined;
  audit: {
    enabled: boolean;
    lastVerification: { intact: boolean } | null;
    lastVerificationAt: number | null;
    lastCheckpointAt: number | null;
  };
}

/** Runs read back to count failures in a row: a longer streak still reads as this many. */
const FAILURE_WINDOW = 100;

export async function readWarehouseFacts(reader: WarehouseReader): Promise<WarehouseFacts> {
  const runs = await reader.runs({ limit: FAILURE_WINDOW, kinds: SYNC_RUN_KINDS });
  const lastSuccess = await reader.lastSuccessfulRun(['ok', 'partial']);
  const resources = await reader.status();
  const files = await reader.fileTotals();
  const audit = await reader.audit();
  const last = runs[0];
  return {
    lastRun: last && {
      kind: last.kind,
      status: last.status,
      startedAt: Date.parse(last.startedAt),
      finishedAt: epochMs(last.finishedAt),
      rows: last.rows,
      pages: last.pages,
      requests: last.requests,
    },
    lastSuccessAt: epochMs(lastSuccess?.finishedAt ?? null) ?? undefined,
    consecutiveFailures: failuresInARow(runs),
    resources,
    files,
    audit: {
      enabled: audit.enabled,
      lastVerification: audit.lastVerification && { intact: audit.lastVerification.intact },
      lastVerificationAt: epochMs(audit.lastVerification?.at ?? null),
      lastCheckpointAt: epochMs(audit.lastCheckpoint?.time ?? null),
    },
  };
}

/** Failed runs, newest first, up to the first that ended ok or partial. */
export function failuresInARow(runs: ReadonlyArray<Pick<RunRecord, 'status'>>): number {
  let failed = 0;
  for (const run of runs) {
    if (run.status === 'ok' || run.status === 'partial') break;
    if (run.status === 'failed') failed += 1;
  }
  return failed;
}

function epochMs(text: string | null): number | null {
  if (text === null) return null;
  const at = Date.parse(text);
  return Number.isFinite(at) ? at : null;
}
