import { describe, expect, it } from 'vitest';
import type { Page, Row } from '../src/interfaces.js';
import { inferColumnType, valueFits, widenColumnType } from '../src/column-types.js';
import { columnsFromOpenApi } from '../src/sync/openapi-columns.js';
import {
  cursorAfterPage,
  deriveCursor,
  hasNextPage,
  planColumnsForRows,
  planTable,
  selectEntries,
} from '../src/sync/plan.js';
import { JsonTooDeepError } from '../src/errors.js';
import { MAX_JSON_DEPTH, parseJsonExact } from '../src/json.js';
import { isSafeFieldName, isSafeResourceName } from '../src/names.js';
import { parseRetryAfterMs, retryDelayMs } from '../src/source/retry.js';
import { dateTimeCases } from './date-time-cases.js';

/**
 * The date-time check as it was before its pattern took the field ranges: the loose pattern, then
 * each field read back. The range-checking pattern must agree with it on every value.
 */
function isDateTimeByFields(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/.test(value))
    return false;
  const number = (start: number, length: number) => Number(value.slice(start, start + length));
  const [year, month, day] = [number(0, 4), number(5, 2), number(8, 2)];
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
  if (day > daysInMonth) return false;
  if (number(11, 2) > 23 || number(14, 2) > 59 || number(17, 2) > 59) return false;
  if (value.endsWith('Z')) return true;
  return number(value.length - 5, 2) <= 15 && number(value.length - 2, 2) <= 59;
}

const page = (rows: Row[], cursor: string | null, hasMore: boolean, bare = false): Page => ({
  rows,
  cursor,
  hasMore,
  bare,
});

describe('names', () => {
  it.each(['users', 'chat_messages', 'a', 'x'.repeat(63)])('accepts %s', (name) => {
    expect(isSafeResourceName(name)).toBe(true);
  });
  it.each([
    '',
    'Users',
    '1abc',
    'a-b',
    'a b',
    'x'.repeat(64),
    'robert"); drop table x; --',
    '_ocs_runs',
    'é',
  ])('refuses %j', (name) => {
    expect(isSafeResourceName(name)).toBe(false);
  });
});

describe('field names', () => {
  it('also accepts one leading underscore (the real schema has _operations), but not our own columns', () => {
    expect(isSafeFieldName('_operations')).toBe(true);
    expect(isSafeResourceName('_operations')).toBe(false);
    for (const name of ['_synced_at', '_deleted_at', '_run_id', '_ocs_x', '__x', '_', 'A', 'x"y']) {
      expect(isSafeFieldName(name), name).toBe(false);
    }
  });
});

describe('cursors', () => {
  it('derives a pk cursor from the last id, exact for 64-bit ids', () => {
    expect(deriveCursor('pk', { id: 42 })).toBe('42');
    expect(deriveCursor('pk', { id: 9223372036854775807n })).toBe('9223372036854775807');
  });

  it('derives an updated_at_id cursor the server accepts', () => {
    const cursor = deriveCursor('updated_at_id', {
      id: 9007199254740993n,
      updated_at: '2026-11-20T10:00:00.123456Z',
    });
    const decoded = Buffer.from(cursor, 'base64').toString('utf8');
    expect(decoded).toBe('{"updated_at": "2026-11-20T10:00:00.123456Z", "id": 9007199254740993}');
  });

  it('refuses to derive an updated_at_id cursor without updated_at', () => {
    expect(() => deriveCursor('updated_at_id', { id: 1 })).toThrow(/updated_at/);
  });

  it('keeps the server cursor, derives one on the last page, and keeps the old one on an empty page', () => {
    expect(cursorAfterPage(page([{ id: 5 }], 'abc', true), 'pk', null)).toBe('abc');
    expect(cursorAfterPage(page([{ id: 5 }, { id: 9 }], null, false), 'pk', '3')).toBe('9');
    expect(cursorAfterPage(page([], null, false), 'pk', '3')).toBe('3');
  });

  it('treats a short bare array as the end', () => {
    expect(hasNextPage(page([{ id: 1 }], null, false, true), 2)).toBe(false);
    expect(hasNextPage(page([{ id: 1 }, { id: 2 }], null, false, true), 2)).toBe(true);
    expect(hasNextPage(page([{ id: 1 }], 'c', true), 2)).toBe(true);
    expect(hasNextPage(page([], 'c', true), 2)).toBe(false);
  });
});

