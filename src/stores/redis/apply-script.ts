/**
 * The Lua script that checks and charges one batch of counters atomically on one Redis node
 * (docs/semantics.md §3, §4). Each algorithm's steps (load, refresh, room, charge, result) are
 * ported one by one from its module in src/algorithms/, which also holds that Lua (its
 * descriptor's `lua`), so the Redis store answers exactly as the memory store does. Its constants
 * (algorithm codes, sub-bucket count) come from those modules, never written here by hand.
 *
 * One call carries one or more requests (the store coalesces the requests of one event-loop turn
 * that go to the same node and slot, see redis-store.ts). They run one after the other, each all
 * or nothing exactly as if it were a call of its own, on the states the earlier ones left; each
 * key is read from Redis once per call and, where the algorithm can, written once at its end.
 *
 * KEYS: one Redis key per counter of the call. Requests of one turn mostly share their keys, so a
 * key is sent once for all of them (twice only when two of its specs differ in limit or mode). All
 * keys of one call must hash to one slot on a cluster.
 *
 * ARGV:
 * - `ARGV[1]`: the time in epoch ms, or `''` to read it from Redis `TIME` (the default: replica
 *   clocks never matter; tests with a manual clock pass it); every request of the call is
 *   decided at this time;
 * - `ARGV[2]`: `'1'` for a dry run (decide and report, never charge), else `'0'`;
 * - `ARGV[3]`: extra TTL in ms added past the moment a counter holds nothing;
 * - then {@link ARGS_PER_COUNTER} values per counter, in KEYS order: algorithm
 *   ({@link ALGORITHM_CODES}), limit, window ms, burst, mode (`e` enforced, `s` shadow, `q`
 *   quota; `q` followed by a number is a quota counter of that quota group: the request is
 *   rejected when every group has a counter without room, `quotaRejects` in stores/batch.ts);
 * - then the number of requests R and, per request, its number of specs m and m pairs: the
 *   spec's counter (1-based index into KEYS) and its hits. Specs of one request on one key are
 *   checked cumulatively, in order.
 *
 * Reply: a flat array of integers, per request: `admitted` (1 or 0), then per spec of it
 * `overLimit` (1 or 0), `remaining`, `resetMs`.
 *
 * Storage, layout version {@link REDIS_LAYOUT_VERSION} (keys.ts puts the version in every key).
 * Each call costs a bounded number of commands and bytes per counter, whatever the sub-bucket
 * count: at most one read and one write per counter and request, plus a TTL when the expiry
 * moves. The layout did not change when calls began to carry several requests: a replica that
 * sends one request per call and one that sends many count together on the same keys. Every key
 * written gets a TTL that ends just after the counter is empty. What one key holds is each
 * algorithm's business: its descriptor in src/algorithms/ says, next to its Lua fragments.
 *
 * The script is assembled from those fragments ({@link assembleApplyScript}): the parts below
 * are the batch rule, common to every algorithm; each algorithm's parts are spliced in as one
 * branch on its code per pass. The batch rule here is the server-side copy of the one in
 * stores/batch.ts (docs/semantics.md §3): Redis runs Lua, not TypeScript, and the check and
 * the charge must happen in one script to be atomic, so the rule is written twice; the contract
 * tests run both stores through the same cases to keep the two in step.
 */
import {
  ALGORITHM_DESCRIPTORS,
  type Algorithm,
  type AlgorithmDescriptor,
  type LuaFragments,
} from '../../algorithms/index.js';

/**
 * Version of the Redis data layout this script reads and writes. keys.ts puts it in every key, so
 * replicas of different layouts sharing one Redis during a rolling upgrade never read each
 * other's keys (they count apart until the old replicas are gone; see the README). Bump it with
 * any change to what a key holds.
 */
export const REDIS_LAYOUT_VERSION = 2;

/** Numeric code of each algorithm in ARGV (its descriptor's `redisCode`). */
export const ALGORITHM_CODES: Readonly<Record<Algorithm, number>> = Object.freeze(
  Object.fromEntries(
    ALGORITHM_DESCRIPTORS.map((algorithm) => [algorithm.name, algorithm.redisCode]),
  ) as Record<Algorithm, number>,
);

/** Mode letter of each counter mode in ARGV. */
export const MODE_CODES = { enforced: 'e', shadow: 's', quota: 'q' } as const;

/** ARGV values per counter (per key): algorithm, limit, window ms, burst, mode. */
export const ARGS_PER_COUNTER = 5;

/** ARGV values before the counters: time, dry run, grace. */
const HEADER_ARGS = 3;

