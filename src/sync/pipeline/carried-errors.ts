/**
 * Errors crossing between the page thread and the sync's thread keep their class, message, hint
 * and fields, so the run treats a page's failure the same wherever it happened (a SealedValueError
 * fails its resource, a body that is not JSON is asked for again). An error the run itself threw
 * while answering the page thread (a resource skipped as its sealed fields are learned) comes back
 * as the very same object.
 */
import {
  AuditError,
  ConfigError,
  KeyError,
  OcsSyncError,
  ProtocolError,
  ResponseTooLargeError,
  SealedValueError,
  UnsafeNameError,
  WarehouseError,
} from '../../errors.js';
import { BodyNotJsonError, JsonTooDeepError } from '../../errors.js';

/** The classes an error keeps across threads; any other arrives as a plain Error. */
const CLASSES: Record<string, { prototype: Error }> = {
  AuditError,
  BodyNotJsonError,
  ConfigError,
  JsonTooDeepError,
  KeyError,
  OcsSyncError,
  ProtocolError,
  ResponseTooLargeError,
  SealedValueError,
  UnsafeNameError,
  WarehouseError,
};

export interface CarriedError {
  className: string;
  message: string;
  stack?: string;
  /** The error's own fields (hint, exitCode, ...), plain data. */
  fields: Record<string, unknown>;
  /** The run's own error, thrown while it answered this question of the page thread. */
  hostCall?: number;
}

/** An answer of the run that failed: the page thread rethrows it as this, by its call's number. */
export class HostCallFailed extends Error {
  constructor(readonly call: number) {
    super(`the sync's answer to question ${call} failed`);
    this.name = 'HostCallFailed';
  }
}

export function carryError(error: unknown): CarriedError {
  if (error instanceof HostCallFailed) {
    return {
      className: 'HostCallFailed',
      message: error.message,
      fields: {},
      hostCall: error.call,
    };
  }
  if (!(error instanceof Error)) {
    return { className: 'Error', message: String(error), fields: {} };
  }
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) {
    if (key !== 'cause' && isPlain(value)) fields[key] = value;
  }
  return { className: error.constructor.name, message: error.message, stack: error.stack, fields };
}

/** The error again, of its class; `hostError` gives back the run's own errors by call. */
export function restoreError(carried: CarriedError, hostError: (call: number) => unknown): unknown {
  if (carried.hostCall !== undefined) return hostError(carried.hostCall);
  const type = CLASSES[carried.className];
  const error = (type ? Object.create(type.prototype) : new Error()) as Error;
  Object.defineProperty(error, 'message', {
    value: carried.message,
    writable: true,
    configurable: true,
  });
  if (carried.stack !== undefined) {
    Object.defineProperty(error, 'stack', {
      value: carried.stack,
      writable: true,
      configurable: true,
    });
  }
  Object.assign(error, carried.fields);
  return error;
}

function isPlain(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return typeof value !== 'function';
  if (Array.isArray(value)) return value.every(isPlain);
  return false;
}
