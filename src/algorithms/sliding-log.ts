/**
 * The sliding log: the exact time of every admitted hit (docs/semantics.md §4). This module is
 * the definition; the Redis store's Lua follows it step by step.
 *
 * A hit admitted at `t` (integer epoch ms) is counted while `now < t + W`, and no longer. Hits of
 * one millisecond share one entry. So the log never admits more than `limit` hits in any interval
 * of length W, and never fewer: it is exact, at the cost of one entry per distinct millisecond
 * (at most `limit` entries, which is why validation bounds `requests_per_unit`, see
 * SLIDING_LOG_MAX_LIMIT).
 *
 * State ({@link CounterState}): `ring` holds `(t, hits)` pairs oldest first, `total` their sum,
 * `emptyAtMs` the newest `t + W`. `stampMs` is unused.
 *
 * - room: `total + hits <= limit` (after dropping entries with `t + W <= now`);
 * - remaining: `limit - total` (0 when over);
 * - over-limit reset: walking entries oldest first, the first `t + W` at which the hits they
 *   free cover `total + hits - limit`, minus now; one window W when `hits > limit`;
 * - OK reset: the oldest entry's `t + W` minus now; 0 when the log is empty.
 * A reset is therefore exact to the millisecond and never above W.
 */
import { dropPairsBelow, newestSlot, pairFreeing, pushPair } from './ring.js';
import type { AlgorithmResult, CounterAlgorithm, CounterState, LimitParams } from './types.js';

/** Drop the entries whose hits are W old or more at `nowMs`. */
export function refresh(state: CounterState, nowMs: number, params: LimitParams): void {
  if (state.length === 0) return;
  // Entries with t + W <= now are gone: keep t >= now - W + 1.
  if (dropPairsBelow(state, Math.floor(nowMs) - params.windowMs + 1) === 0) state.emptyAtMs = 0;
}

/** `total + hits <= limit`. */
export function hasRoom(
  state: CounterState,
  _nowMs: number,
  hits: number,
  params: LimitParams,
): boolean {
  return state.total + hits <= params.limit;
}

/**
 * Log `hits` at `nowMs`. If the clock went back behind the newest entry, the hits join that
 * entry, so they are never counted for less than W.
 */
export function charge(
  state: CounterState,
  nowMs: number,
  hits: number,
  params: LimitParams,
): void {
  if (!(hits > 0)) return;
  const now = Math.floor(nowMs);
  if (state.length > 0) {
    const at = newestSlot(state) << 1;
    if (state.ring[at]! >= now) {
      state.ring[at + 1]! += hits;
      state.total += hits;
      return;
    }
  }
  pushPair(state, now, hits, 1);
  state.total += hits;
  state.emptyAtMs = now + params.windowMs;
}

/** The decision: remaining `limit - total`; resets from the logged times. */
export function result(
  state: CounterState,
  nowMs: number,
  hits: number,
  params: LimitParams,
  overLimit: boolean,
  out: AlgorithmResult,
): AlgorithmResult {
  const { limit, windowMs } = params;
  const now = Math.floor(nowMs);
  const ring = state.ring;
  out.overLimit = overLimit;
  if (overLimit) {
    out.remaining = 0;
    out.resetMs = hits > limit ? windowMs : waitForRoomMs(state, now, hits, limit, windowMs);
    return out;
  }
  const remaining = limit - state.total;
  out.remaining = remaining > 0 ? remaining : 0;
  out.resetMs = state.length === 0 ? 0 : ring[state.head << 1]! + windowMs - now;
  return out;
}

/** The exact wait until `hits` fit with no other traffic (`hits <= limit`). */
function waitForRoomMs(
  state: CounterState,
  now: number,
  hits: number,
  limit: number,
  windowMs: number,
): number {
  const excess = state.total + hits - limit;
  if (excess <= 0) return 0;
  const at = pairFreeing(state, excess);
  // -1 is unreachable: with hits <= limit, freeing every entry always frees enough.
  return at < 0 ? windowMs : at + windowMs - now;
}

/** `sliding_log` as the common {@link CounterAlgorithm} steps. */
export const slidingLog: CounterAlgorithm = {
  refresh,
  hasRoom,
  charge,
  result,
  // One timestamp `t` left: the newest, so `emptyAtMs` is t + W. `stampMs` is never set.
  impliedFirst(state, params) {
    return state.length === 1 ? state.emptyAtMs - params.windowMs : 0;
  },
};
