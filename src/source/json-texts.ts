/**
 * The text a page body gives each row's JSON values (objects and arrays) in the fields a table
 * stores as json, so a json column stores what the server wrote instead of parsing it and
 * writing it again. Found by one pass over the body JSON.parse accepted, only when a page has
 * json columns, led by the parsed rows: each key is checked where the row's next key should be
 * and a string's end first looked for where its parsed length puts it, so most of the body is
 * stepped over, not read. A text is given only for the very object JSON.parse made of that field
 * of that row; a body that is not as the rows say (a key repeated or escaped, keys in another
 * order, `results` twice) is read key by key, as JSON.parse reads it.
 */
import type { JsonTexts, Row } from '../interfaces.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;

/** The texts of a parsed page's rows' values, found when first asked for. */
export function pageJsonTexts(text: string, rows: readonly Row[], bare: boolean): JsonTexts {
  return {
    forFields(fields) {
      const found = findTexts(text, rows, bare, fields);
      return (row, field, value) => {
        const index = found.fields.indexOf(field);
        if (index === -1 || rows[row]?.[field] !== value) return undefined;
        const start = found.starts[index]![row]!;
        return start === -1 ? undefined : text.slice(start, found.ends[index]![row]!);
      };
    },
  };
}

export interface FoundTexts {
  fields: readonly string[];
  /** Per field, per row: where its object or array value starts and ends (-1: none). */
  starts: Int32Array[];
  ends: Int32Array[];
}

/** Where `fields` of each row hold an object or array, in `text`; none found when unsure. */
export function findTexts(
  text: string,
  rows: readonly Row[],
  bare: boolean,
  fields: readonly string[],
): FoundTexts {
  const found: FoundTexts = {
    fields,
    starts: fields.map(() => new Int32Array(rows.length).fill(-1)),
    ends: fields.map(() => new Int32Array(rows.length)),
  };
  if (fields.length === 0 || rows.length === 0) return found;
  const forget = () => {
    for (const starts of found.starts) starts.fill(-1);
    return found;
  };
  try {
    const scanner = new Scanner(text, fields, found);
    const first = bare ? scanner.space(0) : scanner.firstResults();
    if (first === -1 || text.charCodeAt(first) !== OPEN_ARRAY) return found;
    const end = scanner.guidedRows(first, rows);
    if (end !== -1 && (bare || !scanner.resultsAfter(end))) return found;
    forget();
    const results = bare ? first : scanner.lastResults();
    if (results === -1 || text.charCodeAt(results) !== OPEN_ARRAY) return found;
    return scanner.rows(results) === rows.length ? found : forget();
  } catch {
    // Text JSON.parse accepted always scans; anything else is stored the long way.
    return forget();
  }
}

class Scanner {
  constructor(
    private readonly text: string,
    private readonly fields: readonly string[],
    private readonly found: FoundTexts,
  ) {}

  /** Past any whitespace at `at`. */
  space(at: number): number {
    const { text } = this;
    for (;;) {
      const char = text.charCodeAt(at);
      if (char !== 0x20 && char !== 0x0a && char !== 0x0d && char !== 0x09) return at;
      at += 1;
    }
  }

  /** Past the string whose opening quote is at `at`. */
  stringEnd(at: number): number {
    const { text } = this;
    // Most strings are short: a loop beats a call to indexOf for them.
    const near = Math.min(at + 48, text.length);
    let end = at + 1;
    while (end < near && text.charCodeAt(end) !== QUOTE) end += 1;
    if (end === near) end = text.indexOf('"', near);
    for (;;) {
      if (end === -1) throw new Error('unterminated string');
      if (this.closesString(end)) return end + 1;
      end = text.indexOf('"', end + 1);
    }
  }

  /** Whether the character at `at` is a quote that ends a string (not escaped by a backslash). */
  closesString(at: number): boolean {
    const { text } = this;
    if (text.charCodeAt(at) !== QUOTE) return false;
    let slashes = 0;
    while (text.charCodeAt(at - 1 - slashes) === BACKSLASH) slashes += 1;
    return slashes % 2 === 0;
  }

  /** Past the value starting at `at`. */
  valueEnd(at: number): number {
    const { text } = this;
    const first = text.charCodeAt(at);
    if (first === QUOTE) return this.stringEnd(at);
    if (first === OPEN_OBJECT || first === OPEN_ARRAY) {
      let depth = 0;
      let index = at;
      for (;;) {
        const char = text.charCodeAt(index);
        if (char === QUOTE) {
          index = this.stringEnd(index);
          continue;
        }
        if (char === OPEN_OBJECT || char === OPEN_ARRAY) depth += 1;
        else if (char === CLOSE_OBJECT || char === CLOSE_ARRAY) {
          depth -= 1;
          if (depth === 0) return index + 1;
        } else if (Number.isNaN(char)) throw new Error('unterminated container');
        index += 1;
      }
    }
    // A number, true, false or null: up to what ends it.
    let end = at;
    for (;;) {
      const char = text.charCodeAt(end);
      if (char === COMMA || char === CLOSE_OBJECT || char === CLOSE_ARRAY || !(char > 0x20)) {
        return end;
      }
      end += 1;
    }
  }

  /** Where the value after the key (a string ending at `end`) starts, past its colon. */
  afterColon(end: number): number {
    const colon = this.space(end);
    if (this.text.charCodeAt(colon) !== COLON) throw new Error('no colon');
    return this.space(colon + 1);
  }

  /** The key whose quote is at `at`, decoded; and where it ends. */
  key(at: number): { name: string; end: number } {
    const end = this.stringEnd(at);
    const raw = this.text.slice(at + 1, end - 1);
    return { name: raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw, end };
  }

