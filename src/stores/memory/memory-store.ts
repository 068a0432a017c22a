/**
 * The in-memory counter store (docs/semantics.md §3): one process, no setup.
 *
 * Layout (docs/operations.md, capacity planning): one `Map` from counter key to a slot number,
 * and the counters of every slot in columns of typed arrays, so a quiet counter costs a few
 * dozen bytes next to its key instead of a JavaScript object, an array and their headers:
 * - `total`, `emptyAt` (Float64): the algorithm state's `total` and `emptyAtMs`;
 * - `meta` (Uint8): the state's shape: no stored pair, or one pair (sliding window or log), or
 *   {@link WIDE} (several pairs: the whole state object lives in a side `Map`; busy counters
 *   only); plus a "used since the clock hand last passed" bit;
 * - `limit` (Uint32): the limit of the last charge, for the debug view (MAX_UINT32 at most).
 * What else a quiet state holds (`stampMs`, or the first number of its one pair, whose second is
 * `total`) is implied by those (`CounterAlgorithm.impliedFirst`); a state for which it is not
 * is kept {@link WIDE}. Free slots are chained through `total`. The algorithms (src/algorithms)
 * work on `CounterState` objects: `apply()` loads each counter of the batch into a reused
 * scratch state, runs the steps, and writes the state back. The whole check-then-charge runs
 * synchronously, so it is atomic with respect to every other call.
 *
 * Memory stays bounded two ways, neither of which ever scans the whole map at once:
 * - idle reclaim: a cursor walks the map a few entries per `apply()` call (and a bounded batch
 *   per tick of an optional unref'd timer), deleting entries whose every bucket has expired;
 * - two caps: on the count of counters (`maxKeys`, `MEMORY_MAX_KEYS`) and on the bytes they hold
 *   (`maxBytes`, `MEMORY_MAX_BYTES`), key text included, so that long descriptor values cannot
 *   exhaust the heap under the count cap. Each counter is counted at {@link COUNTER_BYTES} plus
 *   its key's characters (two bytes each when the key has one outside ASCII, as V8 then stores
 *   the whole string), and a {@link WIDE} one also at {@link WIDE_STATE_BYTES} plus its ring's
 *   numbers. The byte count is kept up to date at each insert, removal and ring growth, in O(1)
 *   and without allocating; a key that is not ASCII is found once, when it is inserted.
 *   Inserting a new counter into a full map (by either cap) first evicts an expired counter,
 *   else one not used recently, chosen by the CLOCK (second chance) approximation of
 *   least-recently-used: a hand walks the map in insertion order,
 *   clearing the "used" bit of each counter it passes and evicting the first one found without
 *   it (after {@link CAP_SCAN_LIMIT} counters, the one under the hand). Every access after the
 *   first sets the bit, so a counter in use survives a full turn of the hand, and a flood of keys
 *   seen once evicts its own kind first. Exact LRU needs a key reference
 *   and two links per counter (16 more bytes each); the approximation keeps them out.
 *   Re-inserting a key into the `Map` on each access (the `Map` order as the LRU order) is no
 *   option: V8's ordered hash table leaves a deleted entry in its bucket chain until the next
 *   rehash, so one hot key's chain grows with every request (measured: lookups ~35x slower).
 */
import { getHeapStatistics } from 'node:v8';
import type { Clock } from '../../clock.js';
import {
  ALGORITHM_STEPS,
  cloneCounterState,
  createCounterState,
  type CounterState,
} from '../../algorithms/index.js';
import { SluiceError } from '../../errors.js';
import { MAX_UINT32 } from '../../model.js';
import type {
  BatchResult,
  CounterResult,
  CounterSnapshot,
  CounterSpec,
  CounterStore,
} from '../counter-store.js';
import { admits, BatchKeys, charges } from '../batch.js';

/** Why counters were dropped: all their hits had expired, or the key cap forced out live ones. */
export type EvictReason = 'expired' | 'lru';

/** Default of `maxKeys` (the `MEMORY_MAX_KEYS` setting's default). */
export const DEFAULT_MAX_KEYS = 1_000_000;

/**
 * Default of `maxBytes` (the `MEMORY_MAX_BYTES` setting's default): half of V8's heap limit
 * (`heap_size_limit`, which `--max-old-space-size` sets), leaving the other half to the rest of
 * the process (rules, requests in flight, garbage not yet collected).
 */
export function defaultMaxBytes(): number {
  return Math.floor(getHeapStatistics().heap_size_limit / 2);
}

