#!/usr/bin/env node
// Thin launcher: the bundled CLI lives in dist/bundle (built by `npm run build`, which `npm ci`
// runs; scripts/bundle.mjs). Node 22 keeps the compiled code of what it loads in a cache
// (NODE_COMPILE_CACHE, set in the image): a run then parses almost nothing again.
import module from 'node:module';

module.enableCompileCache?.();
const { main } = await import('../dist/bundle/main.js');

process.exitCode = await main(process.argv.slice(2));
