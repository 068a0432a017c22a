/**
 * The Lua script that checks and charges one batch of counters atomically on one Redis node
 * (docs/semantics.md §3, §4). Each algorithm is a table of functions ported step by step from its
 * module in src/algorithms/ (load, refresh, room, charge, result), so the Redis store answers
 * exactly as the memory store does.
 *
 * KEYS: one Redis key per spec, in spec order (a key may repeat: specs sharing a key are checked
 * cumulatively, in order). All keys of one call must hash to one slot on a cluster.
 *
 * ARGV:
 * - `ARGV[1]`: the time in epoch ms, or `''` to read it from Redis `TIME` (the default: replica
 *   clocks never matter; tests with a manual clock pass it);
 * - `ARGV[2]`: `'1'` for a dry run (decide and report, never charge), else `'0'`;
 * - `ARGV[3]`: extra TTL in ms added past the moment a counter holds nothing;
 * - then 6 values per spec, in KEYS order: algorithm (`1` sliding_window, `2` fixed_window,
 *   `3` token_bucket, `4` sliding_log), limit, window ms, burst, hits, mode (`e` enforced,
 *   `s` shadow, `q` quota; `q` followed by a number is a quota counter of that quota group:
 *   the batch is rejected when every group has a counter without room, `quotaRejects` in
 *   counter-store.ts).
 *
 * Reply: a flat array of integers: `admitted` (1 or 0), then per spec `overLimit` (1 or 0),
 * `remaining`, `resetMs`.
 *
 * Storage per algorithm (every key written gets a TTL that ends just after the counter is empty):
 * - sliding_window: a list of pairs `bucket index, hits`, oldest first (at most 21 pairs);
 * - fixed_window: a hash `s` (window start ms), `n` (hits);
 * - token_bucket: a hash `s` (TAT whole ms), `n` (TAT ticks of 1/limit ms);
 * - sliding_log: a list `total, t1, hits1, t2, hits2, ...`, oldest first.
 */

/** Numeric code of each algorithm in ARGV (the index of its table in the script). */
export const ALGORITHM_CODES = {
  sliding_window: 1,
  fixed_window: 2,
  token_bucket: 3,
  sliding_log: 4,
} as const;

/** Mode letter of each counter mode in ARGV. */
export const MODE_CODES = { enforced: 'e', shadow: 's', quota: 'q' } as const;

/** Values per spec in ARGV after the three header values. */
export const ARGS_PER_SPEC = 6;

