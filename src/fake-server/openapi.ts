/**
 * The export surface's documents, both ways: an OpenAPI document and a manifest in the real
 * server's shapes built from a fixture, and a fixture (plus generated rows) built from any OpenAPI
 * document and manifest of that shape, such as the real server's own.
 */
import { createHash } from 'node:crypto';
import type { CursorKind } from '../interfaces.js';
import { SEALED_FIELD_MARKER } from '../sealing/detect.js';
import type { FakeDataset } from './dataset.js';
import {
  datasetFromFixture,
  textStyleFor,
  type DatasetFromFixtureOptions,
} from './field-values.js';
import type { FieldSpec, FixtureResource } from './fixture-schema.js';

export interface FakeManifestEntry {
  model: string;
  resource: string;
  cursor: CursorKind;
  secret: boolean;
  /** The next server version's class of the model under a chatbot choice. */
  scope?: 'owned' | 'referenced' | 'excluded';
}

export interface FakeManifestDocument {
  schema_checksum: string;
  entries: FakeManifestEntry[];
}

type JsonObject = Record<string, unknown>;

const sealedDescription = "Sealed under the team's public key (base64, RSA-OAEP).";

/** JSON with object keys sorted, so a checksum does not depend on key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as JsonObject)
      .filter(([, item]) => item !== undefined)
      .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The manifest's `schema_checksum`: SHA-256 hex of the OpenAPI document's canonical JSON. */
export function schemaChecksum(openApi: unknown): string {
  return createHash('sha256').update(canonicalJson(openApi)).digest('hex');
}

