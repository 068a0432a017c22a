/**
 * What every counting algorithm shares: the shape of its state, of a decision, and of the
 * descriptor each algorithm module exports (name, key tag, Redis code, Lua fragments, config
 * bounds, steps). The algorithm modules next to this file are the normative definitions
 * (docs/semantics.md §4); index.ts lists them, and everything else is derived from that list.
 */

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
  // Stryker disable next-line ArrayDeclaration: an empty ring grows to this one-pair ring on the first push (pushPair, capacity 0: the two writes extend it).
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

/** The numbers of one limit that {@link LimitBounds.check} sees. */
export interface BoundedLimit {
  /** `requests_per_unit`. */
  readonly requestsPerUnit: number;
  /** `burst`; `undefined` when absent or not a valid count. */
  readonly burst: number | undefined;
  /** Whether the limit has a `burst` key at all (valid or not). */
  readonly burstWritten: boolean;
  /** Window length in ms (unit x unit_multiplier). */
  readonly windowMs: number;
}

/** A limit an algorithm cannot count (a config error, reported by config/validate.ts). */
export interface BoundProblem {
  /** The limit field the problem is reported under (its path ends in it). */
  readonly field: 'requests_per_unit' | 'burst';
  /** Where the source position points: the `burst` key, the `algorithm` key, or the limit. */
  readonly at: 'burst' | 'algorithm' | 'limit';
  /** What is wrong and what to write instead. */
  readonly message: string;
}

/** What config validation checks of a limit, per algorithm. */
export interface LimitBounds {
  /** Whether a limit of this algorithm may set `burst` (otherwise validation refuses it). */
  readonly acceptsBurst: boolean;
  /**
   * The problem with one limited limit (a known unit, not `unlimited`), or `undefined` when the
   * algorithm counts it exactly. Absent: every such limit is fine.
   */
  check?(limit: BoundedLimit): BoundProblem | undefined;
}

/**
 * The algorithm's part of the Redis store's apply script (stores/redis/apply-script.ts, which
 * assembles the whole script from these and documents KEYS, ARGV, the reply, and the locals each
 * part may use). Each part is Lua source, indented as it sits in the script; the script runs a
 * part only for the specs of its algorithm, so a part never tests the algorithm code itself.
 * Constants (sub-bucket counts, chunk sizes) are interpolated from the module's own TypeScript
 * constants, never written twice by hand. Every part shares one Lua chunk: chunk-level names an
 * algorithm declares (`constants`, `setup`) must differ from every other algorithm's (`sw_older`,
 * `fwtot`, `CHUNK`; a tag prefix is the safe choice), and a `finish` part must touch only its own
 * algorithm's states.
 */
export interface LuaFragments {
  /** Chunk-level locals and helper functions this algorithm's parts use (run once per call). */
  readonly constants?: string;
  /** Fields of the per-key state table `st` and their initial values, e.g. `'len = 0'`. */
  readonly state?: string;
  /** Locals set up after the shared ones, before any spec is looked at. */
  readonly setup?: string;
  /** A first look at each spec of this algorithm, before any key is read (`i`, `key`, `hits`). */
  readonly scan?: string;
  /**
   * Pass 1, first spec of a key in the call (a call may carry several requests): load `st` from
   * `key` and forget what has expired.
   */
  readonly load: string;
  /** Pass 1: set `room` for the cumulative hits `cum`; absent: `room = st.t + cum <= limit`. */
  readonly room?: string;
  /** Pass 2 (admitted, not dry): charge `hits` (> 0) to `st` and `key`. */
  readonly charge: string;
  /**
   * Once, after the last request of the call, whatever was decided: settle what the parts above
   * left pending (e.g. write a state charged several times once).
   */
  readonly finish?: string;
  /** Pass 3: set `rem` and `reset` for spec `i` (`over`, cumulative `hits`). */
  readonly result: string;
}

/**
 * One counting algorithm: everything the rest of the service needs to know about it, in its own
 * module. A new algorithm is a new module exporting one of these plus an entry in index.ts's list
 * (ARCHITECTURE.md, "Where does X go").
 */
export interface AlgorithmDescriptor<Name extends string = string> {
  /** `rate_limit.algorithm` and `DEFAULT_ALGORITHM` value (lower case). */
  readonly name: Name;
  /**
   * Short tag in every counter key (limiter/keys.ts) and the name of its Lua constant (upper
   * case): lower-case letters and digits, distinct among the algorithms. Changing it orphans
   * every stored counter.
   */
  readonly tag: string;
  /** Its code in the apply script's ARGV (a positive integer, distinct among the algorithms). */
  readonly redisCode: number;
  /** The memory-side definition. */
  readonly steps: CounterAlgorithm;
  /** What config validation checks of its limits. */
  readonly bounds: LimitBounds;
  /** Its part of the Redis apply script. */
  readonly lua: LuaFragments;
  /**
   * Whether the rate limit reset header counts to the end of the epoch-aligned window (as the
   * reference computes it for its fixed windows) instead of from the decision's reset.
   */
  readonly alignedResetHeader: boolean;
}
