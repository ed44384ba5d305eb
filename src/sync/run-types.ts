/**
 * What a sync run is given and what it gives back: its options (which resources a full refresh
 * walks among them), the hooks it calls as it goes, and its report (src/sync/engine.ts runs it).
 */
import type {
  AuditOutcome,
  ChatbotChoiceRecord,
  DeleteMode,
  ExportSource,
  ProgressListener,
  ResourceOutcomeStatus,
  RunKind,
  RunStatus,
  SchemaChange,
  Warehouse,
} from '../interfaces.js';
import type { ErrorKind } from '../errors.js';
import type { Logger } from '../log.js';
import type { SealingKeys, SecretPolicy } from '../sealing/policy.js';
import type { SealedValueOpener } from '../sealing/open-pool.js';
import type { FilesReport, FilesStep } from '../files/sync-files.js';

export interface SecretsSettings {
  policyFor(resource: string): SecretPolicy;
  keys: SealingKeys;
  /** Threads that open sealed values (`secrets.open_threads`); 0: this thread; default: the cores, at most 8. */
  openThreads?: number;
  /** Opens sealed values instead of a pool of the run's own (tests); the caller closes it. */
  opener?: SealedValueOpener;
}

/**
 * Which resources a full refresh walks from the start: every one the run syncs, or some named
 * ones (`sync --full-refresh A B`), which the run then syncs alone.
 */
export type FullRefresh = { kind: 'all' } | { kind: 'some'; resources: readonly string[] };

/** A full refresh of every resource the run syncs (`--full-refresh`, `full_refresh_schedule`). */
export const FULL_REFRESH_ALL: FullRefresh = { kind: 'all' };

/** Whether a full refresh walks `resource` from the start. */
export function refreshes(fullRefresh: FullRefresh | undefined, resource: string): boolean {
  if (fullRefresh === undefined) return false;
  return fullRefresh.kind === 'all' || fullRefresh.resources.includes(resource);
}

/** Hooks for progress display and metrics; all optional. */
export interface SyncEvents {
  onRunStart?(info: { runId: number; kind: RunKind; resources: number }): void;
  onResourceStart?(info: { resource: string; index: number; total: number }): void;
  onPageWritten?(info: { resource: string; rows: number; valuesAltered: number }): void;
  onResourceDone?(report: ResourceReport): void;
  /** A full refresh under a chatbot choice settled a resource's missing rows, after every walk. */
  onMissingSettled?(info: { resource: string; deleted: number; outOfScope: number }): void;
  onSchemaChange?(change: SchemaChange): void;
  onFilesDone?(report: FilesReport): void;
  /** Every step of every stage of the run (pages, files, deletion marking, ...). */
  onProgress?: ProgressListener;
}

export interface SyncOptions {
  source: ExportSource;
  warehouse: Warehouse;
  logger: Logger;
  pageSize: number;
  resources?: readonly string[];
  excludeResources?: readonly string[];
  /** Fields never stored, per resource; a stored column of one is dropped. */
  excludeFields?: Readonly<Record<string, readonly string[]>>;
  secrets: SecretsSettings;
  onSchemaChange: 'evolve' | 'stop';
  acceptSchemaChange?: boolean;
  history: boolean | readonly string[];
  deletes: DeleteMode;
  /** Walk resources from the start and find deleted rows: which ones (absent: none). */
  fullRefresh?: FullRefresh;
  /** Pages fetched ahead of the writer. */
  pagesInFlight: number;
  /** Resources synced at once; 1 keeps manifest order. */
  concurrency: number;
  lockWaitMs: number;
  signal?: AbortSignal;
  events?: SyncEvents;
  /** Fetch file contents after the resources, when `files` was synced (files.enabled). */
  files?: FilesStep;
  /**
   * Whether pages go to a page thread (planPageThreads's answer, src/page-threads.ts, which also
   * opened the warehouse with its writer thread or not); false parses, prepares and writes them
   * on this thread. Default true.
   */
  pageThreads?: boolean;
  /** The page thread's module instead of the pipeline's own (tests give one that stops). */
  pageThreadModule?: URL;
}

export interface ResourceReport {
  resource: string;
  status: ResourceOutcomeStatus;
  rows: number;
  pages: number;
  durationMs: number;
  /** Why it was skipped or failed; safe to show. */
  error?: string;
  /** What kind of failure that was (a word for a metric's label). */
  errorKind?: ErrorKind;
  /** Problems that did not stop the resource (refused field names, altered values). */
  warnings: string[];
  valuesAltered: number;
  /** Rows marked deleted (or removed) by a full refresh. */
  deleted: number;
  /** Rows marked out of the team's chatbot choice by this walk (absent: none). */
  outOfScope?: number;
  fullRefresh: boolean;
}

export interface SyncReport {
  runId: number;
  kind: RunKind;
  status: RunStatus;
  schemaChecksum: string;
  previousSchemaChecksum: string | null;
  schemaChanges: SchemaChange[];
  resources: ResourceReport[];
  /** Run-level problems (refused resource names, unknown requested resources). */
  problems: string[];
  rows: number;
  pages: number;
  /** HTTP requests sent, retries included. */
  requests: number;
  durationMs: number;
  /** The files step, when it ran. */
  files?: FilesReport;
  /** The audit checkpoint written after the run (added by the caller that writes it). */
  audit?: AuditOutcome;
  /** The chatbot choice the run ended under, when the server speaks of one. */
  choice?: ChatbotChoiceRecord;
}

/**
 * Several SyncEvents as one: each hook calls every listener that has it. Here, not with the
 * daemon's metrics, so a sync that sends none loads no prom-client.
 */
export function combineEvents(...listeners: Array<SyncEvents | undefined>): SyncEvents {
  const present = listeners.filter((listener): listener is SyncEvents => listener !== undefined);
  const hook =
    <K extends keyof SyncEvents>(key: K) =>
    (info: Parameters<NonNullable<SyncEvents[K]>>[0]) => {
      for (const listener of present) {
        (listener[key] as ((value: typeof info) => void) | undefined)?.(info);
      }
    };
  return {
    onRunStart: hook('onRunStart'),
    onResourceStart: hook('onResourceStart'),
    onPageWritten: hook('onPageWritten'),
    onResourceDone: hook('onResourceDone'),
    onMissingSettled: hook('onMissingSettled'),
    onSchemaChange: hook('onSchemaChange'),
    onFilesDone: hook('onFilesDone'),
    onProgress: hook('onProgress'),
  };
}