describe('selection', () => {
  const entries = ['a', 'b', 'c'].map((resource) => ({
    resource,
    model: resource,
    cursor: 'pk' as const,
    secret: false,
    sealedFields: [],
  }));
  it('keeps manifest order and reports unknown names', () => {
    const selection = selectEntries(entries, ['c', 'a', 'zz'], ['b']);
    expect(selection.selected.map((e) => e.resource)).toEqual(['a', 'c']);
    expect(selection.unknown).toEqual(['zz']);
  });
});

describe('column types', () => {
  it('infers and widens', () => {
    expect(inferColumnType(1)).toBe('integer');
    expect(inferColumnType(1.5)).toBe('number');
    expect(inferColumnType(2n ** 63n - 1n)).toBe('integer');
    expect(inferColumnType('2026-11-20T10:00:00Z')).toBe('datetime');
    expect(inferColumnType('2026-11-20')).toBe('date');
    expect(inferColumnType({})).toBe('json');
    expect(inferColumnType(null)).toBeUndefined();
    // 1e20 is integral but no 64-bit integer; past 64 bits only JSON keeps every digit.
    expect(inferColumnType(1e20)).toBe('number');
    expect(inferColumnType(2n ** 63n)).toBe('json');
    expect(widenColumnType('integer', 'number')).toBe('decimal');
    expect(widenColumnType('number', 'integer')).toBe('decimal');
    expect(widenColumnType('decimal', 'number')).toBe('decimal');
    expect(widenColumnType('decimal', 'text')).toBe('json');
    expect(valueFits(2n ** 60n, 'number')).toBe(false);
    expect(valueFits(2n ** 60n, 'decimal')).toBe(true);
    expect(valueFits(2n ** 63n, 'decimal')).toBe(false);
    expect(valueFits(1e20, 'integer')).toBe(false);
    expect(widenColumnType('datetime', 'text')).toBe('text');
    expect(widenColumnType('integer', 'text')).toBe('json');
    expect(widenColumnType('boolean', 'integer')).toBe('json');
    expect(valueFits('x', 'integer')).toBe(false);
    expect(valueFits(null, 'integer')).toBe(true);
    // Matches the pattern but is no real day or time: text, so PostgreSQL never refuses it.
    for (const impossible of [
      '2026-02-30T10:00:00Z',
      '2025-02-29T10:00:00Z',
      '0000-01-01T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-11-20T24:00:00Z',
      '2026-11-20T10:60:00Z',
      '2026-11-20T10:00:60Z',
      '2026-11-20T10:00:00+16:00',
      '2026-11-20T10:00:00-05:60',
    ]) {
      expect(inferColumnType(impossible), impossible).toBe('text');
      expect(valueFits(impossible, 'datetime'), impossible).toBe(false);
    }
    expect(inferColumnType('2024-02-29T23:59:59.999999+14:00')).toBe('datetime');
    expect(inferColumnType('2026-11-20T10:00:00-05:30')).toBe('datetime');
    expect(inferColumnType('2000-02-29')).toBe('date');
    expect(inferColumnType('1900-02-29')).toBe('text');
    expect(valueFits('2026-04-31', 'date')).toBe(false);
  });

  it('checks date-times as reading each field back would, over edge cases and near misses', () => {
    const cases: unknown[] = [
      ...dateTimeCases(),
      null,
      undefined,
      0,
      20260101,
      1.5,
      10n,
      true,
      {},
      ['2026-01-01T00:00:00Z'],
    ];
    let dateTimes = 0;
    for (const value of cases) {
      const expected = isDateTimeByFields(value);
      if (expected) dateTimes += 1;
      const label = String(value);
      expect(valueFits(value, 'datetime'), label).toBe(expected || value == null);
      if (typeof value === 'string') {
        expect(inferColumnType(value) === 'datetime', label).toBe(expected);
      }
    }
    // Both answers are well represented.
    expect(dateTimes).toBeGreaterThan(1000);
    expect(cases.length - dateTimes).toBeGreaterThan(1000);
  });
});

