/**
 * The limit every variant of the middleware benchmark sets per client address (per minute): far
 * above anything a run sends, so every request takes the admitted path.
 */
export const BENCH_LIMIT_PER_MINUTE = 1_000_000_000;
