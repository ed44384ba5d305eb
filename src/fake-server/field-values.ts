/**
 * Field specs of fake resources and the deterministic generation of plausible values for them:
 * the awkward ones included (quotes, newlines, emoji, optional `\u0000`, integral floats, free JSON
 * of every shape, embeddings), because those are what break warehouses.
 */
import type { Row } from '../interfaces.js';
import type { RowId } from '../export-api/cursor.js';
import { formatTimestamp } from '../export-api/cursor.js';
import { FakeDataset, type RowGeneratorContext } from './dataset.js';
import { SeededRandom, deriveSeed } from './random.js';
import { sampleContentSize } from './file-contents.js';
import type { FieldSpec, FixtureResource, JsonShape, TextStyle } from './fixture-schema.js';

/**
 * Fields the server computes rather than stores as given: `files.content_size` is the size of
 * the stored file, so it agrees with the bytes the fake serves for the row (sampleFileContent).
 * A generated value is still drawn first, so every other value stays as the seed gives it.
 */
const DERIVED_FIELDS: Readonly<Record<string, Readonly<Record<string, (id: RowId) => unknown>>>> = {
  files: { content_size: sampleContentSize },
};

export interface ValueOptions {
  /** Put `\u0000` in some text values (PostgreSQL rejects it in text and jsonb). */
  nulChars?: boolean;
}

const words = (
  'the a to of and in is it you that for on with as this be at by not are from or have an ' +
  'they which one your all can there their what about out if more when up use how said each ' +
  'she time would so these her like him into has two see could people than first water been ' +
  'call who oil its now find long down day did get come made may part patient clinic dose ' +
  'reminder appointment vaccine symptom nurse schedule follow message reply thanks please ' +
  'morning evening week month child mother health visit question answer help support data ' +
  'report session bot channel pipeline node prompt model assistant user consent survey form'
).split(' ');
const firstNames = [
  'Amina',
  'Bongani',
  'Chen',
  'Dara',
  'Emeka',
  'Fatima',
  'Gita',
  'Hugo',
  'Ines',
  'Jomo',
  'Kai',
  'Lerato',
  'Maya',
  'Nikhil',
  "O'Brien",
  'Priya',
  'Zoë',
];
const lastNames = ['Abebe', 'Banda', 'Castillo', 'Dlamini', 'Eze', 'Fischer', 'García', 'Ivanova'];
const awkwardTexts = [
  'She said "hello" and then \'bye\'.',
  'Line one\nLine two\r\n\tindented line three',
  'Party time 🎉🚀 naïve café 日本語 עברית',
  'A back\\slash: C:\\temp\\notes.txt and a /forward/slash',
  '{"looks": "like json", "but": ["is", "text"]}',
  "Robert'); DROP TABLE students;-- ",
  '   leading and trailing spaces   ',
  '',
  '😀'.repeat(20),
];
const nulTexts = ['before\u0000after', '\u0000', 'trailing nul\u0000'];

const textPools = new Map<TextStyle, string[]>();

/** 2048 texts of a style, built once from a fixed seed so they never depend on call order. */
function textPool(style: 'title' | 'sentence' | 'paragraph' | 'message'): string[] {
  let pool = textPools.get(style);
  if (!pool) {
    const random = new SeededRandom(deriveSeed(7, `text:${style}`));
    const sentence = (minWords: number, maxWords: number): string => {
      const count = random.int(minWords, maxWords);
      const picked: string[] = [];
      for (let index = 0; index < count; index += 1) picked.push(random.pick(words));
      const text = picked.join(' ');
      return text.charAt(0).toUpperCase() + text.slice(1) + '.';
    };
    pool = [];
    for (let index = 0; index < 2048; index += 1) {
      if (style === 'title') pool.push(sentence(2, 5).slice(0, -1));
      else if (style === 'sentence') pool.push(sentence(6, 14));
      else if (style === 'paragraph')
        pool.push([sentence(6, 14), sentence(6, 14), sentence(6, 14)].join(' '));
      else pool.push([sentence(6, 14), sentence(6, 14), sentence(3, 8)].join(' '));
    }
    textPools.set(style, pool);
  }
  return pool;
}

function hexCode(random: SeededRandom): string {
  return random.uuid().replace(/-/g, '');
}

export class ValueGenerator {
  constructor(
    readonly random: SeededRandom,
    private readonly options: ValueOptions = {},
  ) {}

  /** Usually plain words; sometimes the awkward characters real data has. */
  text(style: TextStyle = 'sentence'): string {
    if (this.options.nulChars && this.random.chance(0.03)) return this.random.pick(nulTexts);
    if (style !== 'email' && style !== 'url' && style !== 'slug' && this.random.chance(0.05)) {
      return this.random.pick(awkwardTexts);
    }
    switch (style) {
      case 'word':
        return this.random.pick(words);
      case 'name':
        return `${this.random.pick(firstNames)} ${this.random.pick(lastNames)}`;
      case 'title':
      case 'sentence':
      case 'paragraph':
      case 'message':
        // Picked from a pool of ready texts: a million fresh strings would cost seconds and GBs.
        return this.random.pick(textPool(style));
      case 'email':
        return `${this.random.pick(words)}.${this.random.int(1, 9999)}@example.org`;
      case 'url':
        return `https://example.org/${this.random.pick(words)}/${this.random.int(1, 99999)}`;
      case 'slug':
        return `${this.random.pick(words)}-${this.random.pick(words)}-${this.random.int(1, 999)}`;
      case 'code':
        return hexCode(this.random);
    }
  }

