import { defineConfig } from 'vitest/config';
import { LONG_SUITES, shared } from './vitest.config.js';

/** `npm run test:long`: the long suites `npm test` leaves out (see vitest.config.ts). */
export default defineConfig({ test: { ...shared, include: [LONG_SUITES] } });