/**
 * Bytes a counter is counted at besides its key's characters: its `Map` entry, its cells in the
 * columns and the key string's headers. Measured from about 60 (many counters) to 140 (a little
 * over a power of two, where the `Map` and the columns have just doubled); the parts add up to
 * about 150 at worst, and this leaves a margin above that, so what is counted is never less than
 * what is held (docs/operations.md, "Capacity planning").
 */
const COUNTER_BYTES = 192;

/**
 * Bytes a {@link WIDE} counter's state is counted at besides its ring's numbers: the object and
 * its boxed numbers, the ring array's headers and the side map's entry (measured about 200).
 */
const WIDE_STATE_BYTES = 256;

/** Bytes per number of a wide state's ring (a double each). */
const RING_NUMBER_BYTES = 8;

/** Default of `sweepBatch`. */
export const DEFAULT_SWEEP_BATCH = 8;

/** Default of `sweepIntervalMs`. */
export const DEFAULT_SWEEP_INTERVAL_MS = 1_000;

/** Default of `timerSweepBatch`. */
export const DEFAULT_TIMER_SWEEP_BATCH = 10_000;

/** Most counters the cap examines for an expired one before the clock hand picks a live one. */
const EXPIRED_SCAN_LIMIT = 16;

/** Most counters the clock hand examines for one eviction before it takes the one it is at. */
const CAP_SCAN_LIMIT = 64;

/**
 * Most counters the clock hand examines for one eviction in all: past {@link CAP_SCAN_LIMIT} it
 * only skips limiting counters, and when it finds nothing else the new key is not stored.
 */
const LIMITING_SCAN_LIMIT = 256;

/** Options for {@link createMemoryStore}. */
export interface MemoryStoreOptions {
  /** Time source (epoch ms) used for every decision and for expiry. */
  clock: Clock;
  /**
   * Most counters held at once (>= 1); `undefined` means {@link DEFAULT_MAX_KEYS}. It should be
   * well above the number of distinct keys one request can touch: a cap below that would evict
   * counters of the batch being charged.
   */
  maxKeys?: number;
  /**
   * Most bytes the counters may hold at once, as counted (see the module header: a fixed cost
   * per counter, its key's text, a busy counter's state); `undefined` means
   * {@link defaultMaxBytes}. When a single new key needs more than this, it is decided as a
   * fresh counter and not stored.
   */
  maxBytes?: number;
  /**
   * Entries the idle-reclaim cursor examines per `apply()` call, on top of one per spec of the
   * call (so the cursor always outpaces insertions); `undefined` means {@link DEFAULT_SWEEP_BATCH}.
   */
  sweepBatch?: number;
  /**
   * Period in ms of the unref'd background sweep that reclaims idle entries when no traffic
   * arrives; 0 disables it; `undefined` means {@link DEFAULT_SWEEP_INTERVAL_MS}.
   */
  sweepIntervalMs?: number;
  /**
   * Entries examined per background sweep tick; `undefined` means
   * {@link DEFAULT_TIMER_SWEEP_BATCH}.
   */
  timerSweepBatch?: number;
  /**
   * Called after entries were dropped, with how many and why (`expired`: idle reclaim, or the
   * cap dropping an already expired entry; `lru`: the cap dropping a live counter, whose hits
   * are then forgotten). At most one call per reason per `apply()` or sweep tick. Must not
   * throw; an exception is ignored. `undefined`: evictions are not reported.
   */
  onEvict?: (reason: EvictReason, count: number) => void;
  /**
   * Called with how many new counters were decided but not stored because the map was full of
   * counters that are limiting someone (see {@link createMemoryStore}). At most one call per
   * `apply()`. Must not throw; an exception is ignored. `undefined`: not reported.
   */
  onNotStored?: (count: number) => void;
}

