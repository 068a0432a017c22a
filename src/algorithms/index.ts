/**
 * Every counting algorithm by name. Each module is the definition of its algorithm
 * (docs/semantics.md §4, docs/algorithms.md); stores look them up here.
 */
import { fixedWindow } from './fixed-window.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindow } from './sliding-window.js';
import { tokenBucket } from './token-bucket.js';
import type { Algorithm, CounterAlgorithm } from './types.js';

export * from './types.js';

/** The steps of each algorithm. */
export const ALGORITHM_STEPS: Readonly<Record<Algorithm, CounterAlgorithm>> = Object.freeze({
  sliding_window: slidingWindow,
  fixed_window: fixedWindow,
  token_bucket: tokenBucket,
  sliding_log: slidingLog,
});
