import { OcsSyncError } from '../errors.js';

/**
 * A sealed (or archived) value could not be opened. `reason` is short and safe to show: it never
 * contains the value, the plaintext or key material. Callers that know the row turn it into a
 * SealedValueError naming resource, id and field.
 */
export class SealedOpenError extends OcsSyncError {
  constructor(
    readonly reason: string,
    what: 'sealed value' | 'archived value' = 'sealed value',
  ) {
    super(`Cannot open ${what}: ${reason}`);
  }
}