function pascalCase(text: string): string {
  return text
    .split(/[_\W]+/)
    .filter(Boolean)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

function singular(resource: string): string {
  if (resource.endsWith('ies')) return resource.slice(0, -3) + 'y';
  if (resource.endsWith('sses')) return resource.slice(0, -2);
  if (resource.endsWith('s') && !resource.endsWith('ss')) return resource.slice(0, -1);
  return resource;
}

function schemaNameOf(resource: FixtureResource): string {
  return pascalCase(singular(resource.resource));
}

function propertyFor(
  name: string,
  spec: FieldSpec,
  enumName: string,
  schemas: Record<string, unknown>,
): JsonObject {
  const nullable = spec.nullable ? { nullable: true } : {};
  const readOnly = name === 'created_at' || name === 'updated_at' ? { readOnly: true } : {};
  switch (spec.kind) {
    case 'integer':
      return { type: 'integer', ...nullable };
    case 'number':
      return { type: 'number', format: 'double', ...nullable };
    case 'boolean':
      return { type: 'boolean', ...nullable };
    case 'string': {
      const format =
        spec.text === 'email' ? { format: 'email' } : spec.text === 'url' ? { format: 'uri' } : {};
      return { type: 'string', ...format, ...nullable };
    }
    case 'datetime':
      return { type: 'string', format: 'date-time', ...readOnly, ...nullable };
    case 'date':
      return { type: 'string', format: 'date', ...nullable };
    case 'uuid':
      return { type: 'string', format: 'uuid', ...nullable };
    case 'decimal': {
      const digits = spec.decimalDigits ?? 6;
      const places = spec.decimalPlaces ?? 4;
      return {
        type: 'string',
        format: 'decimal',
        pattern: `^-?\\d{0,${digits}}(?:\\.\\d{0,${places}})?$`,
        ...nullable,
      };
    }
    case 'enum': {
      const values = [...(spec.values ?? [])];
      const blank = values.includes('');
      const named = values.filter((value) => value !== '');
      schemas[enumName] = {
        enum: named,
        type: typeof named[0] === 'number' ? 'integer' : 'string',
        description: named.map((value) => `* \`${value}\` - ${value}`).join('\n'),
      };
      const ref = { $ref: `#/components/schemas/${enumName}` };
      const variants: JsonObject[] = [ref];
      if (blank) {
        variants.push({ $ref: '#/components/schemas/BlankEnum' });
        schemas.BlankEnum = { enum: [''] };
      }
      if (spec.nullable) {
        variants.push({ $ref: '#/components/schemas/NullEnum' });
        schemas.NullEnum = { enum: [null] };
      }
      return variants.length === 1 ? ref : { ...nullable, oneOf: variants };
    }
    case 'json':
      return { ...nullable };
    case 'float_array':
      return { type: 'array', items: { type: 'number', format: 'double' }, ...nullable };
    case 'integer_array':
      return { type: 'array', items: { type: 'integer' }, ...nullable };
    case 'string_array':
      return { type: 'array', items: { type: 'string' }, ...nullable };
  }
}

const pagingParameters = [
  {
    in: 'query',
    name: 'cursor',
    schema: { type: 'string' },
    description: 'Keyset pagination cursor returned as `cursor` by the previous page.',
  },
  {
    in: 'query',
    name: 'limit',
    schema: { type: 'integer' },
    description: 'Maximum rows per page (default 100, capped at 1000).',
  },
];
const selectionParameter = {
  in: 'query',
  name: 'selection',
  schema: { type: 'string' },
  description:
    "The team's chatbot choice the client walks under (`all`, or its 32-hex key); a 409 answers one that changed.",
};
const keySecurity = [{ apiKeyAuth: [] }, { tokenAuth: [] }];

function jsonResponse(schemaName: string): JsonObject {
  return {
    '200': {
      content: { 'application/json': { schema: { $ref: `#/components/schemas/${schemaName}` } } },
      description: '',
    },
  };
}

/**
 * An OpenAPI 3 document of the fixture in the same shape as the real export schema; with
 * `chatbotChoice`, as the next server version documents it (manifest `scope`, `team/`'s
 * `exportable_chatbots` and `require_mfa`, the `selection` parameter).
 */
export function openApiFromFixture(
  fixture: FixtureResource[],
  options: { chatbotChoice?: boolean } = {},
): JsonObject {
  const parameters = options.chatbotChoice
    ? [...pagingParameters, selectionParameter]
    : pagingParameters;
  const schemas: Record<string, unknown> = {};
  const paths: Record<string, unknown> = {};
  const usedNames = new Set<string>();
  for (const resource of fixture) {
    let name = schemaNameOf(resource);
    while (usedNames.has(name)) name += 'X';
    usedNames.add(name);
    const properties: JsonObject = { id: { type: 'integer', readOnly: true } };
    const required = ['id'];
    for (const [field, spec] of Object.entries(resource.fields)) {
      if (resource.sealedFields.includes(field)) {
        properties[field] = { type: 'string', description: sealedDescription };
      } else {
        properties[field] = propertyFor(field, spec, `${name}${pascalCase(field)}Enum`, schemas);
      }
      if (!spec.nullable) required.push(field);
    }
    schemas[`${name}Detail`] = { type: 'object', properties, required: required.sort() };
    schemas[`${name}List`] = {
      type: 'object',
      properties: {
        cursor: {
          type: 'string',
          nullable: true,
          description: 'Cursor for the next page; null once the resource is exhausted.',
        },
        has_more: { type: 'boolean', description: 'True while more rows remain beyond this page.' },
        results: { type: 'array', items: { $ref: `#/components/schemas/${name}Detail` } },
      },
      required: ['cursor', 'has_more', 'results'],
    };
    paths[`/api/export/${resource.resource}/`] = {
      get: {
        operationId: resource.resource,
        summary: pascalCase(resource.resource).replace(/([a-z])([A-Z])/g, '$1 $2'),
        parameters,
        tags: ['Team'],
        security: keySecurity,
        responses: jsonResponse(`${name}List`),
      },
    };
  }
  paths['/api/export/manifest/'] = {
    get: {
      operationId: 'manifest',
      description:
        'Returns the resource manifest: resource call order, per-model config, and a schema checksum.',
      summary: 'Manifest',
      tags: ['Manifest'],
      security: [{}],
      responses: jsonResponse('Manifest'),
    },
  };
  paths['/api/export/team/'] = {
    get: {
      operationId: 'team',
      description: 'Returns the team resolved from the API key, as a single object.',
      summary: 'Team',
      tags: ['Team'],
      security: keySecurity,
      responses: jsonResponse('TeamExport'),
    },
  };
  schemas.Manifest = {
    type: 'object',
    properties: {
      schema_checksum: { type: 'string' },
      entries: { type: 'array', items: { $ref: '#/components/schemas/ManifestEntry' } },
    },
    required: ['entries', 'schema_checksum'],
  };
  schemas.ManifestEntry = {
    type: 'object',
    properties: {
      model: { type: 'string' },
      resource: { type: 'string' },
      cursor: { type: 'string' },
      secret: { type: 'boolean' },
      ...(options.chatbotChoice ? { scope: { type: 'string' } } : {}),
    },
    required: [
      'cursor',
      'model',
      'resource',
      'secret',
      ...(options.chatbotChoice ? ['scope'] : []),
    ],
  };
  schemas.TeamExport = {
    type: 'object',
    properties: {
      id: { type: 'integer', readOnly: true },
      feature_flags: { type: 'array', items: { type: 'string' }, readOnly: true },
      has_public_key: { type: 'boolean', readOnly: true },
      created_at: { type: 'string', format: 'date-time', readOnly: true },
      updated_at: { type: 'string', format: 'date-time', readOnly: true },
      name: { type: 'string', maxLength: 100 },
      slug: { type: 'string', maxLength: 50, pattern: '^[-a-zA-Z0-9_]+$' },
      metadata: {},
      files_export_task_id: { type: 'string', maxLength: 255 },
      is_migrating: { type: 'boolean' },
      created_by: { type: 'integer', readOnly: true, nullable: true },
      files_export: { type: 'integer', nullable: true },
      ...(options.chatbotChoice
        ? {
            exportable_chatbots: {
              type: 'array',
              items: { $ref: '#/components/schemas/ExportableChatbot' },
              readOnly: true,
            },
            require_mfa: { type: 'boolean' },
          }
        : {}),
    },
    required: [
      'created_at',
      'created_by',
      'feature_flags',
      'has_public_key',
      'id',
      'name',
      'slug',
      'updated_at',
    ],
  };
  if (options.chatbotChoice) {
    schemas.ExportableChatbot = {
      type: 'object',
      properties: { public_id: { type: 'string' }, name: { type: 'string' } },
      required: ['name', 'public_id'],
    };
  }
  schemas.SyncErrorDetail = {
    type: 'object',
    properties: { detail: { type: 'string' } },
    required: ['detail'],
  };
  const sortedSchemas = Object.fromEntries(
    Object.entries(schemas).sort(([left], [right]) => (left < right ? -1 : 1)),
  );
  const sortedPaths = Object.fromEntries(
    Object.entries(paths).sort(([left], [right]) => (left < right ? -1 : 1)),
  );
  return {
    openapi: '3.0.3',
    info: {
      title: 'Open Chat Studio (fake export server)',
      version: 'export',
      description: 'Read-only, team-scoped endpoints for the Open Chat Studio data export.',
    },
    paths: sortedPaths,
    components: {
      schemas: sortedSchemas,
      securitySchemes: {
        apiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-api-key' },
        tokenAuth: { type: 'http', scheme: 'bearer' },
      },
    },
  };
}

/** The manifest in the real server's shape; the checksum covers `openApi` (default: the fixture's). */
export function manifestFromFixture(
  fixture: FixtureResource[],
  openApi: unknown = openApiFromFixture(fixture),
): FakeManifestDocument {
  return {
    schema_checksum: schemaChecksum(openApi),
    entries: fixture.map((resource) => ({
      model: resource.model,
      resource: resource.resource,
      cursor: resource.cursor,
      secret: resource.sealedFields.length > 0,
    })),
  };
}

function isMarkedSealed(property: JsonObject): boolean {
  return (
    typeof property.description === 'string' && property.description.includes(SEALED_FIELD_MARKER)
  );
}

function asObject(value: unknown): JsonObject | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as JsonObject)
    : undefined;
}

