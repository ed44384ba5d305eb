import type { ColumnSpec, ColumnType } from '../interfaces.js';
import { isSafeFieldName, isSafeResourceName } from '../names.js';
import { SEALED_FIELD_MARKER } from '../sealing/detect.js';

/** Column specs per resource (and `team`), read from the server's export OpenAPI document. */
export interface SchemaColumns {
  tables: Map<string, ColumnSpec[]>;
  /** Fields whose description carries the server's sealed-field marker, per resource. */
  sealed: Map<string, string[]>;
  /** Names that were refused (unsafe), with where they came from. */
  refused: string[];
}

type JsonObject = Record<string, unknown>;

const PATH_PREFIX = '/api/export/';

/**
 * Pure: walk `paths./api/export/{resource}/` → list schema → `results.items` → row schema, and
 * map each property to a logical column type. Unknown shapes become `json` so nothing is lost.
 */
export function columnsFromOpenApi(document: unknown): SchemaColumns {
  const tables = new Map<string, ColumnSpec[]>();
  const sealed = new Map<string, string[]>();
  const refused: string[] = [];
  if (!isObject(document) || !isObject(document.paths)) return { tables, sealed, refused };
  const resolver = new RefResolver(document);

  for (const [path, item] of Object.entries(document.paths)) {
    if (!path.startsWith(PATH_PREFIX) || !isObject(item)) continue;
    const resource = path.slice(PATH_PREFIX.length).replace(/\/$/, '');
    if (resource === 'manifest' || resource === 'schema' || resource.includes('/')) continue;
    const responseSchema = resolver.resolve(
      dig(item, ['get', 'responses', '200', 'content', 'application/json', 'schema']),
    );
    if (!isObject(responseSchema)) continue;
    // Resource pages wrap rows in `results`; `team/` answers the row itself.
    const results = isObject(responseSchema.properties)
      ? resolver.resolve(responseSchema.properties.results)
      : undefined;
    const rowSchema =
      resource === 'team'
        ? responseSchema
        : isObject(results)
          ? resolver.resolve(results.items)
          : undefined;
    if (!isObject(rowSchema) || !isObject(rowSchema.properties)) continue;
    if (!isSafeResourceName(resource)) {
      refused.push(`resource ${JSON.stringify(resource)}`);
      continue;
    }
    const columns: ColumnSpec[] = [];
    const marked: string[] = [];
    for (const [field, property] of Object.entries(rowSchema.properties)) {
      if (field === 'id') continue;
      if (!isSafeFieldName(field)) {
        refused.push(`field ${JSON.stringify(field)} of ${resource}`);
        continue;
      }
      columns.push({ name: field, type: columnTypeOf(property, resolver) });
      if (isMarkedSealed(resolver.resolve(property))) marked.push(field);
    }
    tables.set(resource, columns);
    if (marked.length > 0) sealed.set(resource, marked);
  }
  return { tables, sealed, refused };
}

function isMarkedSealed(property: unknown): boolean {
  return (
    isObject(property) &&
    typeof property.description === 'string' &&
    property.description.includes(SEALED_FIELD_MARKER)
  );
}

function columnTypeOf(property: unknown, resolver: RefResolver): ColumnType {
  const schema = resolver.resolve(property);
  if (!isObject(schema)) return 'json';
  // `allOf: [{$ref: Enum}]` and `oneOf: [Enum, BlankEnum]` are DRF's enum wrappers.
  const variants = (schema.allOf ?? schema.oneOf ?? schema.anyOf) as unknown;
  if (Array.isArray(variants) && schema.type === undefined) {
    const types = new Set(variants.map((variant) => columnTypeOf(variant, resolver)));
    return types.size === 1 ? [...types][0]! : 'json';
  }
  if (Array.isArray(schema.enum) && schema.type === undefined) {
    return schema.enum.every((value) => typeof value === 'string') ? 'text' : 'json';
  }
  switch (schema.type) {
    case 'integer':
      return 'integer';
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'string':
      if (schema.format === 'date-time') return 'datetime';
      if (schema.format === 'date') return 'date';
      return 'text';
    default:
      // arrays, objects, and `{}` (free JSON)
      return 'json';
  }
}

class RefResolver {
  constructor(private readonly document: JsonObject) {}

  resolve(value: unknown, depth = 0): unknown {
    if (!isObject(value) || typeof value.$ref !== 'string' || depth > 16) return value;
    const ref = value.$ref;
    if (!ref.startsWith('#/')) return undefined;
    const target = dig(
      this.document,
      ref
        .slice(2)
        .split('/')
        .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~')),
    );
    return this.resolve(target, depth + 1);
  }
}

function dig(value: unknown, keys: string[]): unknown {
  let current = value;
  for (const key of keys) {
    if (!isObject(current) || !Object.hasOwn(current, key)) return undefined;
    current = current[key];
  }
  return current;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
