/**
 * The shape of a fixture: the resources a fake server serves and the fields of each, described
 * as the server's schema would (fixture.ts holds the sample one; field-values.ts makes values).
 */
import type { CursorKind } from '../interfaces.js';

export type FieldKind =
  | 'integer'
  | 'number'
  | 'boolean'
  | 'string'
  | 'datetime'
  | 'date'
  | 'uuid'
  | 'decimal'
  | 'enum'
  | 'json'
  | 'float_array'
  | 'integer_array'
  | 'string_array';

/** What a string field's text looks like. */
export type TextStyle =
  | 'word'
  | 'name'
  | 'title'
  | 'sentence'
  | 'paragraph'
  | 'message'
  | 'email'
  | 'url'
  | 'slug'
  | 'code';

/** The usual shape of a free JSON value. */
export type JsonShape =
  'object' | 'list' | 'scalar' | 'any' | 'config' | 'translations' | 'message_metadata';

export interface FieldSpec {
  kind: FieldKind;
  nullable?: boolean;
  /** How often a nullable field is null (default 0.2). */
  nullChance?: number;
  /** integer: the resource whose ids this field holds (foreign keys are plain ids). */
  references?: string;
  /** enum: the allowed values. */
  values?: ReadonlyArray<string | number>;
  text?: TextStyle;
  json?: JsonShape;
  /** float_array: the vector length (default 16). */
  dimensions?: number;
  /** decimal: digits before and after the point (default 6 and 4). */
  decimalDigits?: number;
  decimalPlaces?: number;
}

export interface FixtureResource {
  resource: string;
  /** Django model label, e.g. `chat.chatmessage`. */
  model: string;
  cursor: CursorKind;
  /** Fields the server seals; their spec describes the plaintext value. */
  sealedFields: string[];
  /** Every field but `id`, in the server's order. */
  fields: Record<string, FieldSpec>;
}
