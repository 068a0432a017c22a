/**
 * The Lua script that checks and charges one batch of counters atomically on one Redis node
 * (docs/semantics.md §3, §4). Each algorithm's steps (load, refresh, room, charge, result) are
 * ported one by one from its module in src/algorithms/, so the Redis store answers exactly as the
 * memory store does. Its constants (sub-bucket count, algorithm codes) are
 * written into the source from those modules, never by hand.
 *
 * KEYS: one Redis key per spec, in spec order (a key may repeat: specs sharing a key are checked
 * cumulatively, in order). All keys of one call must hash to one slot on a cluster.
 *
 * ARGV:
 * - `ARGV[1]`: the time in epoch ms, or `''` to read it from Redis `TIME` (the default: replica
 *   clocks never matter; tests with a manual clock pass it);
 * - `ARGV[2]`: `'1'` for a dry run (decide and report, never charge), else `'0'`;
 * - `ARGV[3]`: extra TTL in ms added past the moment a counter holds nothing;
 * - then 6 values per spec, in KEYS order: algorithm ({@link ALGORITHM_CODES}), limit, window ms,
 *   burst, hits, mode (`e` enforced, `s` shadow, `q` quota; `q` followed by a number is a quota
 *   counter of that quota group: the batch is rejected when every group has a counter without
 *   room, `quotaRejects` in counter-store.ts).
 *
 * Reply: a flat array of integers: `admitted` (1 or 0), then per spec `overLimit` (1 or 0),
 * `remaining`, `resetMs`.
 *
 * Storage, layout version {@link REDIS_LAYOUT_VERSION} (keys.ts puts the version in every key).
 * Each call costs a bounded number of commands and bytes per counter, whatever the sub-bucket
 * count: at most one read and one write per counter, plus a TTL when the expiry moves. Every key written
 * gets a TTL that ends just after the counter is empty.
 * - sliding_window: a hash: `t` the running total of the stored buckets, `n` the newest bucket's
 *   index, `c` its hits, `h` the oldest stored bucket's index, and one field per older non-empty
 *   bucket (`index` -> hits). A call reads `t n c h` (HMGET) and writes what changed (one HSET);
 *   the older buckets are read only when the oldest one expires (then dropped with HDEL) or when
 *   an over-limit wait walks them. The TTL moves only when a new bucket starts.
 * - fixed_window: a hash with one field, named by the start (ms) of the counted window, holding
 *   its hits. A call is one HINCRBY of the batch's hits on that field, whose answer is the count
 *   to check; whatever the check does not charge is taken back with a second HINCRBY (and a field
 *   back at 0 is deleted), so an admitted call costs Redis one command per counter, as the
 *   reference's INCRBY does. The first call of a window drops the previous window's field and
 *   sets the TTL.
 * - token_bucket: a hash `s` (TAT whole ms), `n` (TAT ticks of 1/limit ms).
 * - sliding_log: a list `total, t1, hits1, t2, hits2, ...`, oldest first.
 */
import { ALGORITHMS, type Algorithm } from '../../algorithms/types.js';
import { EXPIRY_SPAN, SUB_BUCKETS } from '../../algorithms/sliding-window.js';

/**
 * Version of the Redis data layout this script reads and writes. keys.ts puts it in every key, so
 * replicas of different layouts sharing one Redis during a rolling upgrade never read each
 * other's keys (they count apart until the old replicas are gone; see the README). Bump it with
 * any change to what a key holds.
 */
export const REDIS_LAYOUT_VERSION = 2;

/** Numeric code of each algorithm in ARGV: its position in {@link ALGORITHMS}, from 1. */
export const ALGORITHM_CODES: Readonly<Record<Algorithm, number>> = Object.freeze(
  Object.fromEntries(ALGORITHMS.map((algorithm, i) => [algorithm, i + 1])) as Record<
    Algorithm,
    number
  >,
);

/** Mode letter of each counter mode in ARGV. */
export const MODE_CODES = { enforced: 'e', shadow: 's', quota: 'q' } as const;

/** Values per spec in ARGV after the three header values. */
export const ARGS_PER_SPEC = 6;

/**
 * The script source; see the module header for KEYS, ARGV and the reply.
 *
 * It defines no function on the hot path: Redis runs the whole chunk on every call, and each
 * closure or table of functions made there is paid per call (defining the four algorithms as
 * tables of functions cost more Redis CPU than a fixed_window check itself). Each step is
 * instead a branch on the algorithm code, in three passes: load, refresh and check every spec;
 * charge them when the batch is admitted; write the results. Numbers go to `redis.call` as Lua
 * numbers: Redis writes them with `%.17g`, exact for the integers (below 2^53) used here.
 */
