/**
 * The fixed window algorithm: envoyproxy/ratelimit's epoch-aligned windows, for exact parity
 * (docs/semantics.md §4). This module is the definition; the Redis store's Lua follows it.
 *
 * Windows are `[k*W, (k+1)*W)` for whole `k`, with W = unit x unit_multiplier in ms, aligned to
 * the Unix epoch as the reference aligns them (a minute window starts on the minute). A counter
 * counts the hits admitted in the window that contains `now`; a new window starts from zero.
 *
 * State ({@link CounterState}): `stampMs` the start of the counted window, `total` its hits,
 * `emptyAtMs` its end (0 before the first charge). Ring fields are unused.
 *
 * - room: `total + hits <= limit`;
 * - remaining: `limit - total` (0 when over);
 * - reset, OK or over: the end of the current window minus now, as the reference computes
 *   `duration_until_reset` (also when the hits exceed the limit and can never be admitted).
 *
 * Unlike the reference, a rejected request charges nothing (the store decides all-or-nothing).
 * Guarantee: never more than `limit` hits in one aligned window; up to `2 x limit` in an interval
 * of length W that straddles two windows.
 */
import type { AlgorithmResult, CounterAlgorithm, CounterState, LimitParams } from './types.js';

/** Start of the epoch-aligned window of length `windowMs` that contains `nowMs`. */
export function windowStartMs(nowMs: number, windowMs: number): number {
  const now = Math.floor(nowMs);
  return now - (now % windowMs);
}

/** Reset the count when the window that holds it has ended. */
export function refresh(state: CounterState, nowMs: number, params: LimitParams): void {
  if (state.emptyAtMs !== 0 && Math.floor(nowMs) >= state.emptyAtMs) {
    state.total = 0;
    state.emptyAtMs = 0;
  }
  void params;
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

/** Add `hits` to the window of `nowMs` (after {@link refresh}). */
export function charge(
  state: CounterState,
  nowMs: number,
  hits: number,
  params: LimitParams,
): void {
  if (!(hits > 0)) return;
  if (state.emptyAtMs === 0) {
    const start = windowStartMs(nowMs, params.windowMs);
    state.stampMs = start;
    state.emptyAtMs = start + params.windowMs;
  }
  state.total += hits;
}

/** The decision: remaining `limit - total`, reset at the window end. */
export function result(
  state: CounterState,
  nowMs: number,
  _hits: number,
  params: LimitParams,
  overLimit: boolean,
  out: AlgorithmResult,
): AlgorithmResult {
  const now = Math.floor(nowMs);
  const remaining = params.limit - state.total;
  out.overLimit = overLimit;
  out.remaining = overLimit || remaining < 0 ? 0 : remaining;
  out.resetMs = windowStartMs(now, params.windowMs) + params.windowMs - now;
  return out;
}

/** `fixed_window` as the common {@link CounterAlgorithm} steps. */
export const fixedWindow: CounterAlgorithm = {
  refresh,
  hasRoom,
  charge,
  result,
  // The counted window [stampMs, emptyAtMs) is one window long.
  impliedFirst(state, params) {
    return state.emptyAtMs === 0 ? 0 : state.emptyAtMs - params.windowMs;
  },
};
