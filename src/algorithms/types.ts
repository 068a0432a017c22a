/**
 * What every counting algorithm shares: its name and the shape of a decision. The algorithm
 * modules next to this file are the normative definitions (docs/semantics.md §4); the Redis store's
 * Lua scripts port them line by line.
 */

/** Counting algorithms (`rate_limit.algorithm`); see docs/algorithms.md for when to pick which. */
export type Algorithm = 'sliding_window' | 'fixed_window' | 'token_bucket' | 'sliding_log';

/** Every algorithm, in documentation order. */
export const ALGORITHMS: readonly Algorithm[] = [
  'sliding_window',
  'fixed_window',
  'token_bucket',
  'sliding_log',
];

/**
 * Most `requests_per_unit` a `sliding_log` rule may have: the log keeps one timestamp per admitted
 * hit, so one key holds up to this many numbers (8 bytes each in memory).
 */
export const SLIDING_LOG_MAX_LIMIT = 10_000;

/** The decision for one counter, written by an algorithm's `result` function. */
export interface AlgorithmResult {
  /** The counter lacked room for the hits. */
  overLimit: boolean;
  /** Room left after the request (whole hits, at least 0); 0 when over limit. */
  remaining: number;
  /**
   * Milliseconds. When over limit: the exact wait after which the same hits would be admitted
   * with no other traffic (a full window when they never can be). When OK: the time until
   * `remaining` next grows; 0 when nothing is counted.
   */
  resetMs: number;
}
