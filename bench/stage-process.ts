/**
 * Child process of the benchmark: runs one measured stage (stages.ts) and reports its result,
 * peak RSS included. Run by bench.ts, never by hand.
 */
import { serveParent } from './child-process.js';
import { runStage, type StageRequest } from './stages.js';

serveParent<StageRequest>(runStage);
