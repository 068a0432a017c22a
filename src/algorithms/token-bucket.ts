/**
 * The token bucket, in its GCRA form (docs/semantics.md §4). This module is the definition; the
 * Redis store's Lua follows it step by step.
 *
 * A bucket holds up to `burst` tokens (B) and refills `limit` tokens (L) per window W, continuously
 * and lazily: nothing runs between requests. A request for `hits` tokens is admitted when the
 * bucket holds at least that many; admitting takes them out.
 *
 * GCRA keeps one number per key instead of (tokens, last time): the theoretical arrival time TAT,
 * the moment at which the bucket will be full again. At time `now` the bucket is short of full by
 * `TAT - now` ms worth of refill (never less than 0), so it holds `B - max(0, TAT - now) x L / W`
 * tokens; taking `n` tokens moves TAT to `max(TAT, now) + n x W / L`.
 *
 * Exact integer arithmetic. One token refills in W / L ms, which is rarely whole, so time is also
 * counted in ticks of 1/L ms: TAT is `stampMs` whole ms plus `total` ticks (0 <= total < L). The
 * shortfall in ticks is `deficit = max(0, (TAT - now) x L)`, and one token is W ticks:
 * - room for `n`: `deficit + n x W <= B x W`;
 * - remaining: `floor((B x W - deficit) / W)` whole tokens;
 * - over-limit reset: the least whole ms `t >= now` with `deficit(t) <= (B - n) x W`, minus now
 *   (when `n > B` the hits can never fit and the reset is one window W);
 * - OK reset: the same wait for one more whole token than `remaining`; 0 when the bucket is full.
 * Every product stays exact while `B x W < 2^53` (validation enforces it), and `emptyAtMs` is TAT
 * rounded up: from then on the bucket is full and the state can be dropped.
 *
 * `limit` 0 never refills: only 0 hits fit and the reset is one window.
 */
import type {
  AlgorithmDescriptor,
  AlgorithmResult,
  CounterAlgorithm,
  CounterState,
  LimitParams,
} from './types.js';

/** Largest `burst x windowMs` the arithmetic keeps exact (2^53 - 1). */
export const TOKEN_BUCKET_MAX_PRODUCT = Number.MAX_SAFE_INTEGER;

/** Drop a state whose bucket is full again (TAT <= now); a fresh state (all 0) stays as it is. */
function refresh(state: CounterState, nowMs: number, params: LimitParams): void {
  if (Math.floor(nowMs) >= state.emptyAtMs) {
    state.total = 0;
    state.stampMs = 0;
    state.emptyAtMs = 0;
  }
  void params;
}

/**
 * The shortfall from a full bucket at `now`, in ticks of 1/L ms (0 when full). A fresh state
 * (TAT 0) gives `-now x L` before the clamp, so it needs no case of its own.
 */
function deficit(state: CounterState, now: number, limit: number): number {
  const ticks = (state.stampMs - now) * limit + state.total;
  return Math.max(0, ticks);
}

/** Whether the bucket holds `hits` tokens at `nowMs`. */
function hasRoom(state: CounterState, nowMs: number, hits: number, params: LimitParams): boolean {
  const { limit, windowMs, burst } = params;
  if (limit <= 0) return hits <= 0;
  return deficit(state, Math.floor(nowMs), limit) + hits * windowMs <= burst * windowMs;
}

/** Take `hits` tokens at `nowMs`: TAT becomes `max(TAT, now) + hits x W / L`. */
function charge(state: CounterState, nowMs: number, hits: number, params: LimitParams): void {
  const { limit, windowMs } = params;
  if (!(hits > 0) || limit <= 0) return;
  const now = Math.floor(nowMs);
  let ms = state.stampMs;
  let ticks = state.total;
  // max(TAT, now): a fresh state's TAT is 0; a TAT of exactly `now` ms and 0 ticks is `now`.
  if (ms < now) {
    ms = now;
    ticks = 0;
  }
  ticks += hits * windowMs;
  const whole = Math.floor(ticks / limit);
  ms += whole;
  ticks -= whole * limit;
  state.stampMs = ms;
  state.total = ticks;
  state.emptyAtMs = ticks > 0 ? ms + 1 : ms;
}

/**
 * The least whole-ms wait from `now` after which the deficit is at most `allowed` ticks: TAT
 * minus `allowed / L` ms, rounded up, minus now. Only asked when the deficit now exceeds
 * `allowed` (over: the hits do not fit; OK: one more token than `remaining` does not), so the
 * wait is at least 1 ms.
 *
 * `q + (r > 0 ? 1 : 0)` is `ceil(x / L)`, exact for -2^53 < x < L: `x / L` lies at least 1/L
 * from any integer it is not, more than its rounding error, so `q` is the true floor; `q x L`
 * (|x| + the true remainder) rounds only past 2^53, by at most 1, when that remainder is at
 * least 2; `x - q x L` is then exact, so `r > 0` is true exactly when the true remainder is.
 */
function waitUntilDeficitAtMost(
  state: CounterState,
  now: number,
  allowed: number,
  limit: number,
): number {
  const x = state.total - allowed;
  const q = Math.floor(x / limit);
  const r = x - q * limit;
  return state.stampMs + q + (r > 0 ? 1 : 0) - now;
}

