/**
 * Text from the server (error details, names, file names, cursors) is shown on terminals and kept
 * in the warehouse, where a control character could move the cursor, clear the screen or rewrite
 * what a person reads. `printable` is the one function that makes such text safe to show: every
 * control character is escaped, and the text is cut to a length a person can read.
 */

/**
 * C0 controls, DEL, C1 controls (a terminal may read U+009B as the start of an escape sequence),
 * the bidirectional overrides and isolates (they reorder what is shown), and the line and
 * paragraph separators. Zero-width joiners stay: emoji need them.
 */
/* eslint-disable no-control-regex -- matching control characters is the point */
const UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_BUT_NEWLINE =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/* eslint-enable no-control-regex */

/** The escapes JSON uses, so escaped text inside a JSON string is still the same JSON value. */
const SHORT_ESCAPES: Record<string, string> = {
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\f': '\\f',
  '\r': '\\r',
};

function escape(character: string): string {
  return SHORT_ESCAPES[character] ?? `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** How long server text may be where nothing else says: a few lines of a terminal. */
export const PRINTABLE_LENGTH = 300;

/** How long an error text kept in the warehouse (`_ocs_runs`, `_ocs_resources`, …) may be. */
export const STORED_TEXT_LENGTH = 2000;

/** Error text as the warehouse keeps it: control characters escaped (line breaks kept), cut. */
export function storedText(text: string): string {
  return printable(text, { max: STORED_TEXT_LENGTH, keepNewlines: true });
}

export interface PrintableOptions {
  /** Characters kept before the text is cut (default PRINTABLE_LENGTH; Infinity: never cut). */
  max?: number;
  /** Keep line breaks (our own multi-line messages); every other control is still escaped. */
  keepNewlines?: boolean;
}

/**
 * `text` with every control character escaped (`\n`, `\u001b`, …, the forms JSON uses) and cut to
 * `max` characters, saying how many were left out.
 */
export function printable(text: string, options: PrintableOptions = {}): string {
  const max = options.max ?? PRINTABLE_LENGTH;
  const cut = text.length > max ? text.slice(0, max) : text;
  const escaped = cut.replace(options.keepNewlines ? UNSAFE_BUT_NEWLINE : UNSAFE, escape);
  return cut === text ? escaped : `${escaped}… (${text.length - max} more characters)`;
}

/** A name from the server in quotes, for messages: `"na\u001bme"`. */
export function quotedName(name: string, max = 80): string {
  return printable(JSON.stringify(name.length > max ? `${name.slice(0, max)}…` : name));
}
