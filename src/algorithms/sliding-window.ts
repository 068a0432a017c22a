/**
 * The sliding window algorithm (docs/semantics.md §4) as small, pure functions over a per-counter state.
 *
 * The window W is split into {@link SUB_BUCKETS} sub-buckets of `b = W / SUB_BUCKETS` ms. A hit
 * at time `t` lands in bucket `i = floor(t / b)`, which spans `[i*b, (i+1)*b)`. Hits of one
 * bucket are grouped into one count, a running total of the live buckets is kept, and only
 * non-empty buckets are stored (a small ring of `(index, count)` pairs, oldest first).
 *
 * Expiry: bucket `i` stays counted until every hit in it is at least W old, i.e. it is live
 * while `floor(now / b) <= i + SUB_BUCKETS` and expires at `(i + SUB_BUCKETS + 1) * b`. So a hit
 * at `t` is counted for at least W (no interval of length W can ever hold more than the limit)
 * and at most W + b (under-admission is bounded by one sub-bucket of time).
 *
 * Every function works on integer milliseconds: a fractional `nowMs` is floored. None of them
 * allocates on the hot path; {@link result} writes into a caller-provided object. Callers that
 * check several counters before charging any (the all-or-nothing batch of docs/semantics.md §3) use the
 * steps separately: {@link evict}, {@link hasRoom}, {@link charge}, then {@link result}.
 *
 * This module is the definition of `sliding_window` (docs/semantics.md §4); the Redis store's Lua
 * follows it step by step.
 */
import {
  cloneCounterState,
  createCounterState,
  type AlgorithmDescriptor,
  type AlgorithmResult,
  type CounterAlgorithm,
  type CounterState,
} from './types.js';
import { dropPairsBelow, newestSlot, pairFreeing, pushPair } from './ring.js';

/** Number of sub-buckets a window is split into. */
export const SUB_BUCKETS = 20;

/** A bucket `i` is counted through bucket index `i + SUB_BUCKETS` and expires at the next one. */
export const EXPIRY_SPAN = SUB_BUCKETS + 1;

/** At most this many buckets are live at once (indices `current - SUB_BUCKETS ... current`). */
const MAX_LIVE_BUCKETS = SUB_BUCKETS + 1;

/**
 * Length of one sub-bucket in ms for a window of `windowMs` ms: `windowMs / SUB_BUCKETS`.
 * Every unit length (and so every window) is a whole number of seconds, hence divisible by 20;
 * for any other length this rounds up (never below 1 ms), which keeps the "never more than the
 * limit in any interval of length W" guarantee and counts hits for slightly longer.
 */
export function bucketMsFor(windowMs: number): number {
  return Math.max(1, Math.ceil(windowMs / SUB_BUCKETS));
}

/**
 * The state of one sliding window counter: a {@link CounterState} where `total` is the sum of the
 * stored buckets (as of the last {@link evict}), `ring` holds `(bucket index, hits)` pairs oldest
 * first (at most 21 live at once; it grows on demand), and `emptyAtMs` is when the newest stored
 * bucket expires. `stampMs` is unused.
 */
export type SlidingWindowState = CounterState;

/** A new, empty state (nothing counted). Cheap: the ring starts with room for one bucket. */
export const createSlidingWindowState: () => SlidingWindowState = createCounterState;

/** A deep copy of `state`, independent of it (for tests, snapshots and what-if checks). */
export const cloneState: (state: SlidingWindowState) => SlidingWindowState = cloneCounterState;

/**
 * Drop every bucket that has expired at `nowMs` (epoch ms) from the front and subtract it from
 * the total. Call it before {@link hasRoom} and {@link charge} with the same `nowMs`.
 * `windowMs` is the window length in ms; it must be the same for every call on one state.
 */
export function evict(state: SlidingWindowState, nowMs: number, windowMs: number): void {
  const bucketMs = bucketMsFor(windowMs);
  dropPairsBelow(state, Math.floor(Math.floor(nowMs) / bucketMs) - SUB_BUCKETS);
}

/**
 * Whether `hits` more fit under `limit` given the live total (call {@link evict} first):
 * `total + hits <= limit`. With `hits` 0 this is false only when the total already exceeds the
 * limit, which only shadow-mode counters (charged while over) can reach.
 */
export function hasRoom(state: SlidingWindowState, hits: number, limit: number): boolean {
  return state.total + hits <= limit;
}

/**
 * Add `hits` at `nowMs` (epoch ms) to the bucket of `nowMs`, creating it at the back when it is
 * new. Does not check the limit (the caller decides). `hits` <= 0 changes nothing. If the clock
 * moved backwards behind the newest bucket, the hits join the newest bucket instead, so they
 * are never counted for less than W.
 */
