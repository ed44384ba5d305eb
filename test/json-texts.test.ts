/**
 * JSON columns store the text the page body gave each value (src/source/json-texts.ts), never a
 * value parsed and written again: the text must be exactly the server's, and only ever for the
 * very value JSON.parse made of it, whatever the body holds (repeated keys, escapes, `results`
 * twice, keys JSON.parse reorders).
 */
import { describe, expect, it } from 'vitest';
import type { Row } from '../src/interfaces.js';
import { findTexts, pageJsonTexts } from '../src/source/json-texts.js';

function textsOf(body: string, fields: string[], bare = false) {
  const parsed = JSON.parse(body) as { results: Row[] } | Row[];
  const rows = bare ? (parsed as Row[]) : (parsed as { results: Row[] }).results;
  const textOf = pageJsonTexts(body, rows, bare).forFields(fields);
  return { rows, textOf };
}

describe('the text of a json value, cut from the page body', () => {
  it('is the server text as written: spaces, escapes, 1.0, key order', () => {
    const body =
      '{"cursor": "c", "has_more": true, "results": [ ' +
      '{"id": 1, "text": "a \\"quoted\\" {[", "meta": {"b": 1.0, "a": [1e-05, "\\u00e9\\n"]}, "tags": [ ] },' +
      '{"id":2,"meta":{"x":{"y":"}"}},"tags":["t"]}]}';
    const { rows, textOf } = textsOf(body, ['meta', 'tags']);
    expect(textOf(0, 'meta', rows[0]!.meta)).toBe('{"b": 1.0, "a": [1e-05, "\\u00e9\\n"]}');
    expect(textOf(0, 'tags', rows[0]!.tags)).toBe('[ ]');
    expect(textOf(1, 'meta', rows[1]!.meta)).toBe('{"x":{"y":"}"}}');
    expect(textOf(1, 'tags', rows[1]!.tags)).toBe('["t"]');
    // Only the fields asked for, only objects and arrays, only the value parsed from the body.
    expect(textOf(0, 'text', rows[0]!.text)).toBeUndefined();
    expect(textOf(0, 'meta', { b: 1, a: [0.00001, 'é\n'] })).toBeUndefined();
    expect(textOf(1, 'meta', rows[0]!.meta)).toBeUndefined();
    expect(textOf(5, 'meta', rows[0]!.meta)).toBeUndefined();
  });

  it('follows JSON.parse where the body repeats keys, escapes them, or reorders them', () => {
    // A repeated key: JSON.parse keeps the last.
    let parsed = textsOf('{"results":[{"id":1,"m":{"first":1},"m":{"last":2}}]}', ['m']);
    expect(parsed.textOf(0, 'm', parsed.rows[0]!.m)).toBe('{"last":2}');
    // The last one written with an escape: its value is written anew, never the first's text.
    parsed = textsOf('{"results":[{"id":1,"m":{"first":1},"\\u006d":{"last":2}}]}', ['m']);
    expect(parsed.rows[0]!.m).toEqual({ last: 2 });
    expect(parsed.textOf(0, 'm', parsed.rows[0]!.m)).toBeUndefined();
    // `results` twice: JSON.parse keeps the last list.
    parsed = textsOf(
      '{"results":[{"id":1,"m":{"old":1}}],"cursor":null,"results":[{"id":1,"m":{"new":2}}]}',
      ['m'],
    );
    expect(parsed.textOf(0, 'm', parsed.rows[0]!.m)).toBe('{"new":2}');
    // Integer-like keys come first in a parsed object, whatever their place in the text.
    parsed = textsOf('{"results":[{"id":1,"m":{"a":1},"7":{"b":2}}]}', ['m', '7']);
    expect(parsed.textOf(0, 'm', parsed.rows[0]!.m)).toBe('{"a":1}');
    expect(parsed.textOf(0, '7', parsed.rows[0]!['7'])).toBe('{"b":2}');
    // A nested key named like the field is not the field.
    parsed = textsOf('{"results":[{"id":1,"x":{"m":{"inner":1}},"m":[2]}]}', ['m']);
    expect(parsed.textOf(0, 'm', parsed.rows[0]!.m)).toBe('[2]');
    // A bare array of rows.
    parsed = textsOf('[{"id":1,"m":{"a":1}} , {"id":2}]', ['m'], true);
    expect(parsed.textOf(0, 'm', parsed.rows[0]!.m)).toBe('{"a":1}');
  });

  it('gives, for thousands of generated bodies, exactly the text of each value JSON.parse made', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(items: T[]) => items[Math.floor(random() * items.length)]!;
    const space = () => pick(['', '', ' ', '\n  ', '\t']);
    const strings = ['a', 'é', '"', '\\', '}]', '\u2028', '😀', 'x'.repeat(60), ''];
    const stringText = (value: string) =>
      random() < 0.3
        ? `"${[...value].map((char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"`
        : JSON.stringify(value);
    const valueText = (depth: number): string => {
      const kind = random();
      if (depth > 2 || kind < 0.3) {
        return pick([
          () => stringText(pick(strings)),
          () => pick(['1', '1.0', '-0', '1e5', '12345678901234567890', 'true', 'null']),
        ])();
      }
      if (kind < 0.6) {
        const items = Array.from({ length: Math.floor(random() * 4) }, () => valueText(depth + 1));
        return `[${space()}${items.join(`${space()},${space()}`)}${space()}]`;
      }
      const keys = Array.from({ length: Math.floor(random() * 4) }, () =>
        pick(['m', 'k', 'j', '1']),
      );
      const members = keys.map(
        (key) => `${stringText(key)}${space()}:${space()}${valueText(depth + 1)}`,
      );
      return `{${space()}${members.join(`${space()},${space()}`)}${space()}}`;
    };
    let checked = 0;
    for (let body = 0; body < 2000; body++) {
      const rows = Array.from({ length: 1 + Math.floor(random() * 4) }, (_, id) => {
        const keys = [
          'id',
          ...Array.from({ length: Math.floor(random() * 5) }, () => pick(['m', 'n', 'k', '2'])),
        ];
        const members = keys.map((key) =>
          key === 'id'
            ? `"id"${space()}:${space()}${id}`
            : `${random() < 0.1 ? stringText(key) : JSON.stringify(key)}${space()}:${space()}${valueText(0)}`,
        );
        return `{${space()}${members.join(`${space()},${space()}`)}${space()}}`;
      });
      const text = `{"cursor":null,${space()}"has_more":false,"results":${space()}[${rows.join(',')}]}`;
      const parsed = (JSON.parse(text) as { results: Row[] }).results;
      const fields = ['m', 'n', 'k', '2'];
      const found = findTexts(text, parsed, false, fields);
      const textOf = pageJsonTexts(text, parsed, false).forFields(fields);
      parsed.forEach((row, index) => {
        for (const [field, value] of Object.entries(row)) {
          const given = fields.includes(field) ? textOf(index, field, value) : undefined;
          if (given === undefined) continue;
          checked += 1;
          expect(JSON.parse(given)).toEqual(value);
          const column = fields.indexOf(field);
          expect(text.slice(found.starts[column]![index]!, found.ends[column]![index]!)).toBe(
            given,
          );
        }
      });
    }
    expect(checked).toBeGreaterThan(1000);
  });
});
