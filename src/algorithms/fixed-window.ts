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
import type {
  AlgorithmDescriptor,
  AlgorithmResult,
  CounterAlgorithm,
  CounterState,
  LimitParams,
} from './types.js';

/** Start of the epoch-aligned window of length `windowMs` that contains `nowMs`. */
export function windowStartMs(nowMs: number, windowMs: number): number {
  const now = Math.floor(nowMs);
  return now - (now % windowMs);
}

/** Reset the count when the window that holds it has ended (a fresh state is already reset). */
function refresh(state: CounterState, nowMs: number, params: LimitParams): void {
  if (Math.floor(nowMs) >= state.emptyAtMs) {
    state.total = 0;
    state.emptyAtMs = 0;
  }
  void params;
}

/** `total + hits <= limit`. */
function hasRoom(state: CounterState, _nowMs: number, hits: number, params: LimitParams): boolean {
  return state.total + hits <= params.limit;
}

/** Add `hits` to the window of `nowMs` (after {@link refresh}). */
function charge(state: CounterState, nowMs: number, hits: number, params: LimitParams): void {
  if (!(hits > 0)) return;
  if (state.emptyAtMs === 0) {
    const start = windowStartMs(nowMs, params.windowMs);
    state.stampMs = start;
    state.emptyAtMs = start + params.windowMs;
  }
  state.total += hits;
}

/** The decision: remaining `limit - total`, reset at the window end. */
function result(
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
  out.remaining = overLimit ? 0 : Math.max(0, remaining);
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

/**
 * `fixed_window`, everything about it (see {@link AlgorithmDescriptor}). Redis layout: a hash with
 * one field, named by the start (ms) of the counted window, holding its hits. A call is one
 * HINCRBY of the batch's hits on that field, whose answer is the count to check; whatever the
 * check does not charge is taken back with a second HINCRBY (and a field back at 0 is deleted),
 * so an admitted call costs Redis one command per counter, as the reference's INCRBY does. The
 * first call of a window drops the previous window's field and sets the TTL.
 */
export const fixedWindowAlgorithm: AlgorithmDescriptor<'fixed_window'> = {
  name: 'fixed_window',
  tag: 'fw',
  redisCode: 2,
  steps: fixedWindow,
  bounds: { acceptsBurst: false },
  alignedResetHeader: true,
  lua: {
    setup: `-- fixed_window: the hits of the whole batch on each key.
local fwtot = nil
`,
    scan: `    fwtot = fwtot or {}
    fwtot[key] = (fwtot[key] or 0) + hits
`,
    load: `      -- One field per counted window, named by its start: its hits. The batch's hits on this
      -- key are added at once (one HINCRBY: the read and, when admitted, the write) and the
      -- part not charged is taken back after the check.
      local start = now - fmod(now, w)
      local add = 0
      if not dry then add = fwtot[key] end
      local t0
      if add > 0 then
        t0 = redis.call('HINCRBY', key, start, add) - add
      else
        t0 = tonumber(redis.call('HGET', key, start) or 0)
      end
      st.f, st.add, st.fresh = start, add, false
      if t0 == 0 then
        -- Nothing yet in this window: another field is an older window (dropped) or, when the
        -- clock went back, a later one, which goes on counting (fixed-window.ts refresh).
        local all = redis.call('HGETALL', key)
        for j = 1, #all, 2 do
          local f = tonumber(all[j])
          if f > start then
            if add > 0 then
              redis.call('HDEL', key, start)
              redis.call('HINCRBY', key, f, add)
            end
            st.f = f
            t0 = tonumber(all[j + 1])
          elseif f < start and not dry then
            redis.call('HDEL', key, f)
          end
        end
        st.fresh = st.f == start
      end
      st.t, st.t0 = t0, t0
`,
    charge: `        st.t = st.t + hits
`,
    finish: `-- fixed_window: take back what was added but not charged; a new window's key gets its TTL.
if fwtot ~= nil and not dry then
  for key, st in pairs(states) do
    if st.f ~= nil then
      local extra = st.t - st.t0 - st.add
      if extra ~= 0 then redis.call('HINCRBY', key, st.f, extra) end
      if st.t == 0 then
        if st.add > 0 then redis.call('HDEL', key, st.f) end
      elseif st.fresh and st.t > st.t0 then
        redis.call('PEXPIRE', key, st.f + st.w - now + grace)
      end
    end
  end
end
`,
    result: `    rem = limit - st.t
    if over or rem < 0 then rem = 0 end
    reset = w - fmod(now, w)
`,
  },
};