  /** A double; sometimes integral (serialized `3`, not `3.0`), sometimes negative. */
  number(): number {
    if (this.random.chance(0.15)) return this.random.int(0, 50);
    const value = this.random.next() * 1000 - (this.random.chance(0.1) ? 1000 : 0);
    return value;
  }

  decimal(digits = 6, places = 4): string {
    const whole = this.random.int(0, Math.min(10 ** Math.min(digits, 6) - 1, 99_999));
    if (places === 0) return String(whole);
    const fraction = String(this.random.int(0, 10 ** Math.min(places, 8) - 1)).padStart(
      places,
      '0',
    );
    return `${this.random.chance(0.05) ? '-' : ''}${whole}.${fraction.slice(0, places).padEnd(places, '0')}`;
  }

  date(nowMicros: number): string {
    return formatTimestamp(nowMicros - this.random.int(0, 400) * 86_400_000_000).slice(0, 10);
  }

  datetime(nowMicros: number): string {
    // Some on whole seconds, most with microseconds, as Django writes them.
    const offset = this.random.int(-30 * 86_400, 30 * 86_400) * 1_000_000;
    const micros = this.random.chance(0.3) ? 0 : this.random.int(1, 999_999);
    return formatTimestamp(nowMicros + offset + micros);
  }

  json(shape: JsonShape = 'any', depth = 0): unknown {
    switch (shape) {
      case 'object': {
        const value: Record<string, unknown> = {};
        const keys = this.random.int(0, 4);
        for (let index = 0; index < keys; index += 1) {
          const key = this.random.pick(words) + (index === 0 ? '' : `_${index}`);
          value[key] =
            depth < 2 && this.random.chance(0.3)
              ? this.json('any', depth + 1)
              : this.json('scalar', depth + 1);
        }
        return value;
      }
      case 'list': {
        const length = this.random.int(0, 4);
        return Array.from({ length }, () =>
          depth < 2 && this.random.chance(0.3)
            ? this.json('object', depth + 1)
            : this.json('scalar', depth + 1),
        );
      }
      case 'scalar': {
        const pick = this.random.int(0, 5);
        if (pick === 0) return null;
        if (pick === 1) return this.random.chance(0.5);
        if (pick === 2) return this.random.int(-5, 100_000);
        if (pick === 3) return this.number();
        return this.text('word');
      }
      case 'any': {
        const pick = this.random.next();
        if (pick < 0.55) return this.json('object', depth);
        if (pick < 0.8) return this.json('list', depth);
        return this.json('scalar', depth);
      }
      case 'config':
        return {
          api_key: `sk-${this.random.uuid().replace(/-/g, '')}`,
          api_base: this.random.chance(0.5) ? null : this.text('url'),
          organization: this.random.chance(0.5) ? this.text('slug') : '',
          timeout: this.random.int(5, 120),
        };
      case 'translations':
        return this.random.chance(0.7)
          ? {}
          : { fr: this.text('sentence'), es: this.text('sentence') };
      case 'message_metadata': {
        const metadata: Record<string, unknown> = {
          id: this.random.uuid(),
          ocs_tags: this.random.chance(0.3) ? [this.random.pick(words)] : [],
        };
        if (this.random.chance(0.6)) {
          metadata.trace_info = { trace_id: this.random.uuid(), trace_provider: 'langfuse' };
        }
        return metadata;
      }
    }
  }

  value(field: string, spec: FieldSpec, context: RowGeneratorContext): unknown {
    if (spec.nullable && this.random.chance(spec.nullChance ?? 0.2)) return null;
    switch (spec.kind) {
      case 'integer': {
        if (spec.references) {
          const id = context.dataset.hasResource(spec.references)
            ? context.dataset.randomId(spec.references, this.random)
            : undefined;
          return id ?? (spec.nullable ? null : 1);
        }
        return this.random.chance(0.05)
          ? this.random.int(2 ** 31, 2 ** 40)
          : this.random.int(0, 10_000);
      }
      case 'number':
        return this.number();
      case 'boolean':
        return this.random.chance(0.5);
      case 'string':
        return this.text(spec.text ?? textStyleFor(field));
      case 'datetime':
        return field === 'created_at' || field === 'updated_at'
          ? formatTimestamp(context.nowMicros)
          : this.datetime(context.nowMicros);
      case 'date':
        return this.date(context.nowMicros);
      case 'uuid':
        return this.random.uuid();
      case 'decimal':
        return this.decimal(spec.decimalDigits, spec.decimalPlaces);
      case 'enum':
        return spec.values && spec.values.length > 0 ? this.random.pick(spec.values) : '';
      case 'json':
        return this.json(spec.json ?? 'any');
      case 'float_array':
        return Array.from({ length: spec.dimensions ?? 16 }, () => this.random.next() * 2 - 1);
      case 'integer_array':
        return Array.from({ length: this.random.int(0, 5) }, () => this.random.int(1, 500));
      case 'string_array':
        return Array.from({ length: this.random.int(0, 3) }, () => this.text('word'));
    }
  }
}