export function charge(
  state: SlidingWindowState,
  nowMs: number,
  hits: number,
  windowMs: number,
): void {
  if (!(hits > 0)) return;
  const bucketMs = bucketMsFor(windowMs);
  const index = Math.floor(Math.floor(nowMs) / bucketMs);
  // Stryker disable next-line ConditionalExpression,EqualityOperator: with no pair, newestSlot is -1 and ring[-2] is undefined, which is never >= index: the guard only saves that lookup.
  if (state.length > 0) {
    const at = newestSlot(state) << 1;
    if (state.ring[at]! >= index) {
      state.ring[at + 1]! += hits;
      state.total += hits;
      return;
    }
  }
  // 21 live buckets at most: the ring grows 1, 2, 4, 8, 16, 21 so a busy counter wastes no slots.
  pushPair(state, index, hits, MAX_LIVE_BUCKETS);
  state.total += hits;
  state.emptyAtMs = (index + EXPIRY_SPAN) * bucketMs;
}

/**
 * The exact wait in ms, from `nowMs` (epoch ms), after which `hits` would fit under `limit`
 * with no other traffic (call {@link evict} first): 0 when they fit now; otherwise the expiry
 * of the oldest bucket whose expiry frees enough, walking buckets oldest first, minus now.
 * When `hits > limit` they can never fit, and this returns `windowMs` (a full window: the
 * longest any finite wait could be, so a client that retries is not told "now").
 */
export function waitForRoomMs(
  state: SlidingWindowState,
  nowMs: number,
  hits: number,
  limit: number,
  windowMs: number,
): number {
  const excess = state.total + hits - limit;
  if (excess <= 0) return 0;
  const bucketMs = bucketMsFor(windowMs);
  const index = pairFreeing(state, excess);
  // -1 exactly when hits > limit: freeing every bucket frees `total`, less than the excess.
  return index < 0 ? windowMs : (index + EXPIRY_SPAN) * bucketMs - Math.floor(nowMs);
}

/**
 * Fields of a decision, written by {@link result}: `remaining` is `limit - total` (at least 0);
 * the OVER_LIMIT reset is {@link waitForRoomMs}; the OK reset is when the oldest stored bucket
 * expires (0 when nothing is counted).
 */
export type SlidingWindowResult = AlgorithmResult;

/**
 * Write the decision for a counter into `out` and return `out`, from the state as it is after
 * the request (after {@link charge} when the request was admitted and charged, untouched
 * otherwise). `overLimit` is the outcome of {@link hasRoom} taken before charging; `hits` the
 * hits the request asked for on this counter; `nowMs` epoch ms; `windowMs` the window length.
 */
export function result(
  state: SlidingWindowState,
  nowMs: number,
  hits: number,
  limit: number,
  windowMs: number,
  overLimit: boolean,
  out: SlidingWindowResult,
): SlidingWindowResult {
  if (overLimit) {
    out.overLimit = true;
    out.remaining = 0;
    out.resetMs = waitForRoomMs(state, nowMs, hits, limit, windowMs);
    return out;
  }
  const remaining = limit - state.total;
  out.overLimit = false;
  out.remaining = Math.max(0, remaining);
  out.resetMs =
    state.length === 0
      ? 0
      : (state.ring[state.head << 1]! + EXPIRY_SPAN) * bucketMsFor(windowMs) - Math.floor(nowMs);
  return out;
}

/**
 * One counter on its own: evict, check, charge `hits` if they fit, and write the decision into
 * `out` (returned). Stores that batch several counters use the separate steps instead.
 */
export function checkAndCharge(
  state: SlidingWindowState,
  nowMs: number,
  hits: number,
  limit: number,
  windowMs: number,
  out: SlidingWindowResult,
): SlidingWindowResult {
  evict(state, nowMs, windowMs);
  const overLimit = !hasRoom(state, hits, limit);
  if (!overLimit) charge(state, nowMs, hits, windowMs);
  return result(state, nowMs, hits, limit, windowMs, overLimit, out);
}

/**
 * Epoch ms at which every stored bucket has expired and the state counts nothing; 0 when
 * nothing was ever charged. A store may drop the state once `now >= expiresAtMs(state)`.
 */
export function expiresAtMs(state: SlidingWindowState): number {
  return state.emptyAtMs;
}

/** `sliding_window` behind the common {@link CounterAlgorithm} steps. */
const slidingWindow: CounterAlgorithm = {
  refresh(state, nowMs, params) {
    evict(state, nowMs, params.windowMs);
  },
  hasRoom(state, _nowMs, hits, params) {
    return hasRoom(state, hits, params.limit);
  },
  charge(state, nowMs, hits, params) {
    charge(state, nowMs, hits, params.windowMs);
  },
  result(state, nowMs, hits, params, overLimit, out) {
    return result(state, nowMs, hits, params.limit, params.windowMs, overLimit, out);
  },
  // One bucket `i` left: it expires at (i + EXPIRY_SPAN) x b. `stampMs` is never set.
  impliedFirst(state, params) {
    if (state.length !== 1) return 0;
    const bucketMs = bucketMsFor(params.windowMs);
    return state.emptyAtMs / bucketMs - EXPIRY_SPAN;
  },
};

