/**
 * `exclude_fields`: fields never stored, per resource. In a file, a mapping of resource name to a
 * list of field names; in OCS_EXCLUDE_FIELDS, comma-separated `resource.field` items. Pure.
 */
import { isSafeFieldName, isSafeResourceName, recordByName } from '../names.js';

export type ExcludeFields = Record<string, string[]>;

export const EXCLUDE_FIELDS_ALLOWED =
  'a mapping of resource name to a list of its field names, e.g. {chat_messages: [content]} ' +
  '(in OCS_EXCLUDE_FIELDS: comma-separated resource.field, e.g. chat_messages.content,participants.identifier)';

/**
 * `chat_messages.content,participants.identifier` as a mapping. An item that is not
 * `resource.field` is kept under its own text with no field, so validation names it.
 */
export function parseExcludeFieldsText(text: string): ExcludeFields | string {
  const mapping: ExcludeFields = recordByName();
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  for (const item of items) {
    const dot = item.indexOf('.');
    if (dot <= 0 || dot === item.length - 1 || item.indexOf('.', dot + 1) !== -1) return text;
    const resource = item.slice(0, dot);
    (mapping[resource] ??= []).push(item.slice(dot + 1));
  }
  return mapping;
}

export function isExcludeFieldsShape(value: unknown): value is ExcludeFields {
  return (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).every(
      (fields) => Array.isArray(fields) && fields.every((field) => typeof field === 'string'),
    )
  );
}

/** Every problem of the mapping, in one text (undefined when there is none). */
export function checkExcludeFields(value: ExcludeFields): string | undefined {
  const problems: string[] = [];
  for (const [resource, fields] of Object.entries(value)) {
    if (!isSafeResourceName(resource)) {
      problems.push(
        `${JSON.stringify(resource.slice(0, 80))} is not a resource name (lowercase letters, digits and _, starting with a letter)`,
      );
    }
    for (const field of fields) {
      if (field === 'id') {
        problems.push(`${resource}.id cannot be excluded: every row is stored by its id`);
      } else if (!isSafeFieldName(field)) {
        problems.push(
          `${JSON.stringify(field.slice(0, 80))} (of ${resource.slice(0, 80)}) is not a field name (lowercase letters, digits and _)`,
        );
      }
    }
  }
  return problems.length > 0 ? `has problems: ${problems.join('; ')}` : undefined;
}

/**
 * The mapping with each resource's fields listed once, resources without fields left out; a
 * record without a prototype, so a resource named `constructor` finds only its own entry.
 */
export function normaliseExcludeFields(value: ExcludeFields): ExcludeFields {
  return recordByName(
    Object.entries(value)
      .filter(([, fields]) => fields.length > 0)
      .map(([resource, fields]) => [resource, [...new Set(fields)]] as const),
  );
}