/** A plausible text style from a field's name (for schemas that say only `string`). */
export function textStyleFor(field: string): TextStyle {
  if (/email/.test(field)) return 'email';
  if (/(^|_)(url|uri|link|avatar|file)$/.test(field)) return 'url';
  if (/slug/.test(field)) return 'slug';
  if (/(^|_)(id|identifier|token|key|hash|task_id|flow_id)$/.test(field)) return 'code';
  if (/^(first_name|last_name|username|full_name)$/.test(field)) return 'name';
  if (/(^|_)(name|title|label|topic|type|kind|language|currency|color)$/.test(field))
    return 'title';
  if (/(content|text|body|message|comment|material|prompt)/.test(field)) return 'message';
  if (/(description|summary|notes|instructions|error)/.test(field)) return 'paragraph';
  return 'sentence';
}

/** Fields an edit may change: not references, not the row's own timestamps. */
function editableFields(resource: FixtureResource): string[] {
  return Object.entries(resource.fields)
    .filter(([name, spec]) => !spec.references && name !== 'created_at' && name !== 'updated_at')
    .map(([name]) => name);
}

export function rowGeneratorFor(
  resource: FixtureResource,
  seed: number,
  options: ValueOptions = {},
): {
  generateRow: (context: RowGeneratorContext) => Record<string, unknown>;
  editRow: (row: Row, context: RowGeneratorContext) => Record<string, unknown>;
} {
  const values = new ValueGenerator(new SeededRandom(deriveSeed(seed, resource.resource)), options);
  const entries = Object.entries(resource.fields);
  const derived = Object.hasOwn(DERIVED_FIELDS, resource.resource)
    ? DERIVED_FIELDS[resource.resource]!
    : {};
  const valueOf = (name: string, spec: FieldSpec, context: RowGeneratorContext) => {
    const value = values.value(name, spec, context);
    return Object.hasOwn(derived, name) ? derived[name]!(context.id) : value;
  };
  const editable = editableFields(resource);
  // Cloning a template with every key gives each row its final shape at once (no reshaping).
  const template: Record<string, unknown> = { id: 0 };
  for (const [name] of entries) template[name] = null;
  return {
    generateRow: (context) => {
      // `id` first: the dataset then keeps this object as the row, in the server's key order.
      const row: Record<string, unknown> = { ...template };
      row.id = context.id;
      for (const [name, spec] of entries) row[name] = valueOf(name, spec, context);
      return row;
    },
    editRow: (_row, context) => {
      const changes: Record<string, unknown> = {};
      if (editable.length === 0) return changes;
      const count = Math.min(editable.length, values.random.int(1, 2));
      for (let index = 0; index < count; index += 1) {
        const name = values.random.pick(editable);
        changes[name] = valueOf(name, resource.fields[name] as FieldSpec, context);
      }
      return changes;
    },
  };
}

export interface DatasetFromFixtureOptions extends ValueOptions {
  seed?: number;
  /** Rows generated for every resource (default 20). */
  rowsPerResource?: number;
  /** Row counts for particular resources, overriding rowsPerResource. */
  rowCounts?: Record<string, number>;
  /** First ids per resource, e.g. `2n ** 60n` to exercise 64-bit ids. */
  firstIds?: Record<string, RowId>;
  /** Rows of one insert sharing a timestamp (default 2: ties happen in real data). */
  rowsPerTick?: number;
  startTime?: string;
}

/** A dataset holding generated rows for every resource of the fixture, in dependency order. */
export function datasetFromFixture(
  fixture: FixtureResource[],
  options: DatasetFromFixtureOptions = {},
): FakeDataset {
  const seed = options.seed ?? 42;
  const dataset = new FakeDataset({
    seed,
    rowsPerTick: options.rowsPerTick ?? 2,
    startTime: options.startTime,
  });
  dataset.fixture = fixture;
  for (const resource of fixture) {
    const generator = rowGeneratorFor(resource, seed, options);
    dataset.defineResource({
      resource: resource.resource,
      cursor: resource.cursor,
      tracksUpdatedAt: 'updated_at' in resource.fields,
      generateRow: generator.generateRow,
      editRow: generator.editRow,
      firstId: options.firstIds?.[resource.resource],
    });
  }
  for (const resource of fixture) {
    const count = options.rowCounts?.[resource.resource] ?? options.rowsPerResource ?? 20;
    if (count > 0) dataset.insert(resource.resource, count);
  }
  return dataset;
}