/**
 * `sliding_window`, everything about it (see {@link AlgorithmDescriptor}). Redis layout: a hash,
 * `t` the running total of the stored buckets, `n` the newest bucket's index, `c` its hits, `h`
 * the oldest stored bucket's index, and one field per older non-empty bucket (`index` -> hits).
 * A call reads `t n c h` (HMGET) once per key and writes what changed (one HSET per key at the
 * end of the call, however many requests it carries; at once when a new bucket starts, so the
 * older fields in Redis are always current); the older buckets are read
 * only when the oldest one expires (then dropped with HDEL) or when an over-limit wait walks
 * them. The TTL moves only when a new bucket starts.
 */
export const slidingWindowAlgorithm: AlgorithmDescriptor<'sliding_window'> = {
  name: 'sliding_window',
  tag: 'sw',
  redisCode: 1,
  steps: slidingWindow,
  bounds: { acceptsBurst: false },
  alignedResetHeader: false,
  lua: {
    constants: `-- sliding_window (src/algorithms/sliding-window.ts): SUB sub-buckets, each counted for SPAN.
local SUB, SPAN = ${SUB_BUCKETS}, ${EXPIRY_SPAN}

-- sliding_window: the stored older buckets h .. n-1 of a key, as indexes and hits (nil: empty).
local function sw_older(key, h, n)
  local idx = {}
  for i = h, n - 1 do idx[#idx + 1] = i end
  if #idx == 0 then return idx, idx end
  return idx, redis.call('HMGET', key, unpack(idx))
end
`,
    state: 'live = false, n = 0, c = 0, h = 0, swd = false',
    load: `      -- t: live total; n, c: newest bucket and its hits; h: oldest stored bucket.
      local v = redis.call('HMGET', key, 't', 'n', 'c', 'h')
      st.live = false
      if v[1] then
        local t, nb, c, h = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
        local b = ceil(w / SUB)
        if b < 1 then b = 1 end
        local oldest = floor(now / b) - SUB
        if nb < oldest then
          if not dry then redis.call('DEL', key) end
        else
          if h < oldest then
            local idx, older = sw_older(key, h, nb)
            local gone = {}
            h = nb
            for k = 1, #idx do
              if older[k] then
                if idx[k] >= oldest then
                  h = idx[k]
                  break
                end
                t = t - tonumber(older[k])
                gone[#gone + 1] = idx[k]
              end
            end
            if not dry then
              if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
              redis.call('HSET', key, 't', t, 'h', h)
            end
          end
          st.live, st.t, st.n, st.c, st.h = true, t, nb, c, h
        end
      end
`,
    charge: `        local b = ceil(w / SUB)
        if b < 1 then b = 1 end
        local idx = floor(now / b)
        st.t = st.t + hits
        if st.live and idx <= st.n then
          -- The newest bucket (also when the clock went back behind it): written once per
          -- call, by finish, however many requests of the call charge it.
          st.c = st.c + hits
          st.swd = true
        else
          st.swd = false
          if st.live then
            redis.call('HSET', key, st.n, st.c, 't', st.t, 'n', idx, 'c', hits)
          else
            st.live = true
            st.h = idx
            redis.call('HSET', key, 't', st.t, 'n', idx, 'c', hits, 'h', idx)
          end
          st.n, st.c = idx, hits
          redis.call('PEXPIRE', key, (idx + SPAN) * b - now + grace)
        end
`,
    finish: `-- sliding_window: write the totals of the keys whose newest bucket was charged in place.
for key, st in pairs(states) do
  if st.swd then redis.call('HSET', key, 't', st.t, 'c', st.c) end
end
`,
    result: `    local b = ceil(w / SUB)
    if b < 1 then b = 1 end
    if over then
      local excess = st.t + hits - limit
      if hits > limit then
        reset = w
      elseif excess > 0 then
        reset = w
        if st.live then
          local freed = 0
          local idx, older = sw_older(st.key, st.h, st.n)
          local found = false
          for k = 1, #idx do
            if older[k] then
              freed = freed + tonumber(older[k])
              if freed >= excess then
                reset = (idx[k] + SPAN) * b - now
                found = true
                break
              end
            end
          end
          if not found and freed + st.c >= excess then reset = (st.n + SPAN) * b - now end
        end
      end
    else
      rem = limit - st.t
      if rem < 0 then rem = 0 end
      if st.live then reset = (st.h + SPAN) * b - now end
    end
`,
  },
};