export const APPLY_SCRIPT = `
local floor, ceil, fmod = math.floor, math.ceil, math.fmod
local now
if ARGV[1] ~= '' then
  now = floor(tonumber(ARGV[1]))
else
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end
local dry = ARGV[2] == '1'
local grace = tonumber(ARGV[3])
local SW, FW, TB = ${ALGORITHM_CODES.sliding_window}, ${ALGORITHM_CODES.fixed_window}, ${ALGORITHM_CODES.token_bucket}
-- sliding_window (src/algorithms/sliding-window.ts): SUB sub-buckets, each counted for SPAN.
local SUB, SPAN = ${SUB_BUCKETS}, ${EXPIRY_SPAN}
-- sliding_log reads its list in chunks of this many numbers.
local CHUNK = 128

-- sliding_window: the stored older buckets h .. n-1 of a key, as indexes and hits (nil: empty).
local function sw_older(key, h, n)
  local idx = {}
  for i = h, n - 1 do idx[#idx + 1] = i end
  if #idx == 0 then return idx, idx end
  return idx, redis.call('HMGET', key, unpack(idx))
end

local n = #KEYS
local ST, CUM, OVER = {}, {}, {}
local states = {}
local admitted = true
-- Quota groups seen (group -> some counter of it lacks room); nil when there are none.
local groups = nil
-- fixed_window: the hits of the whole batch on each key.
local fwtot = nil
for i = 1, n do
  local o = 3 + (i - 1) * ${ARGS_PER_SPEC}
  if tonumber(ARGV[o + 1]) == FW then
    fwtot = fwtot or {}
    local key = KEYS[i]
    fwtot[key] = (fwtot[key] or 0) + tonumber(ARGV[o + 5])
  end
end

-- Pass 1: load and refresh each key once, then check each spec against the cumulative hits of
-- its key so far.
for i = 1, n do
  local o = 3 + (i - 1) * ${ARGS_PER_SPEC}
  local a = tonumber(ARGV[o + 1])
  local limit, w = tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local hits = tonumber(ARGV[o + 5])
  local key = KEYS[i]
  local st = states[key]
  if st == nil then
    st = { key = key, w = w, t = 0, cum = hits, live = false, n = 0, c = 0, h = 0, s = 0, e = 0, len = 0 }
    states[key] = st
    if a == SW then
      -- t: live total; n, c: newest bucket and its hits; h: oldest stored bucket.
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
    elseif a == FW then
      -- One field per counted window, named by its start: its hits. The batch's hits on this
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
    elseif a == TB then
      -- s: TAT whole ms; n: TAT ticks of 1/limit ms; e: when the bucket is full again.
      local v = redis.call('HMGET', key, 's', 'n')
      st.s, st.n, st.e = 0, 0, 0
      if v[1] then
        st.s = tonumber(v[1])
        st.n = tonumber(v[2]) or 0
        if st.n > 0 then st.e = st.s + 1 else st.e = st.s end
        if now >= st.e then st.s, st.n, st.e = 0, 0, 0 end
      end
    else
      -- sliding_log: a list total, t1, hits1, t2, hits2, ... oldest first.
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
    end
  else
    st.cum = st.cum + hits
  end
  ST[i] = st
  local cum = st.cum
  CUM[i] = cum
  local room
  if a == TB then
    if limit <= 0 then
      room = cum <= 0
    else
      local d = 0
      if st.e ~= 0 then
        d = (st.s - now) * limit + st.n
        if d < 0 then d = 0 end
      end
      room = d + cum * w <= tonumber(ARGV[o + 4]) * w
    end
  else
    room = st.t + cum <= limit
  end
  OVER[i] = not room
  local mode = ARGV[o + 6]
  if not room and mode == 'e' then admitted = false end
  if #mode > 1 then
    local g = string.sub(mode, 2)
    groups = groups or {}
    if not room then
      groups[g] = true
    elseif groups[g] == nil then
      groups[g] = false
    end
  end
end
if admitted and groups then
  local all = true
  for _, g in pairs(groups) do if not g then all = false end end
  if all then admitted = false end
end

-- Pass 2: charge every spec of an admitted batch (quota specs only when they had room).
if admitted and not dry then
  for i = 1, n do
    local o = 3 + (i - 1) * ${ARGS_PER_SPEC}
    local hits = tonumber(ARGV[o + 5])
    if hits > 0 and not (OVER[i] and string.sub(ARGV[o + 6], 1, 1) == 'q') then
      local a, st, w = tonumber(ARGV[o + 1]), ST[i], tonumber(ARGV[o + 3])
      local key = st.key
      if a == SW then
        local b = ceil(w / SUB)
        if b < 1 then b = 1 end
        local idx = floor(now / b)
        st.t = st.t + hits
        if st.live and idx <= st.n then
          -- The newest bucket (also when the clock went back behind it).
          st.c = st.c + hits
          redis.call('HSET', key, 't', st.t, 'c', st.c)
        else
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
      elseif a == FW then
        st.t = st.t + hits
      elseif a == TB then
        local L = tonumber(ARGV[o + 2])
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
      else
        if st.len > 0 then
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
      end
    end
  end
end

-- fixed_window: take back what was added but not charged; a new window's key gets its TTL.
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

-- Pass 3: the results, from each key's state after the batch.
local reply = { admitted and 1 or 0 }
for i = 1, n do
  local o = 3 + (i - 1) * ${ARGS_PER_SPEC}
  local a, limit, w = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local st, hits, over = ST[i], CUM[i], OVER[i]
  local rem, reset = 0, 0
  if a == SW then
    local b = ceil(w / SUB)
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
  elseif a == FW then
    rem = limit - st.t
    if over or rem < 0 then rem = 0 end
    reset = w - fmod(now, w)
  elseif a == TB then
    local L, B = limit, tonumber(ARGV[o + 4])
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
  else
    if over then
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
  end
  local r = 3 * i - 1
  reply[r] = over and 1 or 0
  reply[r + 1] = rem
  reply[r + 2] = reset
end
return reply
`;