describe('table planning', () => {
  it('creates, adds and widens but never narrows or drops', () => {
    expect(planTable('t', undefined, [{ name: 'a', type: 'text' }], 'schema').changes).toEqual([
      {
        kind: 'create_table',
        table: 't',
        columns: [{ name: 'a', type: 'text' }],
        reason: 'schema',
      },
    ]);
    const plan = planTable(
      't',
      [
        { name: 'a', type: 'integer' },
        { name: 'gone', type: 'text' },
        { name: 'wide', type: 'json' },
      ],
      [
        { name: 'a', type: 'number' },
        { name: 'b', type: 'datetime' },
        { name: 'wide', type: 'integer' },
      ],
      'schema',
    );
    expect(plan.columns.map((c) => `${c.name}:${c.type}`)).toEqual([
      'a:decimal',
      'gone:text',
      'wide:json',
      'b:datetime',
    ]);
    expect(plan.changes.map((c) => c.kind)).toEqual(['widen_column', 'add_column']);
  });

  it('adds columns for unannounced fields, widens for values that do not fit, refuses unsafe names', () => {
    const plan = planColumnsForRows(
      't',
      [{ name: 'n', type: 'integer' }],
      [
        { id: 1, n: 1, fresh: null, 'Bad-Name': 1 },
        { id: 2, n: 'many', fresh: 'x' },
      ],
    );
    expect(plan.columns).toEqual([
      { name: 'n', type: 'json' },
      { name: 'fresh', type: 'text' },
    ]);
    expect(plan.changes.map((c) => `${c.kind}:${c.column}:${c.reason}`)).toEqual([
      'widen_column:n:value',
      'add_column:fresh:rows',
    ]);
    expect(plan.refusedFields).toEqual(['Bad-Name']);
  });

  it('widens a field more than once in one page and remembers refused names', () => {
    const plan = planColumnsForRows(
      't',
      [{ name: 'at', type: 'datetime' }],
      [
        { id: 1, n: 1, at: '2026-01-01T00:00:00Z', 'Bad-Name': 1 },
        { id: 2, n: 1.5, at: '2026-02-30T00:00:00Z', 'Bad-Name': 2 },
        { id: 3, n: 'x', at: '2026-01-01T00:00:00+00:00', 'Bad-Name': 3 },
        { id: 4, n: 2, at: null },
      ],
    );
    expect(plan.columns).toEqual([
      { name: 'at', type: 'text' },
      { name: 'n', type: 'json' },
    ]);
    expect(plan.changes.map((c) => `${c.kind}:${c.column}:${c.toType}`)).toEqual([
      'add_column:n:json',
      'widen_column:at:text',
    ]);
    expect(plan.refusedFields).toEqual(['Bad-Name']);
  });

  it('waits for a non-null value before adding a column', () => {
    expect(planColumnsForRows('t', [], [{ id: 1, later: null }]).changes).toEqual([]);
  });
});

describe('OpenAPI columns', () => {
  it('maps the export schema shape to logical columns', () => {
    const document = {
      paths: {
        '/api/export/things/': {
          get: {
            responses: {
              '200': {
                content: {
                  'application/json': { schema: { $ref: '#/components/schemas/ThingList' } },
                },
              },
            },
          },
        },
        '/api/export/Bad-Resource/': {
          get: {
            responses: {
              '200': {
                content: {
                  'application/json': { schema: { $ref: '#/components/schemas/ThingList' } },
                },
              },
            },
          },
        },
      },
      components: {
        schemas: {
          ThingList: {
            type: 'object',
            properties: {
              results: { type: 'array', items: { $ref: '#/components/schemas/ThingDetail' } },
            },
          },
          StatusEnum: { enum: ['a', 'b'], type: 'string' },
          BlankEnum: { enum: [''] },
          ThingDetail: {
            type: 'object',
            properties: {
              id: { type: 'integer' },
              count: { type: 'integer', nullable: true },
              ratio: { type: 'number', format: 'double' },
              flag: { type: 'boolean' },
              at: { type: 'string', format: 'date-time' },
              day: { type: 'string', format: 'date' },
              price: { type: 'string', format: 'decimal' },
              status: {
                oneOf: [
                  { $ref: '#/components/schemas/StatusEnum' },
                  { $ref: '#/components/schemas/BlankEnum' },
                ],
              },
              kind: { allOf: [{ $ref: '#/components/schemas/StatusEnum' }] },
              free: {},
              vector: { type: 'array', items: { type: 'number' } },
              'Weird"Name': { type: 'string' },
            },
          },
        },
      },
    };
    const { tables, refused } = columnsFromOpenApi(document);
    expect(tables.get('things')).toEqual([
      { name: 'count', type: 'integer' },
      { name: 'ratio', type: 'number' },
      { name: 'flag', type: 'boolean' },
      { name: 'at', type: 'datetime' },
      { name: 'day', type: 'date' },
      { name: 'price', type: 'text' },
      { name: 'status', type: 'text' },
      { name: 'kind', type: 'text' },
      { name: 'free', type: 'json' },
      { name: 'vector', type: 'json' },
    ]);
    expect(refused).toEqual(['field "Weird\\"Name" of things', 'resource "Bad-Resource"']);
  });
});

