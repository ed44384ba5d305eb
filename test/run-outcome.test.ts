/**
 * What a run's end and a resource's error mean, decided apart from the run that records them
 * (src/sync/run-outcome.ts, src/sync/run-errors.ts): the run's status, whether the schema
 * checksum it read is kept, and how an error that stopped a walk is classed.
 */
import { describe, expect, it } from 'vitest';
import {
  AuthError,
  HttpStatusError,
  InterruptedError,
  ProtocolError,
  SchemaChangeStoppedError,
  ServerUnavailableError,
  WarehouseError,
} from '../src/errors.js';
import type { ResourceOutcomeStatus } from '../src/interfaces.js';
import {
  SelectionChangedError,
  SkipResource,
  classifyResourceError,
} from '../src/sync/run-errors.js';
import {
  finishedRunStatus,
  keepsSchemaChecksum,
  stoppedRunStatus,
} from '../src/sync/run-outcome.js';

const walked = (status: ResourceOutcomeStatus, warnings: string[] = []) => ({ status, warnings });

describe('the status of a run that walked to its end', () => {
  it('is ok when every resource is ok or excluded by the chatbot choice, with nothing to report', () => {
    expect(finishedRunStatus({ problems: [], resources: [] })).toBe('ok');
    expect(finishedRunStatus({ problems: [], resources: [walked('ok'), walked('excluded')] })).toBe(
      'ok',
    );
    expect(
      finishedRunStatus({
        problems: [],
        resources: [walked('ok')],
        files: { failed: 0, error: undefined },
      }),
    ).toBe('ok');
  });

  it('is partial for a problem of the run, a resource skipped or failed, a warning, or a file not fetched', () => {
    const ok = [walked('ok')];
    expect(
      finishedRunStatus({ problems: ['Resource "x" is not in the manifest'], resources: ok }),
    ).toBe('partial');
    expect(finishedRunStatus({ problems: [], resources: [walked('ok'), walked('skipped')] })).toBe(
      'partial',
    );
    expect(finishedRunStatus({ problems: [], resources: [walked('failed')] })).toBe('partial');
    expect(
      finishedRunStatus({ problems: [], resources: [walked('ok', ['a field refused'])] }),
    ).toBe('partial');
    expect(finishedRunStatus({ problems: [], resources: ok, files: { failed: 2 } })).toBe(
      'partial',
    );
    expect(
      finishedRunStatus({ problems: [], resources: ok, files: { failed: 0, error: 'disk full' } }),
    ).toBe('partial');
  });
});

describe('the status of a run an error ended', () => {
  it('is interrupted, partial for a schema change the policy stopped, and failed otherwise', () => {
    expect(stoppedRunStatus(new InterruptedError('stopped'))).toBe('interrupted');
    expect(stoppedRunStatus(new SchemaChangeStoppedError('held back'))).toBe('partial');
    expect(stoppedRunStatus(new AuthError(401, 'no'))).toBe('failed');
    expect(stoppedRunStatus(new Error('a bug'))).toBe('failed');
  });
});

describe('keeping the schema checksum a run read', () => {
  it('only when every table followed the schema and the run walked to its end', () => {
    const all = [walked('ok'), walked('excluded')];
    expect(keepsSchemaChecksum({ resources: all, gaveUp: false })).toBe(true);
    // A table of a resource skipped or failed may not have been evolved: read the schema again.
    expect(keepsSchemaChecksum({ resources: [...all, walked('skipped')], gaveUp: false })).toBe(
      false,
    );
    expect(keepsSchemaChecksum({ resources: [walked('failed')], gaveUp: false })).toBe(false);
    // The choice changed twice: the walks stopped, whatever each one's status.
    expect(keepsSchemaChecksum({ resources: all, gaveUp: true })).toBe(false);
  });
});

describe('classing an error that stopped a walk', () => {
  const walk = { resource: 'chats', selection: undefined, interrupted: false };

  it('skips a resource the server does not export, or cannot serve without the team’s public key', () => {
    const missing = classifyResourceError(
      new HttpStatusError(404, 'api/chats/', 'Not found'),
      walk,
    );
    expect(missing.kind).toBe('skipped');
    expect(missing.error).toBeInstanceOf(SkipResource);
    expect((missing.error as SkipResource).message).toBe(
      'chats skipped: the server does not export it (HTTP 404: Not found)',
    );
    const sealed = classifyResourceError(
      new HttpStatusError(400, 'api/chats/', 'The team has no public key'),
      walk,
    );
    expect(sealed.kind).toBe('skipped');
    const skip = new SkipResource('chats skipped: no private key');
    expect(classifyResourceError(skip, walk)).toEqual({ kind: 'skipped', error: skip });
  });

  it('fails the resource alone for the rest of ours, and stops the run for a key refused, a server gone or an interruption', () => {
    const protocol = new ProtocolError('not a page');
    expect(classifyResourceError(protocol, walk)).toEqual({ kind: 'failed', error: protocol });
    const bad = new HttpStatusError(400, 'api/chats/', 'Bad request');
    expect(classifyResourceError(bad, walk)).toEqual({ kind: 'failed', error: bad });
    const warehouse = new WarehouseError('disk full');
    expect(classifyResourceError(warehouse, walk).kind).toBe('failed');
    for (const stops of [
      new AuthError(403, 'not an admin'),
      new ServerUnavailableError('api/chats/', 5, 'timed out'),
      new InterruptedError('stopped'),
    ]) {
      expect(classifyResourceError(stops, walk)).toEqual({ kind: 'stops the run', error: stops });
    }
    // Once the run is asked to stop, whatever failed is the interruption.
    const cut = classifyResourceError(protocol, { ...walk, interrupted: true });
    expect(cut.kind).toBe('stops the run');
    expect(cut.error).toBeInstanceOf(InterruptedError);
  });

  it('throws a bug as it is', () => {
    const bug = new TypeError('undefined is not a function');
    expect(classifyResourceError(bug, walk)).toEqual({ kind: 'not ours', error: bug });
  });

  it('takes a 409 to a request that carried the choice for the choice changing, not the resource’s outcome', () => {
    const conflict = new HttpStatusError(409, 'api/chats/', 'The selection changed');
    const changed = classifyResourceError(conflict, { ...walk, selection: 'abc' });
    expect(changed.kind).toBe('selection changed');
    expect(changed.error).toBeInstanceOf(SelectionChangedError);
    // Without a choice sent, a 409 is the resource's own failure; the public key's refusal a skip.
    expect(classifyResourceError(conflict, walk).kind).toBe('failed');
    const refusal = new HttpStatusError(409, 'api/chats/', 'No public key registered');
    expect(classifyResourceError(refusal, { ...walk, selection: 'abc' }).kind).toBe('skipped');
  });
});
