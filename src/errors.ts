/**
 * Every error ocs-sync raises on purpose. The CLI's one top-level handler (src/cli/main.ts) maps
 * them to exit codes; messages here are shown to people, so they name the thing at fault and what
 * to do, and never carry a secret (API key, key material, unsealed values).
 */
import { quotedName } from './printable.js';

export const ExitCode = {
  /** Everything synced. */
  ok: 0,
  /** Could not run: configuration, authentication, server unreachable after retries. */
  failed: 1,
  /** Usage error: unknown command or flag. */
  usage: 2,
  /** Finished, but some resources were skipped or failed (named in the output). */
  partial: 3,
  /** `status` only: no sync run is recorded, or the last one failed or was interrupted. */
  statusLastRunFailed: 4,
  /** `status` only: a resource's last attempt ended with an error. */
  statusResourceError: 5,
  /** `status` only: a resource has not synced within `--max-lag`. */
  statusLagging: 6,
  /** `status` only: the last `audit verify` found the audit archive broken. */
  statusAuditBroken: 7,
  /** Stopped by SIGINT or SIGTERM before the end; committed pages are kept (128 + SIGINT). */
  interrupted: 130,
  /** The reader of stdout or stderr went away (128 + SIGPIPE, as a shell reports it). */
  closedPipe: 141,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export class OcsSyncError extends Error {
  readonly exitCode: ExitCode = ExitCode.failed;
  /** A next step for the person reading the message. */
  readonly hint?: string;
  constructor(message: string, options?: { hint?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.hint = options?.hint;
  }
}

/** Bad command-line usage. */
export class UsageError extends OcsSyncError {
  override readonly exitCode = ExitCode.usage;
}

/** The configuration has problems; `problems` lists every one of them. */
export class ConfigError extends OcsSyncError {
  constructor(readonly problems: string[]) {
    super(
      `Configuration has ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n` +
        problems.map((problem) => `  - ${problem}`).join('\n'),
    );
  }
}

/** 401/403 from the server: the run cannot go on with this key. */
export class AuthError extends OcsSyncError {
  constructor(
    readonly status: number,
    detail: string,
  ) {
    super(`The server refused the API key (HTTP ${status}): ${detail}`, {
      hint:
        status === 401
          ? 'Check OCS_API_KEY / api_key and OCS_AUTH_SCHEME (api-key or bearer).'
          : 'Only a team admin may export: use an API key of a team admin.',
    });
  }
}

/** An HTTP answer that ends the work on one resource (404, 400) or the run (other 4xx). */
export class HttpStatusError extends OcsSyncError {
  constructor(
    readonly status: number,
    readonly path: string,
    readonly detail: string,
    hint?: string,
  ) {
    super(`GET ${path} answered HTTP ${status}: ${detail}`, { hint });
  }
}

/** The server is unreachable or kept failing after every retry. */
export class ServerUnavailableError extends OcsSyncError {
  constructor(
    readonly path: string,
    readonly attempts: number,
    reason: string,
  ) {
    super(`GET ${path} failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${reason}`, {
      hint: 'Check base_url and that the server is up; raise http.max_attempts to wait longer.',
    });
  }
}

/** The server answered 200 with something that is not the export format. */
export class ProtocolError extends OcsSyncError {}

/**
 * An answer bigger than its limit (a page past `http.max_page_mib`, a file past
 * `files.max_file_mib`): the request was cut off while the body streamed.
 * Not retried: the server would send the same again. That resource or file fails; the rest go on.
 */
export class ResponseTooLargeError extends OcsSyncError {}

/**
 * The blob store (`files.dir`) could not be written: no permission, a read-only or full disk, too
 * many open files. The file being stored fails (recorded, fetched again next run); the rest of
 * the files step would fail the same way, so it stops there.
 */
export class BlobStoreError extends OcsSyncError {}

/** A name from the server that is not a safe SQL identifier. */
export class UnsafeNameError extends OcsSyncError {
  constructor(kind: 'resource' | 'field', name: string, where?: string) {
    super(
      `Refusing ${kind} name ${quotedName(name)}${where ? ` in ${where}` : ''}: ` +
        'names must match ^[a-z][a-z0-9_]{0,62}$; it was skipped and nothing was stored under it.',
    );
  }
}

/** A sealed value that could not be opened. Never carries the value itself. */
export class SealedValueError extends OcsSyncError {
  constructor(
    readonly resource: string,
    readonly rowId: string,
    readonly field: string,
    reason: string,
    hint = 'Check that the private key matches the public key registered on the team.',
  ) {
    super(`Cannot open sealed field ${resource}.${field} of row id ${rowId}: ${reason}`, { hint });
  }
}

/** Key files or key settings that cannot be used. */
export class KeyError extends OcsSyncError {}

/** Another ocs-sync holds the warehouse's writer lock. */
export class LockHeldError extends OcsSyncError {
  override readonly exitCode = ExitCode.partial;
  constructor(holder: { pid: number; host: string; since: string } | undefined, waitedMs: number) {
    super(
      holder
        ? `Another ocs-sync (pid ${holder.pid} on ${holder.host}, since ${holder.since}) is writing to this warehouse; waited ${Math.round(waitedMs / 1000)} s.`
        : `Another ocs-sync is writing to this warehouse; waited ${Math.round(waitedMs / 1000)} s.`,
      { hint: 'Let it finish, or raise lock.wait_seconds.' },
    );
  }
}

/** The schema changed and the policy says stop. */
export class SchemaChangeStoppedError extends OcsSyncError {
  override readonly exitCode = ExitCode.partial;
}

/** The warehouse could not be opened or used. */
export class WarehouseError extends OcsSyncError {}

/** The audit chain refuses what would break it, or cannot be used as configured. */
export class AuditError extends OcsSyncError {}

/** `serve` cannot answer as the server would; `reasons` lists every one. */
export class ServeRefusedError extends OcsSyncError {
  constructor(readonly reasons: string[]) {
    super(
      `serve refuses to start: the warehouse cannot be served faithfully.\n` +
        reasons.map((reason) => `  - ${reason}`).join('\n'),
    );
  }
}

/** A run that was asked to stop (SIGTERM, SIGINT) before it finished. */
export class InterruptedError extends OcsSyncError {
  override readonly exitCode = ExitCode.interrupted;
}

/** A body that is not complete JSON (cut short, an HTML page from a proxy): worth asking again. */
export class BodyNotJsonError extends Error {
  constructor(readonly bytes: number) {
    super(`a body that is not complete JSON (${bytes} bytes)`);
    this.name = 'BodyNotJsonError';
  }
}

/**
 * JSON nested deeper than it may be (src/json.ts, MAX_JSON_DEPTH). Not a SyntaxError: the body is
 * complete, and refused.
 */
export class JsonTooDeepError extends Error {
  constructor(readonly maxDepth: number) {
    super(`JSON nested more than ${maxDepth} levels deep`);
    this.name = 'JsonTooDeepError';
  }
}

/**
 * Object storage (an `s3://` location) refused or failed a request after its retries. `kind` says
 * what to do: `setup` (no credentials, access denied, no such bucket: nothing works until the
 * operator fixes it), `full` (a quota or a full store), `unavailable` (the store kept failing),
 * `other`. The message names the location and never a credential.
 */
export class ObjectStoreError extends OcsSyncError {
  constructor(
    readonly kind: 'setup' | 'full' | 'unavailable' | 'other',
    message: string,
    options?: { hint?: string; cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Every class above, by name: an error crossing between threads (src/thread-bridge.ts) comes back
 * of its class. A new error class is added here, or it crosses as a plain Error.
 */
export const ERROR_CLASSES: Readonly<Record<string, { prototype: Error }>> = {
  AuditError,
  AuthError,
  BlobStoreError,
  BodyNotJsonError,
  ConfigError,
  HttpStatusError,
  InterruptedError,
  JsonTooDeepError,
  KeyError,
  LockHeldError,
  ObjectStoreError,
  OcsSyncError,
  ProtocolError,
  ResponseTooLargeError,
  SchemaChangeStoppedError,
  SealedValueError,
  ServeRefusedError,
  ServerUnavailableError,
  UnsafeNameError,
  UsageError,
  WarehouseError,
};

/** Message for any error, safe to print; unknown errors keep their message only. */
export function describeError(error: unknown): string {
  if (error instanceof OcsSyncError) {
    return error.hint ? `${error.message}\n  hint: ${error.hint}` : error.message;
  }
  if (error instanceof Error) return error.message;
  return String(error);
}

export function exitCodeOf(error: unknown): ExitCode {
  return error instanceof OcsSyncError ? error.exitCode : ExitCode.failed;
}

/**
 * What kind of failure an error is, in a word a metric's label can carry (`kind` of
 * `ocs_sync_resource_last_error`, `error` of `ocs_sync_last_run_status`): a fixed list, never the
 * server's own text.
 */
export type ErrorKind =
  /** A resource the configuration or the server leaves out (no public key, not exported). */
  | 'skipped'
  | 'auth'
  | 'unavailable'
  | 'http'
  | 'protocol'
  | 'too_large'
  | 'sealed'
  | 'unsafe_name'
  | 'configuration'
  | 'schema_change'
  | 'warehouse'
  | 'files'
  /** An `s3://` location refused or kept failing (ObjectStoreError). */
  | 'object_storage'
  | 'lock'
  | 'interrupted'
  /** A daemon's run stopped because nothing moved for health.max_age_seconds. */
  | 'stalled'
  | 'other';

export function errorKindOf(error: unknown): ErrorKind {
  if (error instanceof AuthError) return 'auth';
  if (error instanceof ServerUnavailableError) return 'unavailable';
  if (error instanceof HttpStatusError) return 'http';
  if (error instanceof ProtocolError) return 'protocol';
  if (error instanceof ResponseTooLargeError) return 'too_large';
  if (error instanceof SealedValueError || error instanceof KeyError) return 'sealed';
  if (error instanceof UnsafeNameError) return 'unsafe_name';
  if (error instanceof ConfigError || error instanceof UsageError) return 'configuration';
  if (error instanceof SchemaChangeStoppedError) return 'schema_change';
  if (error instanceof WarehouseError || error instanceof AuditError) return 'warehouse';
  if (error instanceof BlobStoreError) return 'files';
  if (error instanceof ObjectStoreError) return 'object_storage';
  if (error instanceof LockHeldError) return 'lock';
  if (error instanceof InterruptedError) return 'interrupted';
  return 'other';
}
