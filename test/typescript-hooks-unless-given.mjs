/**
 * The TypeScript hooks (typescript-hooks.mjs) for a test's stand-in thread that imports src/ from
 * source: a thread started from the suite's bundles (OCS_TEST_THREAD_BUNDLES) is started without
 * them, so the stand-in registers them itself; otherwise its thread already has them.
 */
import { register } from 'node:module';

if (process.env.OCS_TEST_THREAD_BUNDLES) register('./typescript-loader.mjs', import.meta.url);
