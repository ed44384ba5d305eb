import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../warehouse/migrations.js';

let cached: string | undefined;

export function packageVersion(): string {
  cached ??= (
    JSON.parse(readFileSync(join(projectRoot(), 'package.json'), 'utf8')) as { version: string }
  ).version;
  return cached;
}
