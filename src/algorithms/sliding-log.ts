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
import type {
  AlgorithmDescriptor,
  AlgorithmResult,
  CounterAlgorithm,
  CounterState,
  LimitParams,
} from './types.js';

/**
 * Most `requests_per_unit` a `sliding_log` rule may have: the log keeps one timestamp per admitted
 * hit, so one key holds up to this many numbers (8 bytes each in memory).
 */
const SLIDING_LOG_MAX_LIMIT = 10_000;

/** The Redis script reads a log in chunks of this many numbers. */
const LUA_CHUNK = 128;

/** Drop the entries whose hits are W old or more at `nowMs`. */
function refresh(state: CounterState, nowMs: number, params: LimitParams): void {
  // Entries with t + W <= now are gone: keep t >= now - W + 1.
  if (dropPairsBelow(state, Math.floor(nowMs) - params.windowMs + 1) === 0) state.emptyAtMs = 0;
}

/** `total + hits <= limit`. */
function hasRoom(state: CounterState, _nowMs: number, hits: number, params: LimitParams): boolean {
  return state.total + hits <= params.limit;
}

/**
 * Log `hits` at `nowMs`. If the clock went back behind the newest entry, the hits join that
 * entry, so they are never counted for less than W.
 */
function charge(state: CounterState, nowMs: number, hits: number, params: LimitParams): void {
  if (!(hits > 0)) return;
  const now = Math.floor(nowMs);
  // Stryker disable next-line ConditionalExpression,EqualityOperator: with no entry, newestSlot is -1 and ring[-2] is undefined, which is never >= now: the guard only saves that lookup.
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
function result(
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
    out.resetMs = waitForRoomMs(state, now, hits, limit, windowMs);
    return out;
  }
  const remaining = limit - state.total;
  out.remaining = Math.max(0, remaining);
  out.resetMs = state.length === 0 ? 0 : ring[state.head << 1]! + windowMs - now;
  return out;
}

/**
 * The exact wait until `hits`, which do not fit now, fit with no other traffic; one window when
 * they never can (`hits > limit`).
 */
function waitForRoomMs(
  state: CounterState,
  now: number,
  hits: number,
  limit: number,
  windowMs: number,
): number {
  const at = pairFreeing(state, state.total + hits - limit);
  // -1 exactly when hits > limit: freeing every entry frees `total`, less than the excess.
  return at < 0 ? windowMs : at + windowMs - now;
}

/** `sliding_log` as the common {@link CounterAlgorithm} steps. */
const slidingLog: CounterAlgorithm = {
  refresh,
  hasRoom,
  charge,
  result,
  // One timestamp `t` left: the newest, so `emptyAtMs` is t + W. `stampMs` is never set.
  impliedFirst(state, params) {
    return state.length === 1 ? state.emptyAtMs - params.windowMs : 0;
  },
};

/**
 * `sliding_log`, everything about it (see {@link AlgorithmDescriptor}). Redis layout: a list
 * `total, t1, hits1, t2, hits2, ...`, oldest first.
 */
export const slidingLogAlgorithm: AlgorithmDescriptor<'sliding_log'> = {
  name: 'sliding_log',
  tag: 'sl',
  redisCode: 4,
  steps: slidingLog,
  bounds: {
    acceptsBurst: false,
    check({ requestsPerUnit }) {
      if (requestsPerUnit <= SLIDING_LOG_MAX_LIMIT) return undefined;
      return {
        field: 'requests_per_unit',
        at: 'algorithm',
        message:
          `sliding_log keeps one timestamp per admitted hit, so requests_per_unit is at most ` +
          `${SLIDING_LOG_MAX_LIMIT} (found ${requestsPerUnit}); use sliding_window for larger limits`,
      };
    },
  },
  alignedResetHeader: false,
  lua: {
    constants: `-- sliding_log reads its list in chunks of this many numbers.
local CHUNK = ${LUA_CHUNK}
`,
    state: 'len = 0',
    load: `      -- sliding_log: a list total, t1, hits1, t2, hits2, ... oldest first.
      st.len = 0
      local t0 = redis.call('LINDEX', key, 0)
      if t0 then
        st.t = tonumber(t0)
        st.len = (redis.call('LLEN', key) - 1) / 2
        local oldest = now - w
        local dropped = 0
        local total = st.t
        local done = false
        while not done and dropped < st.len do
          local from = 1 + 2 * dropped
          local chunk = redis.call('LRANGE', key, from, from + CHUNK - 1)
          if #chunk == 0 then break end
          for k = 1, #chunk, 2 do
            if tonumber(chunk[k]) > oldest then
              done = true
              break
            end
            total = total - tonumber(chunk[k + 1])
            dropped = dropped + 1
          end
        end
        if dropped > 0 then
          st.len = st.len - dropped
          if st.len == 0 then
            st.t = 0
            redis.call('DEL', key)
          else
            st.t = total
            -- Element 2*dropped is the last dropped hits count; it becomes the new total.
            redis.call('LTRIM', key, 2 * dropped, -1)
            redis.call('LSET', key, 0, total)
          end
        end
      end
`,
    charge: `        if st.len > 0 then
          local newest = tonumber(redis.call('LINDEX', key, -2))
          st.t = st.t + hits
          if newest >= now then
            local h = tonumber(redis.call('LINDEX', key, -1))
            redis.call('LSET', key, -1, h + hits)
            redis.call('LSET', key, 0, st.t)
          else
            redis.call('RPUSH', key, now, hits)
            redis.call('LSET', key, 0, st.t)
            st.len = st.len + 1
            redis.call('PEXPIRE', key, w + grace)
          end
        else
          st.t = hits
          redis.call('RPUSH', key, hits, now, hits)
          st.len = 1
          redis.call('PEXPIRE', key, w + grace)
        end
`,
    result: `    if over then
      local excess = st.t + hits - limit
      if hits > limit then
        reset = w
      elseif excess > 0 then
        reset = w
        local freed = 0
        local k = 0
        local found = false
        while not found and k < st.len do
          local from = 1 + 2 * k
          local chunk = redis.call('LRANGE', st.key, from, from + CHUNK - 1)
          if #chunk == 0 then break end
          for j = 1, #chunk, 2 do
            freed = freed + tonumber(chunk[j + 1])
            if freed >= excess then
              reset = tonumber(chunk[j]) + w - now
              found = true
              break
            end
          end
          k = k + #chunk / 2
        end
      end
    else
      rem = limit - st.t
      if rem < 0 then rem = 0 end
      if st.len > 0 then reset = tonumber(redis.call('LINDEX', st.key, 1)) + w - now end
    end
`,
  },
};
