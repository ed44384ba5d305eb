import { describe, expect, it } from 'vitest';
import {
  isSortableUtc,
  nowSortableUtc,
  toServerTimestamp,
  toSortableUtc,
  toSortableUtcByPattern,
} from '../src/timestamps.js';
import { dateTimeCases } from './date-time-cases.js';

/** What a conversion gives: its text, or the error it throws. */
function outcome(convert: (text: string) => string, text: string): string {
  try {
    return convert(text);
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}

describe('date-time text forms', () => {
  it.each([
    ['2026-11-20T10:00:00Z', '2026-11-20T10:00:00.000000Z', '2026-11-20T10:00:00Z'],
    ['2026-11-20T10:00:00.25Z', '2026-11-20T10:00:00.250000Z', '2026-11-20T10:00:00.250000Z'],
    ['2026-11-20T10:00:00.123456Z', '2026-11-20T10:00:00.123456Z', '2026-11-20T10:00:00.123456Z'],
    ['2026-11-20T10:00:00.000000Z', '2026-11-20T10:00:00.000000Z', '2026-11-20T10:00:00Z'],
    ['2026-11-20T12:00:00+02:00', '2026-11-20T10:00:00.000000Z', '2026-11-20T10:00:00Z'],
    ['2026-11-20T10:00:00+00:00', '2026-11-20T10:00:00.000000Z', '2026-11-20T10:00:00Z'],
    ['2026-11-20T00:30:00.5-01:00', '2026-11-20T01:30:00.500000Z', '2026-11-20T01:30:00.500000Z'],
    ['2026-12-31T23:59:59.9999996Z', '2027-01-01T00:00:00.000000Z', '2027-01-01T00:00:00Z'],
    ['2026-11-20T10:00:00.1234564Z', '2026-11-20T10:00:00.123456Z', '2026-11-20T10:00:00.123456Z'],
    ['2024-02-29T23:00:00-05:30', '2024-03-01T04:30:00.000000Z', '2024-03-01T04:30:00Z'],
  ])('%s -> %s (server form %s)', (input, sortable, server) => {
    expect(toSortableUtc(input)).toBe(sortable);
    expect(toServerTimestamp(input)).toBe(server);
    expect(toServerTimestamp(sortable)).toBe(server);
    expect(isSortableUtc(sortable)).toBe(true);
  });

  it('sorts as text in time order, whatever the fraction', () => {
    const times = [
      '2026-11-20T09:15:00.250000Z',
      '2026-11-20T09:15:00Z',
      '2026-11-20T09:15:00.000001Z',
      '2026-11-20T10:15:00+01:00',
    ];
    const sorted = times.map(toSortableUtc).sort();
    expect(sorted).toEqual([
      '2026-11-20T09:15:00.000000Z',
      '2026-11-20T09:15:00.000000Z',
      '2026-11-20T09:15:00.000001Z',
      '2026-11-20T09:15:00.250000Z',
    ]);
  });

  it('refuses text that is not a date-time with an offset', () => {
    for (const bad of ['2026-11-20', '2026-11-20T10:00:00', 'yesterday', '2026-11-20 10:00:00Z']) {
      expect(() => toSortableUtc(bad)).toThrow(RangeError);
    }
  });

  it('gives now in the fixed form', () => {
    expect(isSortableUtc(nowSortableUtc())).toBe(true);
  });

  it('gives what the general path gives, for every fraction length, offset and near miss', () => {
    const cases = dateTimeCases();
    let fastPathForms = 0;
    for (const text of cases) {
      const general = outcome(toSortableUtcByPattern, text);
      expect(outcome(toSortableUtc, text), text).toBe(general);
      expect(isSortableUtc(text), text).toBe(general === text);
      if (/^[\d:T-]{19}(\.\d{1,6})?(Z|[+-]00:00)$/.test(text)) fastPathForms += 1;
    }
    // The cases do reach the fast path (UTC with up to six fraction digits), in every form.
    expect(fastPathForms).toBeGreaterThan(1000);
  });

  it('fills the fraction of the UTC forms to six digits without converting', () => {
    expect(toSortableUtc('2026-01-01T00:02:05+00:00')).toBe('2026-01-01T00:02:05.000000Z');
    expect(toSortableUtc('2026-01-01T00:02:05.137-00:00')).toBe('2026-01-01T00:02:05.137000Z');
    expect(toSortableUtc('2026-01-01T00:00:00.1Z')).toBe('2026-01-01T00:00:00.100000Z');
    const usual = '2026-01-01T00:00:00.137251Z';
    expect(toSortableUtc(usual)).toBe(usual);
  });
});
