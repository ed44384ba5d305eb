/**
 * JSON encoding and decoding for sealed values.
 *
 * Encoding: the server seals `json.dumps(value)` (Python defaults: `", "` and `": "` separators,
 * non-ASCII escaped as `\uXXXX`, floats in Python `repr` form), so `encodeJson(value, 'python')`
 * reproduces those bytes for a faithful fake server. `'compact'` is plain JSON for our own formats.
 * Both accept bigint (written as digits) because rows carry ids past 2^53.
 *
 * Decoding: integers past 2^53 come back as bigint instead of silently losing digits.
 */
import { isInteger, isLosslessNumber, isSafeNumber, parse } from 'lossless-json';

export type JsonStyle = 'python' | 'compact';

export function encodeJson(value: unknown, style: JsonStyle): string {
  const encoded = encodeValue(value, style, new Set());
  // Like JSON.stringify at the top level: nothing encodable means JSON null.
  return encoded ?? 'null';
}

/** Parse JSON text; unsafe integers become bigint, duplicate keys keep the last value (as Python). */
export function decodeJson(text: string): unknown {
  return parse(text, null, {
    parseNumber: (digits: string) =>
      isInteger(digits) && !isSafeNumber(digits) ? BigInt(digits) : Number(digits),
    onDuplicateKey: ({ newValue }) => newValue,
  });
}

function encodeValue(value: unknown, style: JsonStyle, seen: Set<object>): string | undefined {
  if (value !== null && typeof value === 'object' && !isLosslessNumber(value)) {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value);
  }
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return encodeString(value, style);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return value.toString();
    case 'number':
      return encodeNumber(value, style);
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    default:
      break;
  }
  if (isLosslessNumber(value)) return value.toString();
  const object = value as object;
  if (seen.has(object)) throw new TypeError('Cannot encode a value that contains itself as JSON');
  seen.add(object);
  const itemSeparator = style === 'python' ? ', ' : ',';
  const keySeparator = style === 'python' ? ': ' : ':';
  let text: string;
  if (Array.isArray(object)) {
    const items = object.map((item: unknown) => encodeValue(item, style, seen) ?? 'null');
    text = `[${items.join(itemSeparator)}]`;
  } else {
    const members: string[] = [];
    for (const [key, member] of Object.entries(object)) {
      const encoded = encodeValue(member, style, seen);
      if (encoded !== undefined) members.push(encodeString(key, style) + keySeparator + encoded);
    }
    text = `{${members.join(itemSeparator)}}`;
  }
  seen.delete(object);
  return text;
}

function encodeString(text: string, style: JsonStyle): string {
  if (style === 'compact') return JSON.stringify(text);
  // Python's ensure_ascii: every UTF-16 code unit outside printable ASCII becomes \uXXXX.
  let out = '"';
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    const char = text[index] as string;
    if (char === '"') out += '\\"';
    else if (char === '\\') out += '\\\\';
    else if (char === '\n') out += '\\n';
    else if (char === '\r') out += '\\r';
    else if (char === '\t') out += '\\t';
    else if (char === '\b') out += '\\b';
    else if (char === '\f') out += '\\f';
    else if (code < 0x20 || code > 0x7e) out += '\\u' + code.toString(16).padStart(4, '0');
    else out += char;
  }
  return out + '"';
}

function encodeNumber(value: number, style: JsonStyle): string {
  // Python's json.dumps would write NaN/Infinity, which is not JSON; JSON.stringify writes null.
  if (!Number.isFinite(value)) return 'null';
  if (style === 'compact') return JSON.stringify(value);
  // An integral JS number most likely came from a JSON integer, which Python prints as an int.
  if (Number.isInteger(value)) return BigInt(value).toString();
  return pythonFloatRepr(value);
}

/** Python's repr(float): shortest round-trip digits, exponent form when exponent < -4 or >= 16. */
function pythonFloatRepr(value: number): string {
  const [mantissa = '', exponentText = '0'] = value.toExponential().split('e');
  const negative = mantissa.startsWith('-');
  const digits = mantissa.replace('-', '').replace('.', '');
  const exponent = Number(exponentText);
  const sign = negative ? '-' : '';
  if (exponent < -4 || exponent >= 16) {
    const fraction = digits.length > 1 ? `.${digits.slice(1)}` : '';
    const exponentDigits = String(Math.abs(exponent)).padStart(2, '0');
    return `${sign}${digits[0]}${fraction}e${exponent < 0 ? '-' : '+'}${exponentDigits}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  const integerPart = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0');
  const fractionPart = digits.slice(exponent + 1) || '0';
  return `${sign}${integerPart}.${fractionPart}`;
}
