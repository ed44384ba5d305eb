/**
 * Module hooks (see typescript-hooks.mjs): `.ts` files are stripped of their types by esbuild,
 * and a relative `./x.js` that does not exist resolves to `./x.ts`, as in the sources' imports.
 * Stripped files are cached by content (node_modules/.cache), so a thread started by a test
 * does not start esbuild again.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { threadId } from 'node:worker_threads';
import { URL, fileURLToPath } from 'node:url';

const cacheDirectory = fileURLToPath(
  new URL('../node_modules/.cache/ocs-sync-ts/', import.meta.url),
);

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    const relative = specifier.startsWith('.') || specifier.startsWith('file:');
    if (error?.code !== 'ERR_MODULE_NOT_FOUND' || !relative || !specifier.endsWith('.js')) {
      throw error;
    }
    return nextResolve(`${specifier.slice(0, -3)}.ts`, context);
  }
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context);
  const path = fileURLToPath(url);
  const source = await readFile(path, 'utf8');
  const cached = `${cacheDirectory}${createHash('sha256').update(path).update(source).digest('hex')}.js`;
  const code = await readFile(cached, 'utf8').catch(async () => {
    const { transform } = await import('esbuild');
    const stripped = await transform(source, {
      loader: 'ts',
      format: 'esm',
      target: 'node20',
      sourcefile: path,
      sourcemap: 'inline',
    });
    // Threads of one process share its pid: two starting at once must not share a partial file.
    const partial = `${cached}.${process.pid}.${threadId}.partial`;
    try {
      await mkdir(cacheDirectory, { recursive: true });
      await writeFile(partial, stripped.code);
      await rename(partial, cached);
    } catch {
      // Only a cache: a process that may not write it (another user, a read-only root) goes on.
    }
    return stripped.code;
  });
  return { format: 'module', source: code, shortCircuit: true };
}
