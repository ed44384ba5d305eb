/**
 * What a setting is (its dotted path, environment variable, and what it accepts) and the pieces
 * every section's schema is built from. Each section file (server.ts, warehouse.ts, …) holds its
 * keys' schema, defaults and environment variables together; schema.ts puts them in one.
 */
import { z } from 'zod';
import type { z as ZodTypes } from 'zod';

// Part of the CLI's bundle (scripts/bundle.mjs): one file, not zod's many (issue 47).
export { z };

/** How text (an environment variable, a CLI value) becomes a value of a setting. */
export type TextKind = 'text' | 'integer' | 'boolean' | 'list' | 'history' | 'field_map';

export interface SettingInfo {
  /** Dotted snake_case path as in the file, e.g. `http.max_attempts`. */
  path: string;
  /** The environment variable that sets it, if any. */
  env?: string;
  /** Set only from the environment, never from a file or a flag. */
  envOnly?: boolean;
  kind: TextKind;
  /** What is allowed, phrased to follow "must be". */
  allowed: string;
  /** Never echoed in a message. */
  secret?: boolean;
  /** A URL that may hold a password: shown without it. */
  url?: boolean;
}

/** The validated values of a section's keys (snake_case, defaults filled in). */
export type SectionValues<Shape extends ZodTypes.ZodRawShape> = ZodTypes.output<
  ZodTypes.ZodObject<Shape>
>;

/** A leaf with its own specific problem text; the issue is `custom` so the text is kept. */
export function checked<T>(
  isType: (value: unknown) => value is T,
  check: (value: T) => string | undefined,
) {
  return z.custom<T>().superRefine((value, context) => {
    if (!isType(value)) {
      // No message: the setting's `allowed` text describes it.
      context.addIssue({ code: 'custom', message: '', params: { wrongType: true } });
      return;
    }
    const problem = check(value);
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
  });
}

export const isString = (value: unknown): value is string => typeof value === 'string';
export const isStringOrFalse = (value: unknown): value is string | false =>
  typeof value === 'string' || value === false;

export const integer = (min: number, max: number) => z.number().int().min(min).max(max);

export const nonEmptyText = checked(isString, (value) =>
  value.trim() === '' ? 'must not be empty' : undefined,
);

/** Merged values before validation: plain objects (without a prototype) down to the values. */
export type Tree = Record<string, unknown>;

export function isPlainObject(value: unknown): value is Tree {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function getAt(tree: unknown, segments: readonly (string | number)[]): unknown {
  let node = tree;
  for (const segment of segments) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string | number, unknown>)[segment];
  }
  return node;
}

/** `maxAttempts` -> `max_attempts`: flags come camelCase, the file's keys are snake_case. */
export function camelToSnake(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}