/**
 * Create an in-memory {@link CounterStore}.
 *
 * `apply()` semantics, in order:
 * 1. every spec is checked against its counter's live total (expired buckets evicted first).
 *    When the same key appears more than once in a batch, specs are checked in order against a
 *    tentative total that includes the hits of the earlier specs on that key, so spec `i` has
 *    room iff `live + (hits of specs <= i on that key) <= its limit`;
 * 2. if every `enforced` spec has room and the quota rule admits (`quotaRejects`: not every
 *    quota group is over), every spec with hits > 0 is charged (`shadow` ones even
 *    when over, `quota` ones only when they have room); otherwise none is, and no entry is
 *    created;
 * 3. each result is read from the counter as it is after the batch: `remaining` is
 *    `limit - total` (0 when over), `resetMs` as in `CounterResult`, where "the same hits" of a
 *    repeated key means the cumulative hits of step 1.
 *
 * At either cap (`maxKeys` counters, `maxBytes` bytes), a new counter takes the place of an
 * expired one, else of one not used recently (CLOCK), as many as it takes to fit (one long key
 * may displace several short ones), but never of a counter that is limiting someone: one whose
 * last decision left it without room (over its limit, or exactly at it) stays until it expires,
 * so no flood of new keys, sent once or many times, resets a client that is being rejected. When
 * the clock hand finds only limiting counters within {@link LIMITING_SCAN_LIMIT}, the new counter
 * is decided as a fresh one and not stored (counted through `onNotStored`): its request is
 * answered as a first request would be, and charges nothing that lasts (docs/operations.md,
 * "Memory"). When the rings of busy counters grow the bytes held past `maxBytes`, counters are
 * dropped by the same rules at the end of that call.
 *
 * `size()` counts the entries held, which includes entries that have expired but have not yet
 * been reached by the reclaim cursor. Specs with the same key must have the same algorithm and
 * window (the key includes both). `close()` stops the timer and drops every counter.
 */
export function createMemoryStore(options: MemoryStoreOptions): CounterStore {
  return new MemoryStore(options);
}

/** Each result object's initial shape; results are fresh objects because callers keep them. */
function newResult(): CounterResult {
  // Stryker disable next-line ObjectLiteral,BooleanLiteral: every algorithm's result() writes all three fields; the literal only gives every result one shape
  return { overLimit: false, remaining: 0, resetMs: 0 };
}

/** Stands in for a counter that does not exist (and is not created): nothing counted. */
const EMPTY: CounterState = createCounterState();

/** Shape of a slot with no stored pair (`stampMs` implied). */
const FLAT = 0;
/** Shape of a slot with one stored pair (its first number implied, its second is `total`). */
const ONE_PAIR = 1;
/** Shape of a slot whose state object lives in the side map (several stored pairs). */
const WIDE = 2;
/** The bits of `meta` that hold the shape. */
const SHAPE = 3;
/** The bit of `meta` set by every access and cleared by the passing clock hand. */
const USED = 4;
/**
 * The bit of `meta` set when the counter's last decision left it without room (over its limit,
 * or at it): such a counter is limiting someone, and the cap never evicts it before it expires.
 */
const LIMITING = 8;
/**
 * The bit of `meta` set when the key has a character outside ASCII, so V8 may hold it at two
 * bytes per character: the key is counted so (see `counterBytes`).
 */
const TWO_BYTE_KEY = 16;
/** The bits of `meta` that {@link MemoryStore.save} keeps. */
const FLAGS = USED | LIMITING | TWO_BYTE_KEY;

/** No slot (end of a list, or a counter that does not exist). */
const NONE = -1;

/** Slots allocated when the first counter arrives; the columns double from there. */
const INITIAL_CAPACITY = 1024;

/**
 * Most a counter's `total` reaches (2^53 - 1): a charge that would pass it is cut to fit, so every
 * total stays an exact integer (docs/semantics.md, "Hits").
 */
const MAX_EXACT_TOTAL = Number.MAX_SAFE_INTEGER;

class MemoryStore implements CounterStore {
  private readonly clock: Clock;
  private readonly maxKeys: number;
  private readonly maxBytes: number;
  /** Bytes held as counted (see the module header); at most `maxBytes` after every call. */
  private bytes = 0;
  private readonly sweepBatch: number;
  private readonly timerSweepBatch: number;
  private readonly onEvict: (reason: EvictReason, count: number) => void;
  private readonly onNotStored: (count: number) => void;
  /** Counter key to slot. */
  private readonly slots = new Map<string, number>();
  /** State objects of {@link WIDE} slots. */
  private readonly wide = new Map<number, CounterState>();

  // The columns, indexed by slot (see the header).
  private total = new Float64Array(0);
  private emptyAt = new Float64Array(0);
  private meta = new Uint8Array(0);
  private limit = new Uint32Array(0);
  /** Slots below this have been handed out at least once. */
  private used = 0;
  /** First free slot below `used` (chained through `total`), or NONE. */
  private freeHead = NONE;

  /** The idle-reclaim cursor. */
  private cursor: Iterator<[string, number]> | undefined;
  /** The cap's clock hand. */
  private hand: Iterator<[string, number]> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private evictedExpired = 0;
  private evictedLru = 0;
  private notStored = 0;