/** The Lua constant holding an algorithm's code: its tag, upper-cased (`sw` -> `SW`). */
function codeName(algorithm: AlgorithmDescriptor): string {
  return algorithm.tag.toUpperCase();
}

/**
 * One branch per algorithm that has the part `pick` picks, on the code in `a` (`if a == SW then
 * ... elseif a == FW then ... end`), indented by `indent`. `fallback` (when given) is the `else`
 * branch, for the algorithms without the part. Without one, when every algorithm has the part,
 * the last is the `else` branch (the codes in ARGV are only ever the registry's). Adds the
 * algorithms whose code it compares to `compared`; '' when there is nothing to run.
 */
function branches(
  algorithms: readonly AlgorithmDescriptor[],
  pick: (lua: LuaFragments) => string | undefined,
  indent: string,
  compared: Set<AlgorithmDescriptor>,
  fallback?: string,
): string {
  const having = algorithms.filter((algorithm) => pick(algorithm.lua) !== undefined);
  let last = fallback;
  if (last === undefined && having.length === algorithms.length && having.length > 0) {
    last = pick(having.pop()!.lua);
  }
  // A part no branch compares runs as it is, at the depth of a branch (Lua ignores the indent).
  if (having.length === 0) return last ?? '';
  let out = '';
  for (const algorithm of having) {
    compared.add(algorithm);
    const keyword = out === '' ? 'if' : 'elseif';
    out += `${indent}${keyword} a == ${codeName(algorithm)} then\n${pick(algorithm.lua)!}`;
  }
  return last === undefined ? `${out}${indent}end\n` : `${out}${indent}else\n${last}${indent}end\n`;
}

/** Every algorithm's `pick` part that it has, one after the other. */
function each(
  algorithms: readonly AlgorithmDescriptor[],
  pick: (lua: LuaFragments) => string | undefined,
): string {
  return algorithms.map((algorithm) => pick(algorithm.lua) ?? '').join('');
}

/**
 * The state table's algorithm fields (`live = false, n = 0, ...`), each field once, in the order
 * the algorithms first name them.
 */
function stateFields(algorithms: readonly AlgorithmDescriptor[]): string {
  const fields = new Map<string, string>();
  for (const algorithm of algorithms) {
    for (const field of (algorithm.lua.state ?? '').split(',')) {
      const text = field.trim();
      if (text === '') continue;
      const name = text.split('=')[0]!.trim();
      if (!fields.has(name)) fields.set(name, text);
    }
  }
  return [...fields.values()].map((text) => ', ' + text).join('');
}

/**
 * The apply script for `algorithms`; see the module header for KEYS, ARGV and the reply, and
 * {@link LuaFragments} for each algorithm's parts.
 *
 * It defines no function on the hot path: Redis runs the whole chunk on every call, and each
 * closure or table of functions made there is paid per call (defining the algorithms as tables
 * of functions cost more Redis CPU than a fixed_window check itself). Each step is instead a
 * branch on the algorithm code, in three passes per request: load (once per call), refresh and
 * check every spec; charge them when the request is admitted; write its results. The `finish`
 * parts run once, after the last request. Numbers go to `redis.call` as Lua numbers: Redis
 * writes them with `%.17g`, exact for the integers (below 2^53) used here.
 *
 * Locals the algorithms' parts may use: `now`, `dry`, `grace`, `floor`, `ceil`, `fmod`, `n` (specs
 * in the call), `states` (key -> state, kept for the whole call: a part must keep `st` and Redis
 * in step, or settle the difference in `finish`); per spec `i`, `a` (its algorithm code), `key`,
 * `hits`; in pass 1 also `limit`, `w`, `burst`, `st` (the key's state: `key`, `w`, `t` hits
 * counted, `cum`, `r` the request that last checked it, and the algorithm's own fields) and
 * `cum`; in pass 2 `limit`, `w`, `burst`, `st`; in pass 3 `limit`, `w`, `burst`, `st`, `hits`
 * (cumulative), `over`, `rem`, `reset`.
 */