/** The decision: whole tokens left, and the wait for the hits (over) or the next token (OK). */
function result(
  state: CounterState,
  nowMs: number,
  hits: number,
  params: LimitParams,
  overLimit: boolean,
  out: AlgorithmResult,
): AlgorithmResult {
  const { limit, windowMs, burst } = params;
  const now = Math.floor(nowMs);
  out.overLimit = overLimit;
  if (limit <= 0) {
    out.remaining = 0;
    out.resetMs = windowMs;
    return out;
  }
  const room = burst * windowMs - deficit(state, now, limit);
  const remaining = Math.max(0, Math.floor(room / windowMs));
  if (overLimit) {
    out.remaining = 0;
    out.resetMs =
      hits > burst
        ? windowMs
        : waitUntilDeficitAtMost(state, now, (burst - hits) * windowMs, limit);
    return out;
  }
  out.remaining = remaining;
  out.resetMs =
    remaining >= burst
      ? 0
      : waitUntilDeficitAtMost(state, now, (burst - remaining - 1) * windowMs, limit);
  return out;
}

/** `token_bucket` as the common {@link CounterAlgorithm} steps. */
const tokenBucket: CounterAlgorithm = {
  refresh,
  hasRoom,
  charge,
  result,
  // `emptyAtMs` is TAT rounded up to a whole ms: `stampMs`, plus 1 when a fraction (`total`) is left.
  // A fresh state is all 0, so it needs no case of its own.
  impliedFirst(state) {
    return state.total > 0 ? state.emptyAtMs - 1 : state.emptyAtMs;
  },
};

/**
 * `token_bucket`, everything about it (see {@link AlgorithmDescriptor}). Redis layout: a hash, `s`
 * the TAT in whole ms, `n` the TAT's ticks of 1/limit ms.
 */
export const tokenBucketAlgorithm: AlgorithmDescriptor<'token_bucket'> = {
  name: 'token_bucket',
  tag: 'tb',
  redisCode: 3,
  steps: tokenBucket,
  bounds: {
    acceptsBurst: true,
    check({ requestsPerUnit, burst, burstWritten, windowMs }) {
      const capacity = burst ?? requestsPerUnit;
      if (capacity * windowMs <= TOKEN_BUCKET_MAX_PRODUCT) return undefined;
      return {
        field: burstWritten ? 'burst' : 'requests_per_unit',
        at: burstWritten ? 'burst' : 'limit',
        message:
          `token_bucket capacity ${capacity} x window ${windowMs} ms is too large to count exactly ` +
          `(the product must stay below 2^53); use a smaller burst or a shorter window`,
      };
    },
  },
  alignedResetHeader: false,
  lua: {
    state: 's = 0, n = 0, e = 0',
    load: `      -- s: TAT whole ms; n: TAT ticks of 1/limit ms; e: when the bucket is full again.
      local v = redis.call('HMGET', key, 's', 'n')
      st.s, st.n, st.e = 0, 0, 0
      if v[1] then
        st.s = tonumber(v[1])
        st.n = tonumber(v[2]) or 0
        if st.n > 0 then st.e = st.s + 1 else st.e = st.s end
        if now >= st.e then st.s, st.n, st.e = 0, 0, 0 end
      end
`,
    room: `    if limit <= 0 then
      room = cum <= 0
    else
      local d = 0
      if st.e ~= 0 then
        d = (st.s - now) * limit + st.n
        if d < 0 then d = 0 end
      end
      room = d + cum * w <= burst * w
    end
`,
    charge: `        local L = limit
        if L > 0 then
          local ms, ticks = st.s, st.n
          if st.e == 0 or ms < now or (ms == now and ticks == 0) then
            ms = now
            ticks = 0
          end
          ticks = ticks + hits * w
          local whole = floor(ticks / L)
          ms = ms + whole
          ticks = ticks - whole * L
          st.s, st.n = ms, ticks
          if ticks > 0 then st.e = ms + 1 else st.e = ms end
          redis.call('HSET', key, 's', ms, 'n', ticks)
          redis.call('PEXPIRE', key, st.e - now + grace)
        end
`,
    result: `    local L, B = limit, burst
    if L <= 0 then
      reset = w
    else
      local d = 0
      if st.e ~= 0 then
        d = (st.s - now) * L + st.n
        if d < 0 then d = 0 end
      end
      local room = B * w - d
      if room > 0 then rem = floor(room / w) end
      -- The wait until the deficit is at most allowed ticks (exact integer GCRA).
      local allowed = -1
      if over then
        rem = 0
        if hits > B then reset = w else allowed = (B - hits) * w end
      elseif rem < B then
        allowed = (B - rem - 1) * w
      end
      if allowed >= 0 and d > allowed then
        local x = st.n - allowed
        local q = floor(x / L)
        local r = x - q * L
        if r < 0 then
          q = q - 1
          r = r + L
        elseif r >= L then
          q = q + 1
          r = r - L
        end
        local at = st.s + q
        if r > 0 then at = at + 1 end
        if at > now then reset = at - now end
      end
    end
`,
  },
};