  // Per-batch scratch, reused across calls (apply() is synchronous, so never shared).
  // What the per-position arrays below start with is never seen: every position below a batch's
  // count is written before it is read.
  /** The state each spec works on: a scratch state loaded from the columns, or a wide state. */
  // Stryker disable next-line ArrayDeclaration: written before read (above)
  private readonly states: (CounterState | undefined)[] = [];
  /** Scratch states, one per batch position, each with its own two-number ring. */
  private readonly scratch: CounterState[] = [];
  private readonly scratchRings: number[][] = [];
  /** Slot of each spec's counter, NONE when it does not exist (yet). */
  // Stryker disable next-line ArrayDeclaration: written before read (above)
  private readonly slotOf: number[] = [];
  /** How the batch's specs share keys, and the cumulative hits each is checked with. */
  private readonly batchKeys = new BatchKeys();
  // Stryker disable next-line ArrayDeclaration: written before read (above)
  private readonly over: boolean[] = [];
  /** Whether any spec on the key of each first spec was left without room. */
  // Stryker disable next-line ArrayDeclaration: written before read (above)
  private readonly limitingOf: boolean[] = [];
  /**
   * The cap may have removed a counter while this batch was applied (see `owns`). Only saves map
   * lookups: set, `owns` asks the map, whose answer is then what the flag being clear implies.
   */
  // Stryker disable next-line BooleanLiteral: only saves lookups (above)
  private removedInBatch = false;

  constructor(options: MemoryStoreOptions) {
    this.clock = options.clock;
    this.maxKeys = Math.max(1, Math.floor(options.maxKeys ?? DEFAULT_MAX_KEYS));
    this.maxBytes = Math.max(0, Math.floor(options.maxBytes ?? defaultMaxBytes()));
    this.sweepBatch = Math.max(0, Math.floor(options.sweepBatch ?? DEFAULT_SWEEP_BATCH));
    this.timerSweepBatch = Math.max(
      1,
      Math.floor(options.timerSweepBatch ?? DEFAULT_TIMER_SWEEP_BATCH),
    );
    this.onEvict = options.onEvict ?? ignore;
    this.onNotStored = options.onNotStored ?? ignore;
    const intervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (intervalMs > 0) {
      this.timer = setInterval(() => this.sweepTick(), intervalMs);
      this.timer.unref();
    }
  }

  apply(specs: readonly CounterSpec[]): Promise<BatchResult> {
    try {
      return Promise.resolve(this.applyNow(specs));
    } catch (error) {
      return Promise.reject(SluiceError.from(error));
    }
  }

  size(): number {
    return this.slots.size;
  }

  healthy(): boolean {
    return true;
  }

  top(n: number): CounterSnapshot[] {
    const now = Math.floor(this.clock());
    const limit = Math.max(0, Math.floor(n));
    const { total, emptyAt } = this;
    // The n busiest so far (slots and keys), busiest first, ties in map order; one pass over the
    // map. A counter no busier than the last of a full list is passed over at once: only a
    // shortcut (it would go in at the end and out again), but one that keeps a scrape of a store
    // of a million counters from splicing for each of them.
    const best: number[] = [];
    const keys: string[] = [];
    for (const [key, slot] of this.slots) {
      if (emptyAt[slot]! <= now) continue;
      const count = total[slot]!;
      if (best.length === limit && count <= total[best[limit - 1]!]!) continue;
      let at = best.length;
      while (at > 0 && total[best[at - 1]!]! < count) at--;
      best.splice(at, 0, slot);
      keys.splice(at, 0, key);
      if (best.length > limit) {
        best.pop();
        keys.pop();
      }
    }
    return best.map((slot, at) => ({
      key: keys[at]!,
      count: total[slot]!,
      limit: this.limit[slot]!,
      expiresInMs: Math.max(0, emptyAt[slot]! - now),
    }));
  }

  reset(key: string): Promise<boolean> {
    const slot = this.slots.get(key);
    if (slot === undefined) return Promise.resolve(false);
    this.remove(slot, key);
    return Promise.resolve(true);
  }

