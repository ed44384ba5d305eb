/**
 * Where this package is installed, its version, and how its worker threads start: found by walking
 * up from a module to package.json, so it works from src/ (vitest, tsx), from dist/src/ after a
 * build, and in an installed package. Light on purpose: `ocs-sync --version` loads nothing else.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { WarehouseError } from './errors.js';

/** The directory holding package.json. */
export function projectRoot(fromUrl: string = import.meta.url): string {
  let directory = dirname(fileURLToPath(fromUrl));
  for (;;) {
    if (existsSync(join(directory, 'package.json'))) return directory;
    const parent = dirname(directory);
    if (parent === directory) {
      throw new WarehouseError(
        `Cannot find the ocs-sync package directory above ${fileURLToPath(fromUrl)}.`,
      );
    }
    directory = parent;
  }
}

let cachedVersion: string | undefined;

/** This package's version, from its package.json. */
export function packageVersion(): string {
  cachedVersion ??= (
    JSON.parse(readFileSync(join(projectRoot(), 'package.json'), 'utf8')) as { version: string }
  ).version;
  return cachedVersion;
}

/**
 * How to start the worker thread `name` (a module beside `callerUrl`, named without extension).
 * Run from source (the tests run src/ through vitest), the thread is TypeScript: the suite's
 * bundle of it when the suite made one (`OCS_TEST_THREAD_BUNDLES`, test/thread-bundles.ts), else
 * loaded through the suite's hooks; a build runs the compiled file and needs neither.
 */
export function threadModule(callerUrl: string, name: string): { url: URL; execArgv?: string[] } {
  if (!callerUrl.endsWith('.ts')) return { url: new URL(`./${name}.js`, callerUrl) };
  const bundles = process.env.OCS_TEST_THREAD_BUNDLES;
  if (bundles) return { url: pathToFileURL(join(bundles, `${name}.mjs`)) };
  const hooks = join(projectRoot(callerUrl), 'test', 'typescript-hooks.mjs');
  return { url: new URL(`./${name}.ts`, callerUrl), execArgv: ['--import', hooks] };
}