/** The script source; see the module header for KEYS, ARGV and the reply. */
export const APPLY_SCRIPT = `
local function int(x) return string.format('%.0f', x) end
local now
if ARGV[1] ~= '' then
  now = math.floor(tonumber(ARGV[1]))
else
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local dry = ARGV[2] == '1'
local grace = tonumber(ARGV[3])

-- sliding_window (src/algorithms/sliding-window.ts): 20 sub-buckets, counted for 21.
local sw = {}
local function bucket_ms(w)
  local b = math.ceil(w / 20)
  if b < 1 then b = 1 end
  return b
end
function sw.load(key)
  local raw = redis.call('LRANGE', key, 0, -1)
  local p = {}
  local total = 0
  for i = 1, #raw, 2 do
    local c = tonumber(raw[i + 1])
    p[#p + 1] = tonumber(raw[i])
    p[#p + 1] = c
    total = total + c
  end
  return { key = key, p = p, total = total }
end
function sw.refresh(st, sp)
  local p = st.p
  if #p == 0 then return end
  local oldest = math.floor(now / bucket_ms(sp.w)) - 20
  local first = 1
  local total = st.total
  while first <= #p and p[first] < oldest do
    total = total - p[first + 1]
    first = first + 2
  end
  if first > 1 then
    local q = {}
    for i = first, #p do q[#q + 1] = p[i] end
    st.p = q
  end
  if #st.p == 0 then total = 0 end
  st.total = total
end
function sw.room(st, hits, sp) return st.total + hits <= sp.limit end
function sw.charge(st, hits, sp)
  local b = bucket_ms(sp.w)
  local idx = math.floor(now / b)
  local p = st.p
  local m = #p
  if m > 0 and p[m - 1] >= idx then
    p[m] = p[m] + hits
  else
    p[m + 1] = idx
    p[m + 2] = hits
  end
  st.total = st.total + hits
  local flat = {}
  for i = 1, #p do flat[i] = int(p[i]) end
  redis.call('DEL', st.key)
  redis.call('RPUSH', st.key, unpack(flat))
  redis.call('PEXPIRE', st.key, int((p[#p - 1] + 21) * b - now + grace))
end
function sw.result(st, hits, sp, over)
  local limit, w = sp.limit, sp.w
  local p = st.p
  local b = bucket_ms(w)
  if over then
    if hits > limit then return 0, w end
    local excess = st.total + hits - limit
    if excess <= 0 then return 0, 0 end
    local freed = 0
    for i = 1, #p, 2 do
      freed = freed + p[i + 1]
      if freed >= excess then return 0, (p[i] + 21) * b - now end
    end
    return 0, w
  end
  local rem = limit - st.total
  if rem < 0 then rem = 0 end
  if #p == 0 then return rem, 0 end
  return rem, (p[1] + 21) * b - now
end

-- fixed_window (src/algorithms/fixed-window.ts): epoch-aligned windows.
local fw = {}
function fw.load(key, sp)
  local v = redis.call('HMGET', key, 's', 'n')
  local st = { key = key, s = 0, n = 0, e = 0 }
  if v[1] then
    st.s = tonumber(v[1])
    st.n = tonumber(v[2]) or 0
    st.e = st.s + sp.w
  end
  return st
end
function fw.refresh(st, sp)
  if st.e ~= 0 and now >= st.e then
    st.n = 0
    st.e = 0
  end
end
function fw.room(st, hits, sp) return st.n + hits <= sp.limit end
function fw.charge(st, hits, sp)
  if st.e == 0 then
    st.s = now - math.fmod(now, sp.w)
    st.e = st.s + sp.w
  end
  st.n = st.n + hits
  redis.call('HSET', st.key, 's', int(st.s), 'n', int(st.n))
  redis.call('PEXPIRE', st.key, int(st.e - now + grace))
end
function fw.result(st, hits, sp, over)
  local rem = sp.limit - st.n
  if over or rem < 0 then rem = 0 end
  return rem, now - math.fmod(now, sp.w) + sp.w - now
end

-- token_bucket (src/algorithms/token-bucket.ts): exact integer GCRA.
local tb = {}
function tb.load(key)
  local v = redis.call('HMGET', key, 's', 'n')
  local st = { key = key, s = 0, n = 0, e = 0 }
  if v[1] then
    st.s = tonumber(v[1])
    st.n = tonumber(v[2]) or 0
    if st.n > 0 then st.e = st.s + 1 else st.e = st.s end
  end
  return st
end
function tb.refresh(st, sp)
  if st.e ~= 0 and now >= st.e then
    st.s = 0
    st.n = 0
    st.e = 0
  end
end
local function tb_deficit(st, L)
  if st.e == 0 then return 0 end
  local t = (st.s - now) * L + st.n
  if t > 0 then return t end
  return 0
end
function tb.room(st, hits, sp)
  local L = sp.limit
  if L <= 0 then return hits <= 0 end
  return tb_deficit(st, L) + hits * sp.w <= sp.burst * sp.w
end
function tb.charge(st, hits, sp)
  local L, W = sp.limit, sp.w
  if L <= 0 then return end
  local ms, ticks = st.s, st.n
  if st.e == 0 or ms < now or (ms == now and ticks == 0) then
    ms = now
    ticks = 0
  end
  ticks = ticks + hits * W
  local whole = math.floor(ticks / L)
  ms = ms + whole
  ticks = ticks - whole * L
  st.s = ms
  st.n = ticks
  if ticks > 0 then st.e = ms + 1 else st.e = ms end
  redis.call('HSET', st.key, 's', int(ms), 'n', int(ticks))
  redis.call('PEXPIRE', st.key, int(st.e - now + grace))
end
local function tb_wait(st, allowed, L)
  if tb_deficit(st, L) <= allowed then return 0 end
  local x = st.n - allowed
  local q = math.floor(x / L)
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
  if at > now then return at - now end
  return 0
end
function tb.result(st, hits, sp, over)
  local L, W, B = sp.limit, sp.w, sp.burst
  if L <= 0 then return 0, W end
  local room = B * W - tb_deficit(st, L)
  local rem = 0
  if room > 0 then rem = math.floor(room / W) end
  if over then
    if hits > B then return 0, W end
    return 0, tb_wait(st, (B - hits) * W, L)
  end
  if rem >= B then return rem, 0 end
  return rem, tb_wait(st, (B - rem - 1) * W, L)
end

-- sliding_log (src/algorithms/sliding-log.ts): the exact time of every admitted hit.
local sl = {}
local CHUNK = 128
function sl.load(key)
  local t = redis.call('LINDEX', key, 0)
  local st = { key = key, total = 0, len = 0 }
  if t then
    st.total = tonumber(t)
    st.len = (redis.call('LLEN', key) - 1) / 2
  end
  return st
end
function sl.refresh(st, sp)
  if st.len == 0 then return end
  local oldest = now - sp.w
  local dropped = 0
  local total = st.total
  local done = false
  while not done and dropped < st.len do
    local from = 1 + 2 * dropped
    local chunk = redis.call('LRANGE', st.key, from, from + CHUNK - 1)
    if #chunk == 0 then break end
    for i = 1, #chunk, 2 do
      if tonumber(chunk[i]) > oldest then
        done = true
        break
      end
      total = total - tonumber(chunk[i + 1])
      dropped = dropped + 1
    end
  end
  if dropped == 0 then return end
  st.len = st.len - dropped
  if st.len == 0 then
    st.total = 0
    redis.call('DEL', st.key)
    return
  end
  st.total = total
  -- Element 2*dropped is the last dropped hits count; it becomes the new total.
  redis.call('LTRIM', st.key, 2 * dropped, -1)
  redis.call('LSET', st.key, 0, int(total))
end
function sl.room(st, hits, sp) return st.total + hits <= sp.limit end
function sl.charge(st, hits, sp)
  if st.len > 0 then
    local newest = tonumber(redis.call('LINDEX', st.key, -2))
    st.total = st.total + hits
    if newest >= now then
      local h = tonumber(redis.call('LINDEX', st.key, -1))
      redis.call('LSET', st.key, -1, int(h + hits))
      redis.call('LSET', st.key, 0, int(st.total))
      return
    end
    redis.call('RPUSH', st.key, int(now), int(hits))
    redis.call('LSET', st.key, 0, int(st.total))
  else
    st.total = hits
    redis.call('RPUSH', st.key, int(hits), int(now), int(hits))
  end
  st.len = st.len + 1
  redis.call('PEXPIRE', st.key, int(sp.w + grace))
end
function sl.result(st, hits, sp, over)
  local limit, w = sp.limit, sp.w
  if over then
    if hits > limit then return 0, w end
    local excess = st.total + hits - limit
    if excess <= 0 then return 0, 0 end
    local freed = 0
    local k = 0
    while k < st.len do
      local from = 1 + 2 * k
      local chunk = redis.call('LRANGE', st.key, from, from + CHUNK - 1)
      if #chunk == 0 then break end
      for i = 1, #chunk, 2 do
        freed = freed + tonumber(chunk[i + 1])
        if freed >= excess then return 0, tonumber(chunk[i]) + w - now end
      end
      k = k + #chunk / 2
    end
    return 0, w
  end
  local rem = limit - st.total
  if rem < 0 then rem = 0 end
  if st.len == 0 then return rem, 0 end
  return rem, tonumber(redis.call('LINDEX', st.key, 1)) + w - now
end

local ALGS = { sw, fw, tb, sl }
local n = #KEYS
local specs = {}
local states = {}
local key_hits = {}
local cum = {}
local over = {}
local admitted = true
local groups = nil
for i = 1, n do
  local o = 3 + (i - 1) * 6
  local sp = {
    alg = ALGS[tonumber(ARGV[o + 1])],
    limit = tonumber(ARGV[o + 2]),
    w = tonumber(ARGV[o + 3]),
    burst = tonumber(ARGV[o + 4]),
    hits = tonumber(ARGV[o + 5]),
    mode = string.sub(ARGV[o + 6], 1, 1),
  }
  if #ARGV[o + 6] > 1 then
    sp.group = string.sub(ARGV[o + 6], 2)
    groups = groups or {}
  end
  specs[i] = sp
  local key = KEYS[i]
  local st = states[key]
  if st == nil then
    st = sp.alg.load(key, sp)
    sp.alg.refresh(st, sp)
    states[key] = st
    key_hits[key] = sp.hits
  else
    key_hits[key] = key_hits[key] + sp.hits
  end
  sp.st = st
  cum[i] = key_hits[key]
  over[i] = not sp.alg.room(st, cum[i], sp)
  if over[i] and sp.mode == 'e' then admitted = false end
  if sp.group then
    if over[i] then groups[sp.group] = true
    elseif groups[sp.group] == nil then groups[sp.group] = false end
  end
end
if admitted and groups then
  local all = true
  for _, g in pairs(groups) do if not g then all = false end end
  if all then admitted = false end
end
if admitted and not dry then
  for i = 1, n do
    local sp = specs[i]
    if sp.hits > 0 and not (sp.mode == 'q' and over[i]) then sp.alg.charge(sp.st, sp.hits, sp) end
  end
end
local reply = { admitted and 1 or 0 }
for i = 1, n do
  local sp = specs[i]
  local rem, reset = sp.alg.result(sp.st, cum[i], sp, over[i])
  reply[#reply + 1] = over[i] and 1 or 0
  reply[#reply + 1] = rem
  reply[#reply + 1] = reset
end
return reply
`;