  close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.cursor = undefined;
    this.hand = undefined;
    this.slots.clear();
    this.wide.clear();
    this.used = 0;
    this.freeHead = NONE;
    this.bytes = 0;
    this.total = new Float64Array(0);
    this.emptyAt = new Float64Array(0);
    this.meta = new Uint8Array(0);
    this.limit = new Uint32Array(0);
    return Promise.resolve();
  }

  /**
   * `apply()` without the promise: the same decision, returned synchronously (the limiter uses
   * it to answer without a promise hop; see `CounterStore.applyNow`). Throws on a bug only.
   */
  applyNow(specs: readonly CounterSpec[]): BatchResult {
    const now = Math.floor(this.clock());
    const count = specs.length;
    const slots = this.slots;
    const { states, slotOf, over, limitingOf } = this;
    // The batch rule (stores/batch.ts): specs sharing a key are checked with cumulative hits.
    const batchKeys = this.batchKeys;
    batchKeys.group(specs);
    const { firstOf, cumHits } = batchKeys;

    this.sweep(now, this.sweepBatch + count);

    // Check every spec before charging any.
    for (let i = 0; i < count; i++) {
      const spec = specs[i]!;
      const first = firstOf[i]!;
      let state: CounterState | undefined;
      if (first === i) {
        const key = spec.key;
        let slot = slots.get(key) ?? NONE;
        if (slot !== NONE) {
          state = this.load(slot, i, spec);
          ALGORITHM_STEPS[spec.algorithm].refresh(state, now, spec);
          if (state.emptyAtMs <= now) {
            // Expired: forget it now, so a rejected request does not keep it and the cap's
            // reclaim cannot delete it from under the charge below; charging recreates it.
            this.remove(slot, key);
            slot = NONE;
            state = undefined;
            this.evictedExpired++;
          } else {
            // Any access counts as use: a key that is being rejected is exactly one whose
            // count must survive the cap.
            this.meta[slot] = this.meta[slot]! | USED;
          }
        }
        slotOf[i] = slot;
      } else {
        state = states[first];
        slotOf[i] = NONE;
      }
      states[i] = state;
      over[i] = !ALGORITHM_STEPS[spec.algorithm].hasRoom(state ?? EMPTY, now, cumHits[i]!, spec);
    }
    const admitted = admits(specs, over);

    if (admitted) {
      for (let i = 0; i < count; i++) {
        const spec = specs[i]!;
        if (!charges(spec, over[i]!)) continue;
        const first = firstOf[i]!;
        let state = states[first];
        if (state === undefined) {
          // The first spec on this key owns the new slot; later duplicates share its state.
          const slot = this.insert(spec.key, now);
          slotOf[first] = slot;
          state = slot === NONE ? this.fresh(first) : this.load(slot, first, spec);
          states[first] = state;
        }
        states[i] = state;
        // Saturate below 2^53, where doubles stop counting exactly: only a shadow counter far
        // over its limit gets near it (every charge is at most MAX_UINT32 from the limiter).
        const room = MAX_EXACT_TOTAL - state.total;
        const ringLength = state.ring.length;
        ALGORITHM_STEPS[spec.algorithm].charge(state, now, Math.min(spec.hits, room), spec);
        const slot = slotOf[first]!;
        if (!this.owns(slot, spec.key)) continue;
        // A stored wide state grows its ring only here: count the growth at once, so a removal
        // always takes off what was counted. (A scratch state's ring is counted if it goes wide.)
        if ((this.meta[slot]! & SHAPE) === WIDE) {
          this.bytes += (state.ring.length - ringLength) * RING_NUMBER_BYTES;
        }
        // The cap's reclaim reads the column: a counter charged here must not look expired
        // to an insert later in this batch.
        this.emptyAt[slot] = state.emptyAtMs;
        this.limit[slot] = Math.min(spec.limit, MAX_UINT32);
      }
    }

    const results: CounterResult[] = [];
    for (let i = 0; i < count; i++) {
      const spec = specs[i]!;
      // A later duplicate may have created the state after this spec looked it up.
      const state = states[i] ?? states[firstOf[i]!] ?? EMPTY;
      const result = ALGORITHM_STEPS[spec.algorithm].result(
        state,
        now,
        cumHits[i]!,
        spec,
        over[i]!,
        newResult(),
      );
      results.push(result);
      // Duplicates come after their first spec, which resets the flag.
      const first = firstOf[i]!;
      const limiting = result.overLimit || result.remaining === 0;
      limitingOf[first] = first === i ? limiting : limitingOf[first] === true || limiting;
    }
    // Write every counter back to its columns (only first specs hold a slot), and drop
    // references so the scratch never keeps a deleted counter alive. A counter any of whose
    // specs was left without room is limiting someone.
    for (let i = 0; i < count; i++) {
      const slot = slotOf[i]!;
      const state = states[i];
      states[i] = undefined;
      if (this.owns(slot, specs[i]!.key)) {
        this.save(slot, state!, specs[i]!);
        const bits = this.meta[slot]! & ~LIMITING;
        this.meta[slot] = limitingOf[i] === true ? bits | LIMITING : bits;
      }
    }
    // Stryker disable next-line BooleanLiteral: only saves lookups (see the field)
    this.removedInBatch = false;
    // Busy counters' rings may have grown past the byte cap: shed counters as an insert would.
    this.shed(now);

    this.reportEvictions();
    return { admitted, results };
  }

  /**
   * `apply()` as a dry run (`CounterStore.check`, for the console's "try it"): the same steps as
   * {@link applyNow} (the batch rule of stores/batch.ts, each algorithm's refresh, room check,
   * charge and result) on copies of the counters, so nothing held changes: no charge, no expiry,
   * no use or limiting bit, no eviction. Allocates per call; never on the serving path.
   */
  check(specs: readonly CounterSpec[]): Promise<BatchResult> {
    const now = Math.floor(this.clock());
    const keys = new BatchKeys();
    keys.group(specs);
    const { firstOf, cumHits } = keys;
    const states: CounterState[] = [];
    const over: boolean[] = [];
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const first = firstOf[i]!;
      states[i] = first === i ? this.copyOf(spec, now) : states[first]!;
      over[i] = !ALGORITHM_STEPS[spec.algorithm].hasRoom(states[i]!, now, cumHits[i]!, spec);
    }
    const admitted = admits(specs, over);
    if (admitted) {
      specs.forEach((spec, i) => {
        if (!charges(spec, over[i]!)) return;
        const state = states[i]!;
        const hits = Math.min(spec.hits, MAX_EXACT_TOTAL - state.total);
        ALGORITHM_STEPS[spec.algorithm].charge(state, now, hits, spec);
      });
    }
    const results = specs.map((spec, i) =>
      ALGORITHM_STEPS[spec.algorithm].result(
        states[i]!,
        now,
        cumHits[i]!,
        spec,
        over[i]!,
        newResult(),
      ),
    );
    return Promise.resolve({ admitted, results });
  }

  /** A copy of the live state of `spec`'s counter, refreshed to `now`; empty when none or expired. */
  private copyOf(spec: CounterSpec, now: number): CounterState {
    const slot = this.slots.get(spec.key) ?? NONE;
    if (slot === NONE) return createCounterState();
    // Scratch slot 0 is free: no batch is running (both are synchronous).
    const state = cloneCounterState(this.load(slot, 0, spec));
    ALGORITHM_STEPS[spec.algorithm].refresh(state, now, spec);
    return state.emptyAtMs <= now ? createCounterState() : state;
  }

  /**
   * Whether `slot` is a slot (not NONE) that still holds the counter `key`. Only the cap's
   * removals during the batch can change that (a cap below the batch's key count evicting one of
   * its counters, whose charge is then forgotten), so the map is asked only after one.
   */
  private owns(slot: number, key: string): boolean {
    return slot !== NONE && (!this.removedInBatch || this.slots.get(key) === slot);
  }

  /** The state of `slot`: its wide state object, or scratch state `at` loaded from the columns. */
  private load(slot: number, at: number, spec: CounterSpec): CounterState {
    const shape = this.meta[slot]! & SHAPE;
    if (shape === WIDE) return this.wide.get(slot)!;
    const state = this.scratchState(at);
    const ring = state.ring;
    state.total = this.total[slot]!;
    state.emptyAtMs = this.emptyAt[slot]!;
    state.length = shape === ONE_PAIR ? 1 : 0;
    const first = ALGORITHM_STEPS[spec.algorithm].impliedFirst(state, spec);
    if (shape === ONE_PAIR) {
      ring[0] = first;
      ring[1] = state.total;
    } else {
      state.stampMs = first;
    }
    return state;
  }

  /** Scratch state `at`, empty (its own two-number ring, zeroed). */
  private scratchState(at: number): CounterState {
    const state = (this.scratch[at] ??= createCounterState());
    // An algorithm may have given the state a longer ring; it gets its own back.
    const ring = (this.scratchRings[at] ??= state.ring);
    state.ring = ring;
    state.head = 0;
    state.total = 0;
    state.emptyAtMs = 0;
    state.stampMs = 0;
    state.length = 0;
    ring[0] = 0;
    ring[1] = 0;
    return state;
  }

  /** The empty state of a counter decided without being stored (counted as not stored). */
  private fresh(at: number): CounterState {
    this.notStored++;
    return this.scratchState(at);
  }

  /**
   * Write `state` (as {@link load} returned it, then changed) back to the columns of `slot`,
   * keeping it {@link WIDE} when the columns cannot hold it.
   */
  private save(slot: number, state: CounterState, spec: CounterSpec): void {
    this.total[slot] = state.total;
    this.emptyAt[slot] = state.emptyAtMs;
    const meta = this.meta[slot]!;
    if ((meta & SHAPE) === WIDE) return;
    const used = meta & FLAGS;
    const length = state.length;
    if (length <= 1) {
      const first = ALGORITHM_STEPS[spec.algorithm].impliedFirst(state, spec);
      if (length === 0 && state.stampMs === first) {
        this.meta[slot] = FLAT | used;
        return;
      }
      const at = state.head << 1;
      if (
        length === 1 &&
        state.stampMs === 0 &&
        state.ring[at] === first &&
        state.ring[at + 1] === state.total
      ) {
        this.meta[slot] = ONE_PAIR | used;
        return;
      }
    }
    // Several pairs (or numbers the columns do not imply): the slot gets its own state object.
    const wide = cloneCounterState(state);
    this.wide.set(slot, wide);
    this.meta[slot] = WIDE | used;
    this.bytes += WIDE_STATE_BYTES + wide.ring.length * RING_NUMBER_BYTES;
  }

  /**
   * Add a new, empty counter for `key`, making room first; NONE (nothing added) when the map is
   * full of counters that are limiting someone.
   */
  private insert(key: string, now: number): number {
    // Reading a character makes V8 flatten a concatenated key (a rope of ~230 bytes for a
    // typical 40-character key) into one flat string (~60 bytes) before it is kept.
    key.charCodeAt(0);
    // UTF-8 is longer than the characters exactly when one is outside ASCII (one native pass,
    // once per key: a key is hashed and copied as often on its way here).
    const keyBits = Buffer.byteLength(key) === key.length ? FLAT : TWO_BYTE_KEY;
    const cost = counterBytes(key, keyBits);
    if (!this.makeRoom(now, cost)) return NONE;
    let slot = this.freeHead;
    if (slot !== NONE) {
      this.freeHead = this.total[slot]!;
    } else {
      // The columns' length is the capacity.
      if (this.used === this.total.length) this.grow();
      slot = this.used++;
    }
    this.total[slot] = 0;
    this.emptyAt[slot] = 0;
    // Not marked used: a counter earns its second chance by being used again, so a flood of
    // keys seen once never pushes out one in steady use.
    this.meta[slot] = FLAT | keyBits;
    this.limit[slot] = 0;
    this.slots.set(key, slot);
    this.bytes += cost;
    return slot;
  }

  /** Double the columns (never beyond `maxKeys` slots, which the cap keeps enough). */
  private grow(): void {
    const capacity = Math.max(
      1,
      Math.min(Math.max(INITIAL_CAPACITY, this.total.length * 2), this.maxKeys),
    );
    this.total = widen(this.total, new Float64Array(capacity));
    this.emptyAt = widen(this.emptyAt, new Float64Array(capacity));
    this.meta = widen(this.meta, new Uint8Array(capacity));
    this.limit = widen(this.limit, new Uint32Array(capacity));
  }

  /** Delete the counter `key` at `slot` from the map, and free the slot. */
  private remove(slot: number, key: string): void {
    const meta = this.meta[slot]!;
    let bytes = counterBytes(key, meta);
    if ((meta & SHAPE) === WIDE) {
      bytes += WIDE_STATE_BYTES + this.wide.get(slot)!.ring.length * RING_NUMBER_BYTES;
      this.wide.delete(slot);
    }
    this.bytes -= bytes;
    this.slots.delete(key);
    this.meta[slot] = FLAT;
    this.total[slot] = this.freeHead;
    this.emptyAt[slot] = 0;
    this.freeHead = slot;
  }

  /**
   * Examine up to `budget` entries at the cursor, deleting those whose hits all expired. At the
   * end of a pass the cursor restarts from the front on the next call, or at once when `wrap`.
   */
  private sweep(now: number, budget: number, wrap = false): void {
    for (let k = 0; k < budget; k++) {
      this.cursor ??= this.slots.entries();
      const next = this.cursor.next();
      if (next.done === true) {
        this.cursor = undefined;
        // With `wrap`, the budget bounds how often a tiny map is examined over.
        if (!wrap) return;
        continue;
      }
      const [key, slot] = next.value;
      if (this.emptyAt[slot]! <= now) {
        this.remove(slot, key);
        this.evictedExpired++;
      }
    }
  }

  /**
   * Make room for one new counter that will be counted at `cost` bytes, when the map is at either
   * cap: drop counters one by one with {@link evictOne} until it fits. Returns false, dropping
   * nothing more, when {@link evictOne} finds only limiting counters, or at once (dropping
   * nothing) when the counter alone is over the byte cap.
   */
  private makeRoom(now: number, cost: number): boolean {
    if (cost > this.maxBytes) return false;
    const slots = this.slots;
    while (slots.size >= this.maxKeys || this.bytes + cost > this.maxBytes) {
      // What goes may be a counter of the batch being applied, whose slot then is not its own
      // any more (see `owns`).
      this.removedInBatch = true;
      if (!this.evictOne(now)) return false;
    }
    return true;
  }

  /**
   * Drop counters with {@link evictOne} until the bytes held are within the cap again (after
   * busy counters' rings grew), or until only limiting counters are within its reach.
   */
  private shed(now: number): void {
    while (this.bytes > this.maxBytes) {
      if (!this.evictOne(now)) return;
    }
  }

  /**
   * Drop one counter or more: an expired counter found within {@link EXPIRED_SCAN_LIMIT} at the
   * reclaim cursor, else the clock hand walks on from where it stopped, dropping the first
   * counter that has expired or was not used since it was created or the hand last passed it
   * (clearing the used bit of the others), and after {@link CAP_SCAN_LIMIT} counters the first
   * one it reaches that is not limiting. A limiting counter (see {@link LIMITING}) is never
   * dropped before it expires. An expired counter counts as `expired`, any other as `lru`.
   * Returns false, dropping nothing live, when the hand found only limiting counters within
   * {@link LIMITING_SCAN_LIMIT}.
   */
  private evictOne(now: number): boolean {
    const { slots, meta, emptyAt } = this;
    // An expired counter first, within a bounded look at the reclaim cursor.
    const before = slots.size;
    this.sweep(now, EXPIRED_SCAN_LIMIT, true);
    if (slots.size < before) return true;
    for (let k = 0; ; k++) {
      // A small map of limiting counters is passed over until then, as a large one is.
      if (k >= LIMITING_SCAN_LIMIT) return false;
      this.hand ??= slots.entries();
      const next = this.hand.next();
      if (next.done === true) {
        this.hand = undefined;
        continue;
      }
      const [key, slot] = next.value;
      if (emptyAt[slot]! <= now) {
        this.remove(slot, key);
        this.evictedExpired++;
        return true;
      }
      const bits = meta[slot]!;
      if ((bits & LIMITING) !== 0) continue;
      if ((bits & USED) === 0 || k >= CAP_SCAN_LIMIT) {
        this.remove(slot, key);
        this.evictedLru++;
        return true;
      }
      meta[slot] = bits & ~USED;
    }
  }

  private sweepTick(): void {
    this.sweep(Math.floor(this.clock()), this.timerSweepBatch);
    this.reportEvictions();
  }

  private reportEvictions(): void {
    const onEvict = this.onEvict;
    const expired = this.evictedExpired;
    const lru = this.evictedLru;
    const notStored = this.notStored;
    this.evictedExpired = 0;
    this.evictedLru = 0;
    this.notStored = 0;
    try {
      if (expired > 0) onEvict('expired', expired);
      if (lru > 0) onEvict('lru', lru);
      if (notStored > 0) this.onNotStored(notStored);
    } catch {
      // A failing metrics sink must not fail a decision that has already been charged.
    }
  }
}

/**
 * Bytes a counter of `key` is counted at, without a wide state: {@link COUNTER_BYTES} plus its
 * characters, at two bytes each when `meta` has {@link TWO_BYTE_KEY}, rounded up to the 8 bytes
 * V8 aligns a string to.
 */
function counterBytes(key: string, meta: number): number {
  const chars = (meta & TWO_BYTE_KEY) === 0 ? key.length : key.length * 2;
  return COUNTER_BYTES + ((chars + 7) & ~7);
}

/** The callback an option left out stands for. */
function ignore(): void {}

/** `into` (a larger column) with `from`'s cells copied to its start. */
function widen<T extends Float64Array | Uint8Array | Int32Array | Uint32Array>(
  from: T,
  into: T,
): T {
  into.set(from);
  return into;
}