  /** Where the value of the page object's first `results` key starts (-1: none). */
  firstResults(): number {
    const { text } = this;
    let at = this.space(0);
    if (text.charCodeAt(at) !== OPEN_OBJECT) return -1;
    at = this.space(at + 1);
    while (text.charCodeAt(at) === QUOTE) {
      const { name, end } = this.key(at);
      const value = this.afterColon(end);
      if (name === 'results') return value;
      at = this.space(this.valueEnd(value));
      if (text.charCodeAt(at) !== COMMA) return -1;
      at = this.space(at + 1);
    }
    return -1;
  }

  /** Whether the page object names `results` again after the value ending at `end`. */
  resultsAfter(end: number): boolean {
    const { text } = this;
    let at = this.space(end);
    while (text.charCodeAt(at) === COMMA) {
      const { name, end: keyEnd } = this.key(this.space(at + 1));
      if (name === 'results') return true;
      at = this.space(this.valueEnd(this.afterColon(keyEnd)));
    }
    return false;
  }

  /** Where the value of the page object's last `results` key starts (-1: none). */
  lastResults(): number {
    let results = this.firstResults();
    if (results === -1) return -1;
    for (;;) {
      let at = this.space(this.valueEnd(results));
      let next = -1;
      while (this.text.charCodeAt(at) === COMMA) {
        const { name, end } = this.key(this.space(at + 1));
        const value = this.afterColon(end);
        if (name === 'results') {
          next = value;
          break;
        }
        at = this.space(this.valueEnd(value));
      }
      if (next === -1) return results;
      results = next;
    }
  }

  /**
   * Walks the rows' array at `at` led by the parsed rows; returns where the array ends, or -1
   * (nothing noted may be used) as soon as the text is not as the rows say.
   */
  guidedRows(at: number, rows: readonly Row[]): number {
    const { text, fields } = this;
    const { starts, ends } = this.found;
    at = this.space(at + 1);
    for (let row = 0; row < rows.length; row++) {
      const parsed = rows[row]!;
      if (text.charCodeAt(at) !== OPEN_OBJECT) return -1;
      at = this.space(at + 1);
      const keys = Object.keys(parsed);
      const values = Object.values(parsed);
      for (let member = 0; member < keys.length; member++) {
        const key = keys[member]!;
        const keyEnd = at + key.length + 2;
        // The key as written, unescaped (an escaped one is longer, or other characters).
        if (text.charCodeAt(at) !== QUOTE || text.charCodeAt(keyEnd - 1) !== QUOTE) return -1;
        for (let index = 0; index < key.length; index++) {
          if (text.charCodeAt(at + 1 + index) !== key.charCodeAt(index)) return -1;
        }
        const start = this.afterColon(keyEnd);
        const value = values[member];
        let end: number;
        if (typeof value === 'string') {
          if (text.charCodeAt(start) !== QUOTE) return -1;
          // Escapes only make a string's text longer than its value.
          end = start + value.length + 2;
          if (!this.closesString(end - 1)) end = this.stringEnd(end - 2);
        } else {
          end = this.valueEnd(start);
          if (typeof value === 'object' && value !== null) {
            const field = fields.indexOf(key);
            if (field !== -1) {
              starts[field]![row] = start;
              ends[field]![row] = end;
            }
          }
        }
        at = this.space(end);
        const next = text.charCodeAt(at);
        if (member === keys.length - 1) break;
        if (next !== COMMA) return -1;
        at = this.space(at + 1);
      }
      if (text.charCodeAt(at) !== CLOSE_OBJECT) return -1;
      at = this.space(at + 1);
      if (row < rows.length - 1) {
        if (text.charCodeAt(at) !== COMMA) return -1;
        at = this.space(at + 1);
      }
    }
    return text.charCodeAt(at) === CLOSE_ARRAY ? at + 1 : -1;
  }

  /** Walks the rows' array at `at` key by key, noting the fields' values; counts its elements. */
  rows(at: number): number {
    const { text, fields } = this;
    const { starts, ends } = this.found;
    let row = 0;
    at = this.space(at + 1);
    if (text.charCodeAt(at) === CLOSE_ARRAY) return 0;
    for (;;) {
      if (text.charCodeAt(at) === OPEN_OBJECT) {
        at = this.space(at + 1);
        while (text.charCodeAt(at) === QUOTE) {
          const { name, end: keyEnd } = this.key(at);
          const escaped = keyEnd - at - 2 !== name.length;
          const field = fields.indexOf(name);
          const value = this.afterColon(keyEnd);
          const end = this.valueEnd(value);
          if (field !== -1) {
            const first = text.charCodeAt(value);
            // The last of repeated keys is the one JSON.parse keeps; a key written with escapes
            // leaves its value to be written anew.
            starts[field]![row] =
              !escaped && (first === OPEN_OBJECT || first === OPEN_ARRAY) ? value : -1;
            ends[field]![row] = end;
          }
          at = this.space(end);
          if (text.charCodeAt(at) !== COMMA) break;
          at = this.space(at + 1);
        }
        if (text.charCodeAt(at) !== CLOSE_OBJECT) throw new Error('not a row');
        at = this.space(at + 1);
      } else {
        at = this.space(this.valueEnd(at));
      }
      row += 1;
      if (text.charCodeAt(at) !== COMMA) break;
      at = this.space(at + 1);
    }
    if (text.charCodeAt(at) !== CLOSE_ARRAY) throw new Error('not an array');
    return row;
  }
}
