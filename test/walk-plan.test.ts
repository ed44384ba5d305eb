/**
 * The walk's plan (src/sync/walk-plan.ts), the whole of it: where a walk starts and why not where
 * it stopped (a chatbot choice, a cursor of another kind), what a complete walk says about the
 * rows it did not see, and which cursor a full refresh leaves. The walk follows it as it is.
 */
import { describe, expect, it } from 'vitest';
import { fullRefreshOf } from '../src/cli/sync-command.js';
import { selectionKey } from '../src/export-api/selection.js';
import type { ManifestEntry, ResourceState } from '../src/interfaces.js';
import type { ServerScope } from '../src/sync/chatbot-choice.js';
import { FULL_REFRESH_ALL, refreshes } from '../src/sync/run-types.js';
import { isNarrowing, planResourceWalk, type ResourceWalkInput } from '../src/sync/walk-plan.js';

const entry = (resource: string, scope?: string, model = `app.${resource}`): ManifestEntry => ({
  model,
  resource,
  cursor: 'pk',
  secret: false,
  ...(scope === undefined ? {} : { scope }),
});

const chosen: Record<string, string[]> = { ab: ['a', 'b'], a: ['a'], b: ['b'] };
const whole = { kind: 'choice', choice: { key: 'all', chatbots: [] } } as ServerScope;
const unscoped = { kind: 'unscoped' } as const;
const keyOf = (name: string) => selectionKey(chosen[name]!);
const chatbotsOf = (key: string) => Object.values(chosen).find((ids) => selectionKey(ids) === key);
const choice = (name: string) =>
  ({
    kind: 'choice',
    choice: {
      key: keyOf(name),
      chatbots: chosen[name]!.map((id) => ({ publicId: id, name: id })),
    },
  }) as const;
type Stored = Pick<ResourceState, 'cursor' | 'cursorKind' | 'cursorSelection'>;
const stored = (overrides: Partial<Stored> = {}): Stored => ({
  cursor: 'C',
  cursorKind: 'pk',
  cursorSelection: keyOf('a'),
  ...overrides,
});
const plan = (input: Partial<ResourceWalkInput>) =>
  planResourceWalk({
    entry: entry('sessions', 'owned'),
    scope: choice('a'),
    stored: stored(),
    fullRefresh: false,
    chatbotsOf,
    ...input,
  });

describe('planning a walk', () => {
  it('keeps today’s rule without the chatbot choice protocol', () => {
    const before = stored({ cursorSelection: null });
    expect(plan({ scope: unscoped, stored: before })).toMatchObject({
      cursor: 'C',
      missing: 'none',
      cursorKindChanged: false,
      fullRefresh: false,
    });
    expect(plan({ scope: unscoped, stored: before, fullRefresh: true })).toMatchObject({
      cursor: null,
      missing: 'delete',
      provesDeletions: false,
      fullRefresh: true,
    });
    // Never walked: from the start, and not a deletion either.
    expect(plan({ scope: unscoped, stored: undefined })).toMatchObject({
      cursor: null,
      missing: 'none',
      cursorKindChanged: false,
    });
  });

  it('lets an owned walk go on under its own choice and under a narrowing', () => {
    expect(plan({}).cursor).toBe('C');
    expect(plan({ stored: stored({ cursorSelection: keyOf('ab') }) }).cursor).toBe('C');
    expect(plan({ stored: stored({ cursorSelection: 'all' }) }).cursor).toBe('C');
    expect(plan({ stored: stored({ cursorSelection: null }) }).cursor).toBe('C');
  });

  it('walks owned resources from the start on a widening or a change it cannot prove narrower', () => {
    const widened = plan({ scope: choice('ab') });
    expect(widened).toMatchObject({ cursor: null, missing: 'out_of_scope' });
    expect(widened.restartReason).toMatch(/not a narrowing/);
    expect(plan({ scope: choice('b') }).cursor).toBeNull();
    expect(plan({ stored: stored({ cursorSelection: 'f'.repeat(32) }) }).cursor).toBeNull();
    expect(plan({ scope: whole }).cursor).toBeNull();
  });

  it('re-reads referenced resources, participants and unclassed resources every run', () => {
    for (const shared of [
      entry('llm_providers', 'referenced'),
      entry('participants', 'owned', 'experiments.participant'),
      entry('new_thing'),
      entry('odd', 'partial'),
    ]) {
      expect(plan({ entry: shared }), shared.resource).toMatchObject({
        cursor: null,
        missing: 'out_of_scope',
        provesDeletions: false,
      });
    }
  });

  it('does not request excluded resources under a choice, and does for the whole team', () => {
    expect(plan({ entry: entry('evaluators', 'excluded') }).excluded).toBe(true);
    expect(
      plan({
        entry: entry('evaluators', 'excluded'),
        scope: whole,
        stored: stored({ cursorSelection: 'all' }),
      }),
    ).toMatchObject({ excluded: false, cursor: 'C' });
  });

  it('proves deletions on a full refresh under a choice, whatever the scope, and only there', () => {
    for (const walked of [entry('sessions', 'owned'), entry('llm_providers', 'referenced')]) {
      expect(plan({ fullRefresh: true, entry: walked }), walked.resource).toMatchObject({
        cursor: null,
        missing: 'out_of_scope',
        provesDeletions: true,
      });
      expect(plan({ entry: walked }).provesDeletions, walked.resource).toBe(false);
    }
    expect(plan({ fullRefresh: true, scope: whole })).toMatchObject({
      missing: 'delete',
      provesDeletions: false,
    });
  });

  it('never deletes and always re-reads when the server does not say its choice', () => {
    const unknown = { kind: 'unknown', reason: 'test' } as const;
    expect(plan({ scope: unknown, fullRefresh: true })).toMatchObject({
      cursor: null,
      missing: 'out_of_scope',
      provesDeletions: false,
    });
    expect(plan({ scope: unknown }).cursor).toBeNull();
  });

  it('knows a narrowing only from recorded chatbot sets', () => {
    expect(isNarrowing('all', keyOf('a'), chatbotsOf)).toBe(true);
    expect(isNarrowing(keyOf('ab'), keyOf('a'), chatbotsOf)).toBe(true);
    expect(isNarrowing(keyOf('a'), keyOf('ab'), chatbotsOf)).toBe(false);
    expect(isNarrowing(keyOf('a'), keyOf('b'), chatbotsOf)).toBe(false);
    expect(isNarrowing('0'.repeat(32), keyOf('a'), chatbotsOf)).toBe(false);
    expect(isNarrowing(keyOf('a'), 'all', chatbotsOf)).toBe(false);
  });
});