class SchemaReader {
  constructor(private readonly document: JsonObject) {}

  resolve(schema: unknown, depth = 0): JsonObject {
    const object = asObject(schema) ?? {};
    const ref = object.$ref;
    if (typeof ref !== 'string' || depth > 20) return object;
    const path = ref.replace(/^#\//, '').split('/');
    let target: unknown = this.document;
    for (const part of path) target = asObject(target)?.[part];
    const { $ref: _ignored, ...rest } = object;
    return { ...this.resolve(target, depth + 1), ...rest };
  }

  /** The row schema of a resource's list response, or undefined when the document lacks it. */
  rowSchema(resource: string): JsonObject | undefined {
    const path = asObject(asObject(this.document.paths)?.[`/api/export/${resource}/`]);
    const responses = asObject(asObject(path?.get)?.responses);
    const ok = asObject(responses?.['200']);
    const media = asObject(asObject(ok?.content)?.['application/json']);
    if (!media) return undefined;
    const list = this.resolve(media.schema);
    if (list.type === 'array') return this.resolve(list.items);
    const results = asObject(asObject(list.properties)?.results);
    return results ? this.resolve(results.items) : list;
  }
}

function decimalShape(pattern: unknown): { digits: number; places: number } {
  const match =
    typeof pattern === 'string' ? /\\d\{0,(\d+)\}\(\?:\\\.\\d\{0,(\d+)\}\)/.exec(pattern) : null;
  return match ? { digits: Number(match[1]), places: Number(match[2]) } : { digits: 6, places: 2 };
}

function fieldSpecFrom(
  name: string,
  property: unknown,
  reader: SchemaReader,
  referenceFor: (field: string) => string | undefined,
): FieldSpec {
  let schema = reader.resolve(property);
  let nullable = schema.nullable === true;
  const allOf = Array.isArray(schema.allOf) ? schema.allOf : undefined;
  if (allOf && allOf.length > 0) {
    const { allOf: _ignored, ...rest } = schema;
    schema = {
      ...allOf.reduce<JsonObject>((merged, part) => ({ ...merged, ...reader.resolve(part) }), {}),
      ...rest,
    };
  }
  const variants = Array.isArray(schema.oneOf)
    ? schema.oneOf
    : Array.isArray(schema.anyOf)
      ? schema.anyOf
      : undefined;
  if (variants) {
    const values: Array<string | number> = [];
    let other: JsonObject | undefined;
    for (const variant of variants) {
      const resolved = reader.resolve(variant);
      if (Array.isArray(resolved.enum)) {
        for (const value of resolved.enum) {
          if (value === null) nullable = true;
          else if (typeof value === 'string' || typeof value === 'number') values.push(value);
        }
      } else if (resolved.type === 'null') {
        nullable = true;
      } else {
        other = resolved;
      }
    }
    if (values.length > 0 && !other) return { kind: 'enum', values, nullable };
    schema = other ?? {};
  }
  nullable = nullable || schema.nullable === true;
  if (Array.isArray(schema.enum)) {
    const values = schema.enum.filter(
      (value): value is string | number => typeof value === 'string' || typeof value === 'number',
    );
    return { kind: 'enum', values, nullable: nullable || schema.enum.includes(null) };
  }
  switch (schema.type) {
    case 'integer': {
      const references = referenceFor(name);
      return references ? { kind: 'integer', references, nullable } : { kind: 'integer', nullable };
    }
    case 'number':
      return { kind: 'number', nullable };
    case 'boolean':
      return { kind: 'boolean', nullable };
    case 'string':
      switch (schema.format) {
        case 'date-time':
          return { kind: 'datetime', nullable };
        case 'date':
          return { kind: 'date', nullable };
        case 'uuid':
          return { kind: 'uuid', nullable };
        case 'decimal': {
          const shape = decimalShape(schema.pattern);
          return {
            kind: 'decimal',
            decimalDigits: shape.digits,
            decimalPlaces: shape.places,
            nullable,
          };
        }
        case 'email':
          return { kind: 'string', text: 'email', nullable };
        case 'uri':
          return { kind: 'string', text: 'url', nullable };
        default:
          return { kind: 'string', text: textStyleFor(name), nullable };
      }
    case 'array': {
      const items = reader.resolve(schema.items);
      if (items.type === 'number') return { kind: 'float_array', dimensions: 16, nullable };
      if (items.type === 'integer') return { kind: 'integer_array', nullable };
      if (items.type === 'string') return { kind: 'string_array', nullable };
      return { kind: 'json', json: 'list', nullable };
    }
    case 'object':
      return { kind: 'json', json: 'object', nullable };
    default:
      return { kind: 'json', json: 'any', nullable };
  }
}

function parseManifest(manifest: unknown): FakeManifestEntry[] {
  const object = asObject(manifest);
  if (!object || !Array.isArray(object.entries)) {
    throw new Error('The manifest document has no `entries` list.');
  }
  const entries = object.entries.map((entry, index) => {
    const item = asObject(entry);
    if (
      !item ||
      typeof item.model !== 'string' ||
      typeof item.resource !== 'string' ||
      (item.cursor !== 'pk' && item.cursor !== 'updated_at_id')
    ) {
      throw new Error(`Manifest entry ${index} is not {model, resource, cursor, secret}.`);
    }
    return {
      model: item.model,
      resource: item.resource,
      cursor: item.cursor,
      secret: item.secret === true,
    } satisfies FakeManifestEntry;
  });
  return entries;
}

/**
 * A fixture from any OpenAPI document and manifest of the real server's shape: resources in the
 * manifest's order, field kinds from each row schema, references guessed from field names that
 * name an earlier resource (`chat` -> `chats`, `experiment` -> model `experiments.experiment`).
 */
export function fixtureFromOpenApi(openApi: unknown, manifest: unknown): FixtureResource[] {
  const document = asObject(openApi);
  if (!document || !asObject(document.paths)) {
    throw new Error('The OpenAPI document has no `paths`.');
  }
  const reader = new SchemaReader(document);
  const entries = parseManifest(manifest);
  const earlier = new Map<string, string>();
  const fixture: FixtureResource[] = [];
  for (const entry of entries) {
    const referenceFor = (field: string): string | undefined => {
      const base = field.replace(/_id$/, '');
      const found = earlier.get(field) ?? earlier.get(base);
      if (found) return found;
      if (/(_by|^owner|^user|^assignee|^reviewer)$/.test(field) || /_by$/.test(field)) {
        return earlier.get('user');
      }
      return undefined;
    };
    const properties = asObject(reader.rowSchema(entry.resource)?.properties) ?? {};
    // As the real server publishes them: the marker in the field's description.
    const marked = Object.entries(properties)
      .filter(([, property]) => isMarkedSealed(reader.resolve(property)))
      .map(([field]) => field);
    const sealedFields = marked.length > 0 || !entry.secret ? marked : ['config'];
    const fields: Record<string, FieldSpec> = {};
    for (const [field, property] of Object.entries(properties)) {
      if (field === 'id') continue;
      if (sealedFields.includes(field)) {
        fields[field] =
          field === 'config'
            ? { kind: 'json', json: 'config' }
            : field.endsWith('key')
              ? { kind: 'string', text: 'code' }
              : { kind: 'json', json: 'object' };
        continue;
      }
      fields[field] = fieldSpecFrom(field, property, reader, referenceFor);
    }
    if (entry.cursor === 'updated_at_id' && !fields.updated_at) {
      fields.updated_at = { kind: 'datetime' };
    }
    fixture.push({
      resource: entry.resource,
      model: entry.model,
      cursor: entry.cursor,
      sealedFields: sealedFields.filter((field) => field in fields),
      fields,
    });
    const modelName = entry.model.split('.').pop() ?? entry.model;
    for (const key of [entry.resource, singular(entry.resource), modelName]) {
      if (!earlier.has(key)) earlier.set(key, entry.resource);
    }
  }
  return fixture;
}

/**
 * Generated rows for every resource of an OpenAPI document and manifest (e.g. the real files).
 * The fixture derived from them is `dataset.fixture`.
 */
export function datasetFromOpenApi(
  openApi: unknown,
  manifest: unknown,
  options: DatasetFromFixtureOptions = {},
): FakeDataset {
  return datasetFromFixture(fixtureFromOpenApi(openApi, manifest), options);
}
