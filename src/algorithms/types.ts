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

/**
 * The mutable state of one counter. Every algorithm uses this one shape (each module's header says
 * what each field means for it), so a store keeps a single object class for all its counters. The
 * fields are read-only for everyone but the algorithm modules.
 */
export interface CounterState {
  /** Hits counted (sliding window, fixed window, sliding log); token bucket: TAT's sub-ms part. */
  total: number;
  /** Ring slot of the oldest stored pair (sliding window, sliding log). */
  head: number;
  /** Number of stored pairs (sliding window, sliding log). */
  length: number;
  /**
   * Epoch ms from which the state counts nothing and may be dropped; 0 when nothing was ever
   * charged. Every algorithm keeps it, so a store can reclaim idle counters without knowing which.
   */
  emptyAtMs: number;
  /** Fixed window: start of the counted window; token bucket: TAT in whole ms. */
  stampMs: number;
  /** Flat ring of pairs `(a, b)` at `[2s, 2s + 1]` (sliding window, sliding log). */
  ring: number[];
}

/** A fresh, empty state. */
export function createCounterState(): CounterState {
  return { total: 0, head: 0, length: 0, emptyAtMs: 0, stampMs: 0, ring: [0, 0] };
}

/** A deep copy of `state`, independent of it (for tests, models and what-if checks). */
export function cloneCounterState(state: CounterState): CounterState {
  return {
    total: state.total,
    head: state.head,
    length: state.length,
    emptyAtMs: state.emptyAtMs,
    stampMs: state.stampMs,
    ring: state.ring.slice(),
  };
}

/** The numbers of one limit an algorithm needs; a store's CounterSpec has them. */
export interface LimitParams {
  /** Hits per window (token bucket: tokens refilled per window). */
  readonly limit: number;
  /** Window length in ms (unit x unit_multiplier). */
  readonly windowMs: number;
  /** Token bucket capacity; the other algorithms ignore it. */
  readonly burst: number;
}

/**
 * One algorithm as four steps on a {@link CounterState}, all pure apart from mutating `state`, all
 * on integer epoch milliseconds (a fractional `nowMs` is floored). A store that checks a batch
 * before charging any of it calls, per counter and with the same `nowMs`: `refresh`, then
 * `hasRoom`; then `charge` on admission; then `result` from the state as it is after the batch.
 */
export interface CounterAlgorithm {
  /** Forget what has expired at `nowMs`. Call first. */
  refresh(state: CounterState, nowMs: number, params: LimitParams): void;
  /** Whether `hits` more fit now (after `refresh`). `hits` 0 fits unless the state is over. */
  hasRoom(state: CounterState, nowMs: number, hits: number, params: LimitParams): boolean;
  /** Add `hits` at `nowMs` without checking (the caller decided). `hits` <= 0 changes nothing. */
  charge(state: CounterState, nowMs: number, hits: number, params: LimitParams): void;
  /**
   * Write the decision into `out` and return it. `overLimit` is what `hasRoom` said before the
   * batch was charged; `hits` the hits asked for (cumulative, for a key repeated in a batch).
   */
  result(
    state: CounterState,
    nowMs: number,
    hits: number,
    params: LimitParams,
    overLimit: boolean,
    out: AlgorithmResult,
  ): AlgorithmResult;
  /**
   * For a state with at most one stored pair: the one number besides `total`, `emptyAtMs` and
   * `length` that the other steps leave in it, as those imply it: `stampMs` when `length` is 0,
   * the first number of the stored pair when `length` is 1 (its second is then `total`). A store
   * may keep a quiet counter as just `total`, `emptyAtMs` and `length` and rebuild the rest with
   * this; it must check, when it stores a state, that this gives back the real number.
   */
  impliedFirst(state: CounterState, params: LimitParams): number;
}
