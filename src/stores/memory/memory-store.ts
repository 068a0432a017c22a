/**
 * The in-memory counter store (docs/semantics.md §3): one process, no setup.
 *
 * Three rooms: the counters' map and columns and the bytes they are counted at
 * (`counter-columns.ts`), the caps and the idle reclaim that keep them bounded (`counter-cap.ts`),
 * and here the decision: `apply()` loads each counter of the batch into a reused scratch state,
 * runs the algorithm's steps (src/algorithms), and writes the state back. The whole
 * check-then-charge runs synchronously, so it is atomic with respect to every other call.
 */
import type { Clock } from '../../clock.js';
import {
  ALGORITHM_STEPS,
  cloneCounterState,
  createCounterState,
  type CounterState,
} from '../../algorithms/index.js';
import { MAX_UINT32 } from '../../model.js';
import type {
  BatchResult,
  CounterResult,
  CounterSnapshot,
  CounterSpec,
  CounterStore,
} from '../counter-store.js';
import { admits, applyThroughNow, BatchKeys, charges } from '../batch.js';
import { CappedColumns } from './counter-cap.js';
import { oldSpaceLimit, processOldSpaceLimit, type HeapFigures } from './old-space.js';
import { LIMITING, NONE, RING_NUMBER_BYTES, SHAPE, USED, WIDE } from './counter-columns.js';

/** Why counters were dropped: all their hits had expired, or the key cap forced out live ones. */
export type EvictReason = 'expired' | 'lru';

/** Default of `maxKeys` (the `MEMORY_MAX_KEYS` setting's default). */
export const DEFAULT_MAX_KEYS = 1_000_000;

/**
 * Default of `maxBytes` (the `MEMORY_MAX_BYTES` setting's default): half of the old-space limit
 * (`--max-old-space-size`; see `old-space.ts`), leaving the other half of the old space to the
 * rest of the process (rules, requests in flight, garbage not yet collected). Not half the heap
 * limit: that includes the young generation, which is 192 MiB on Node 24, and let a full store
 * fill the old space.
 */
export function defaultMaxBytes(figures?: HeapFigures): number {
  return Math.floor((figures === undefined ? processOldSpaceLimit() : oldSpaceLimit(figures)) / 2);
}

/** Default of `sweepBatch`. */
export const DEFAULT_SWEEP_BATCH = 8;

/** Default of `sweepIntervalMs`. */
export const DEFAULT_SWEEP_INTERVAL_MS = 1_000;

/** Default of `timerSweepBatch`. */
export const DEFAULT_TIMER_SWEEP_BATCH = 10_000;

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
   * Most bytes the counters may hold at once, as counted (see `counter-columns.ts`: a fixed cost
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
 * the clock hand finds only limiting counters within 256 (`counter-cap.ts`), the new counter
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

/**
 * Most a counter's `total` reaches (2^53 - 1): a charge that would pass it is cut to fit, so every
 * total stays an exact integer (docs/semantics.md, "Hits").
 */
const MAX_EXACT_TOTAL = Number.MAX_SAFE_INTEGER;

/**
 * The store: the decision of a batch over {@link CappedColumns}, the debug view, the background
 * sweep, and the reports of what the cap dropped.
 */
class MemoryStore extends CappedColumns implements CounterStore {
  private readonly clock: Clock;
  private readonly sweepBatch: number;
  private readonly timerSweepBatch: number;
  private readonly onEvict: (reason: EvictReason, count: number) => void;
  private readonly onNotStored: (count: number) => void;
  private timer: NodeJS.Timeout | undefined;

  // Per-batch scratch, reused across calls (apply() is synchronous, so never shared).
  // What the per-position arrays below start with is never seen: every position below a batch's
  // count is written before it is read.
  /** The state each spec works on: a scratch state loaded from the columns, or a wide state. */
  // Stryker disable next-line ArrayDeclaration: written before read (above)
  private readonly states: (CounterState | undefined)[] = [];
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

  constructor(options: MemoryStoreOptions) {
    super(
      Math.max(1, Math.floor(options.maxKeys ?? DEFAULT_MAX_KEYS)),
      Math.max(0, Math.floor(options.maxBytes ?? defaultMaxBytes())),
    );
    this.clock = options.clock;
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
    return applyThroughNow(this, specs);
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
    this.clear();
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
    const { firstOf, cumHits } = batchKeys;
    // One spec (a request with one descriptor, the usual case) is its own first spec, checked with
    // its own hits: saves the hot path a call that V8 does not inline here.
    // Stryker disable next-line ConditionalExpression: only saves a call, group() gives one spec the same
    if (count === 1) {
      firstOf[0] = 0;
      cumHits[0] = specs[0]!.hits;
    } else {
      batchKeys.group(specs);
    }

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
    // The batch rule's one copy (stores/batch.ts), as the Redis store's client side uses it.
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

    // Sized up front: an empty array grows a larger backing store on its first push.
    // Stryker disable next-line ArrayDeclaration: preallocation only; every index is written below
    const results = new Array<CounterResult>(count);
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
      results[i] = result;
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
    // Both calls are made only when there is work for them, which keeps them out of the inlining
    // budget (see the check loop above).
    // Stryker disable next-line ConditionalExpression,EqualityOperator: shed() itself stops at the cap
    if (this.bytes > this.maxBytes) this.shed(now);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: reportEvictions() skips zero counts
    if (this.evictedExpired > 0 || this.evictedLru > 0 || this.notStored > 0) {
      this.reportEvictions();
    }
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

/** The callback an option left out stands for. */
function ignore(): void {}
