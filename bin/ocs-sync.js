#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (built by `npm run build`, which `npm ci` runs).
import { main } from '../dist/src/cli/main.js';

process.exitCode = await main(process.argv.slice(2));