export function assembleApplyScript(algorithms: readonly AlgorithmDescriptor[]): string {
  // The algorithms whose code some branch compares: they get their constant.
  const compared = new Set<AlgorithmDescriptor>();
  const part = (
    pick: (lua: LuaFragments) => string | undefined,
    indent: string,
    fallback?: string,
  ): string => branches(algorithms, pick, indent, compared, fallback);
  const scan = part((lua) => lua.scan, '  ');
  // The branch keywords at their depth in the request loop; the parts as they are written (a
  // part's own indent is that of the one-request script it was written for; Lua ignores it).
  const load = part((lua) => lua.load, '      ');
  const room = part((lua) => lua.room, '    ', '      room = st.t + cum <= limit\n');
  const charge = part((lua) => lua.charge, '        ');
  const result = part((lua) => lua.result, '    ');
  const named = algorithms.filter((algorithm) => compared.has(algorithm));
  const names = named.map(codeName).join(', ');
  const codes = named.map((algorithm) => algorithm.redisCode).join(', ');
  return `
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
${named.length === 0 ? '' : `local ${names} = ${codes}\n`}${each(algorithms, (lua) => lua.constants)}
-- The counters, one per key: algorithm, limit, window, burst; whether lacking room rejects
-- (enforced), whether it is a quota counter, and its quota group (nil: none).
local C = #KEYS
local CA, CL, CW, CB, CE, CQ, CG = {}, {}, {}, {}, {}, {}, {}
for c = 1, C do
  local o = ${HEADER_ARGS} + (c - 1) * ${ARGS_PER_COUNTER}
  CA[c], CL[c], CW[c], CB[c] =
    tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
  local mode = ARGV[o + 5]
  CE[c] = mode == '${MODE_CODES.enforced}'
  CQ[c] = string.sub(mode, 1, 1) == '${MODE_CODES.quota}'
  if #mode > 1 then CG[c] = string.sub(mode, 2) end
end
-- The requests: each its number of specs, then per spec its counter and hits.
local p = ${HEADER_ARGS} + C * ${ARGS_PER_COUNTER} + 1
local R = tonumber(ARGV[p])
local SC, SH, LAST = {}, {}, {}
local n = 0
for r = 1, R do
  p = p + 1
  local m = tonumber(ARGV[p])
  for _ = 1, m do
    n = n + 1
    SC[n], SH[n] = tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2])
    p = p + 2
  end
  LAST[r] = n
end
local ST, CUM, OVER = {}, {}, {}
local states = {}
${each(algorithms, (lua) => lua.setup)}${
    scan === ''
      ? ''
      : `for i = 1, n do
  local c = SC[i]
  local a, key, hits = CA[c], KEYS[c], SH[i]
${scan}end
`
  }local reply = {}
local at = 0
-- One request after the other, each all or nothing on the states the earlier ones left.
local last = 0
for r = 1, R do
  local first = last + 1
  last = LAST[r]
  local admitted = true
  -- Quota groups seen (group -> some counter of it lacks room); nil when there are none.
  local groups = nil

  -- Pass 1: load and refresh each key once per call, then check each spec against the
  -- cumulative hits of its key so far in this request.
  for i = first, last do
    local c = SC[i]
    local a, limit, w, burst = CA[c], CL[c], CW[c], CB[c]
    local hits = SH[i]
    local key = KEYS[c]
    local st = states[key]
    if st == nil then
      st = { key = key, w = w, t = 0, cum = hits, r = r${stateFields(algorithms)} }
      states[key] = st
${load}    elseif st.r ~= r then
      st.r = r
      st.cum = hits
    else
      st.cum = st.cum + hits
    end
    ST[i] = st
    local cum = st.cum
    CUM[i] = cum
    local room
${room}    OVER[i] = not room
    if not room and CE[c] then admitted = false end
    local g = CG[c]
    if g then
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

  -- Pass 2: charge every spec of an admitted request (quota specs only when they had room).
  if admitted and not dry then
    for i = first, last do
      local c = SC[i]
      local hits = SH[i]
      if hits > 0 and not (OVER[i] and CQ[c]) then
        local a, limit, w, burst, st = CA[c], CL[c], CW[c], CB[c], ST[i]
        local key = st.key
${charge}      end
    end
  end

  -- Pass 3: the request's results, from each key's state after it.
  at = at + 1
  reply[at] = admitted and 1 or 0
  for i = first, last do
    local c = SC[i]
    local a, limit, w, burst = CA[c], CL[c], CW[c], CB[c]
    local st, hits, over = ST[i], CUM[i], OVER[i]
    local rem, reset = 0, 0
${result}    reply[at + 1] = over and 1 or 0
    reply[at + 2] = rem
    reply[at + 3] = reset
    at = at + 3
  end
end

${each(algorithms, (lua) => lua.finish)}return reply
`;
}

/** The script source, for every algorithm of the registry. */
export const APPLY_SCRIPT = assembleApplyScript(ALGORITHM_DESCRIPTORS);
