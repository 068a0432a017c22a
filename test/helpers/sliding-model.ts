/**
 * A deliberately plain brute-force model of the sliding window (docs/semantics.md §4) and of the memory
 * store's batch semantics, used to cross-check src/algorithms/sliding-window.ts and
 * src/stores/memory. It keeps every admitted (timestamp, hits) pair and recomputes everything
 * by scanning them with the same sub-bucket expiry rule: a hit at `t` counts at `now` while
 * `floor(now / b) <= floor(t / b) + 20`, with `b = windowMs / 20`.
 */
import type { BatchResult, CounterResult, CounterSpec } from '../../src/stores/counter-store.js';

/** One admitted charge. */
export interface ModelHit {
  /** Epoch ms (integer) at which it was charged. */
  readonly atMs: number;
  /** Hits charged. */
  readonly hits: number;
}

/** The model of one counter: every charge it ever received. */
export class ModelCounter {
  /** Every charge, oldest first. */
  readonly charges: ModelHit[] = [];

  constructor(readonly windowMs: number) {}

  /** Sub-bucket length in ms. */
  get bucketMs(): number {
    return this.windowMs / 20;
  }

  /** Whether a hit charged at `atMs` still counts at `nowMs`. */
  isLive(atMs: number, nowMs: number): boolean {
    return Math.floor(nowMs / this.bucketMs) <= Math.floor(atMs / this.bucketMs) + 20;
  }

  /** The time (ms) at which a hit charged at `atMs` stops counting. */
  expiryOf(atMs: number): number {
    return (Math.floor(atMs / this.bucketMs) + 21) * this.bucketMs;
  }

  /** Hits counted at `nowMs`. */
  totalAt(nowMs: number): number {
    let total = 0;
    for (const charge of this.charges) if (this.isLive(charge.atMs, nowMs)) total += charge.hits;
    return total;
  }

  /** Record a charge. */
  charge(nowMs: number, hits: number): void {
    this.charges.push({ atMs: nowMs, hits });
  }

  /**
   * The smallest wait `w` >= 0 such that `totalAt(now + w) + hits <= limit`, trying every
   * moment the total can change; `windowMs` when `hits > limit` (never).
   */
  waitFor(nowMs: number, hits: number, limit: number): number {
    if (hits > limit) return this.windowMs;
    if (this.totalAt(nowMs) + hits <= limit) return 0;
    const moments = this.charges
      .filter((c) => this.isLive(c.atMs, nowMs))
      .map((c) => this.expiryOf(c.atMs))
      .sort((a, b) => a - b);
    for (const at of moments) if (this.totalAt(at) + hits <= limit) return at - nowMs;
    throw new Error('model: no moment frees enough');
  }

  /** Time until the oldest live hit expires, 0 when nothing counts. */
  nextGrowth(nowMs: number): number {
    let earliest = Infinity;
    for (const c of this.charges) {
      if (this.isLive(c.atMs, nowMs)) earliest = Math.min(earliest, this.expiryOf(c.atMs));
    }
    return earliest === Infinity ? 0 : earliest - nowMs;
  }
}

/** One counter in isolation: the model of `checkAndCharge`. */
export function modelCheckAndCharge(
  counter: ModelCounter,
  nowMs: number,
  hits: number,
  limit: number,
): CounterResult {
  const overLimit = counter.totalAt(nowMs) + hits > limit;
  if (!overLimit && hits > 0) counter.charge(nowMs, hits);
  return modelResult(counter, nowMs, hits, limit, overLimit);
}

function modelResult(
  counter: ModelCounter,
  nowMs: number,
  hits: number,
  limit: number,
  overLimit: boolean,
): CounterResult {
  if (overLimit) {
    return { overLimit, remaining: 0, resetMs: counter.waitFor(nowMs, hits, limit) };
  }
  return {
    overLimit,
    remaining: Math.max(0, limit - counter.totalAt(nowMs)),
    resetMs: counter.nextGrowth(nowMs),
  };
}

/** The model of the memory store: one {@link ModelCounter} per key, batches all-or-nothing. */
export class ModelStore {
  /** Counters by key; a key appears once it has been charged. */
  readonly counters = new Map<string, ModelCounter>();

  /**
   * The model of `apply()`: specs checked in order against a tentative per-key total (earlier
   * specs of the same key included); if every enforced spec has room, every spec with hits > 0
   * is charged; results read from the counters after the batch.
   */
  apply(nowMs: number, specs: readonly CounterSpec[]): BatchResult & { cumulative: number[] } {
    const pending = new Map<string, number>();
    const cumulative: number[] = [];
    const over: boolean[] = [];
    for (const spec of specs) {
      const cum = (pending.get(spec.key) ?? 0) + spec.hits;
      pending.set(spec.key, cum);
      cumulative.push(cum);
      const total = this.counters.get(spec.key)?.totalAt(nowMs) ?? 0;
      over.push(total + cum > spec.limit);
    }
    const admitted = specs.every((spec, i) => spec.mode !== 'enforced' || !over[i]);
    if (admitted) {
      for (const spec of specs) {
        if (spec.hits <= 0) continue;
        let counter = this.counters.get(spec.key);
        if (counter === undefined) {
          counter = new ModelCounter(spec.windowMs);
          this.counters.set(spec.key, counter);
        }
        counter.charge(nowMs, spec.hits);
      }
    }
    const results = specs.map((spec, i) =>
      modelResult(
        this.counters.get(spec.key) ?? new ModelCounter(spec.windowMs),
        nowMs,
        cumulative[i]!,
        spec.limit,
        over[i]!,
      ),
    );
    return { admitted, results, cumulative };
  }
}

/**
 * The largest number of hits charged within any closed-open interval `[t, t + windowMs)`.
 * Intervals starting at a charge are enough: moving a start forward to the next charge never
 * loses one.
 */
export function maxInAnyWindow(charges: readonly ModelHit[], windowMs: number): number {
  const sorted = [...charges].sort((a, b) => a.atMs - b.atMs);
  let best = 0;
  let sum = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end++) {
    sum += sorted[end]!.hits;
    while (sorted[end]!.atMs - sorted[start]!.atMs >= windowMs) sum -= sorted[start++]!.hits;
    best = Math.max(best, sum);
  }
  return best;
}

/** mulberry32: a tiny seeded PRNG returning floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