describe('exact JSON', () => {
  it('keeps 64-bit integers exact and leaves the rest to JSON.parse', () => {
    const parsed = parseJsonExact(
      '{"results":[{"id":9223372036854775807,"x":1.5,"s":"12345678901234567"}]}',
    ) as {
      results: Array<Record<string, unknown>>;
    };
    expect(parsed.results[0]).toEqual({ id: 9223372036854775807n, x: 1.5, s: '12345678901234567' });
    expect(parseJsonExact('{"id": 5}')).toEqual({ id: 5 });
    expect(() => parseJsonExact('{"id": 5')).toThrow(SyntaxError);
  });

  it('finds a number past 2^53 wherever it is, and nothing where there is none', () => {
    const big = 9007199254740993n;
    expect(parseJsonExact('9007199254740993')).toBe(big);
    expect(parseJsonExact('-9007199254740993')).toBe(-big);
    expect(parseJsonExact('[1, "x", [2, [3, 9007199254740993]]]')).toEqual([1, 'x', [2, [3, big]]]);
    expect(parseJsonExact('{"a": {"b": [{"c": -9007199254740993}]}, "d": "e"}')).toEqual({
      a: { b: [{ c: -big }] },
      d: 'e',
    });
    // A float that large is no integer literal: the second parse keeps it a number.
    expect(parseJsonExact('{"x": [1e300]}')).toEqual({ x: [1e300] });
    for (const text of ['9007199254740991', '-9007199254740991', '"9007199254740993"', 'null']) {
      expect(parseJsonExact(text)).toEqual(JSON.parse(text));
    }
    // Nesting as deep as the server can write is walked, and parsed exactly past 2^53.
    const deep = `${'['.repeat(MAX_JSON_DEPTH)}9007199254740993${']'.repeat(MAX_JSON_DEPTH)}`;
    let inner = parseJsonExact(deep);
    while (Array.isArray(inner)) inner = inner[0] as unknown;
    expect(inner).toBe(big);
    // Deeper is refused as such, whatever it holds, before the exact parse could overflow.
    for (const number of ['1', '9007199254740993']) {
      const deeper = `${'['.repeat(20_000)}${number}${']'.repeat(20_000)}`;
      expect(() => parseJsonExact(deeper)).toThrow(JsonTooDeepError);
    }
  });
});

describe('retry timing', () => {
  it('backs off exponentially with jitter and honours Retry-After', () => {
    const settings = { minDelayMs: 100, maxDelayMs: 1000 };
    expect(retryDelayMs(1, settings, undefined, () => 0)).toBe(50);
    expect(retryDelayMs(1, settings, undefined, () => 1)).toBe(100);
    expect(retryDelayMs(3, settings, undefined, () => 1)).toBe(400);
    expect(retryDelayMs(10, settings, undefined, () => 1)).toBe(1000);
    expect(retryDelayMs(1, settings, 5000, () => 0)).toBe(5000);
    expect(parseRetryAfterMs('7', undefined, 0)).toBe(7000);
    expect(parseRetryAfterMs(undefined, 3, 0)).toBe(3000);
    expect(parseRetryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', undefined, 4000)).toBe(6000);
    expect(parseRetryAfterMs(undefined, 'soon', 0)).toBeUndefined();
  });
});