describe('planning a walk whose stored cursor is of another kind than the server’s', () => {
  const changed = stored({ cursorKind: 'updated_at_id', cursorSelection: null });

  it('walks the whole team from the start, says so, and, not being a full refresh, deletes nothing', () => {
    expect(plan({ scope: unscoped, stored: changed })).toEqual({
      excluded: false,
      cursor: null,
      restartReason: 'the cursor kind changed on the server (updated_at_id -> pk)',
      cursorKindChanged: true,
      missing: 'none',
      provesDeletions: false,
      fullRefresh: false,
      keptCursor: null,
    });
  });

  it('under a choice, tells which rows the choice no longer serves, but proves no deletion: only a full refresh walks every resource from the start in one run', () => {
    const owned = plan({ stored: stored({ cursorKind: 'updated_at_id' }) });
    expect(owned).toMatchObject({
      cursor: null,
      cursorKindChanged: true,
      missing: 'out_of_scope',
      provesDeletions: false,
    });
    expect(owned.restartReason).toMatch(/cursor kind changed/);
    // A reason of the choice's own comes first; the kind is still said.
    const widened = plan({ scope: choice('ab'), stored: stored({ cursorKind: 'updated_at_id' }) });
    expect(widened.restartReason).toMatch(/not a narrowing/);
    expect(widened.cursorKindChanged).toBe(true);
  });

  it('is a full refresh like any other: from the start, its deletions its own', () => {
    expect(plan({ scope: unscoped, stored: changed, fullRefresh: true })).toMatchObject({
      cursor: null,
      cursorKindChanged: false,
      missing: 'delete',
      provesDeletions: false,
    });
    expect(
      plan({ stored: stored({ cursorKind: 'updated_at_id' }), fullRefresh: true }),
    ).toMatchObject({ cursorKindChanged: false, missing: 'out_of_scope', provesDeletions: true });
  });

  it('is not a change when no kind was stored (a cursor reset)', () => {
    expect(
      plan({ scope: unscoped, stored: stored({ cursorKind: null, cursorSelection: null }) }),
    ).toMatchObject({ cursor: 'C', cursorKindChanged: false });
  });
});

describe('the cursor a full refresh leaves', () => {
  it('is where the walk ended, or else the stored one under this same choice, never another choice’s', () => {
    expect(plan({ fullRefresh: true }).keptCursor).toBe('C');
    expect(plan({ fullRefresh: true, scope: choice('ab') }).keptCursor).toBeNull();
    expect(
      plan({ fullRefresh: true, scope: unscoped, stored: stored({ cursorSelection: null }) })
        .keptCursor,
    ).toBe('C');
    expect(plan({ fullRefresh: true, stored: undefined }).keptCursor).toBeNull();
    // An incremental walk keeps its cursor by walking from it.
    expect(plan({}).keptCursor).toBeNull();
  });
});

describe('which resources a full refresh walks from the start', () => {
  it('is every one, some named ones, or none, said by a type', () => {
    expect(refreshes(FULL_REFRESH_ALL, 'users')).toBe(true);
    expect(refreshes({ kind: 'some', resources: ['users'] }, 'users')).toBe(true);
    expect(refreshes({ kind: 'some', resources: ['users'] }, 'chats')).toBe(false);
    expect(refreshes(undefined, 'users')).toBe(false);
    // `sync --full-refresh [resources...]`: alone, every resource; with names, those only.
    expect(fullRefreshOf(true)).toBe(FULL_REFRESH_ALL);
    expect(fullRefreshOf(['users', 'chats'])).toEqual({
      kind: 'some',
      resources: ['users', 'chats'],
    });
    expect(fullRefreshOf(undefined)).toBeUndefined();
    expect(fullRefreshOf(false)).toBeUndefined();
  });
});
