/**
 * Brute-force models of every counting algorithm (docs/semantics.md §4), written the plain way
 * and independently of src/algorithms: each keeps the full list of admitted charges and
 * recomputes from it (the token bucket replays the classic "tokens and last refill" form in exact
 * integers instead of GCRA). Used by test/unit/algorithms/algorithms-property.test.ts.
 */
import type { Algorithm, LimitParams } from '../../src/algorithms/index.js';
import { mulberry32, type ModelHit } from './sliding-model.js';

export { mulberry32, type ModelHit };

/** What a model answers for one counter, from the charges admitted so far (oldest first). */
export interface AlgorithmModel {
  /** Whether `hits` more fit at `now`. */
  fits(charges: readonly ModelHit[], now: number, hits: number, p: LimitParams): boolean;
  /** Whole hits (tokens) of room at `now`, at least 0. */
  room(charges: readonly ModelHit[], now: number, p: LimitParams): number;
  /** Time until `room` next grows; 0 when it never will (nothing counted / bucket full). */
  nextGrowthMs(charges: readonly ModelHit[], now: number, p: LimitParams): number;
  /** Most hits the algorithm can ever admit at once (limit, or burst for the token bucket). */
  capacity(p: LimitParams): number;
  /**
   * The promise it keeps, checked over the whole history: returns a description of the first
   * violation, or `undefined`.
   */
  violation(charges: readonly ModelHit[], p: LimitParams): string | undefined;
}

function sumWhere(charges: readonly ModelHit[], live: (atMs: number) => boolean): number {
  let total = 0;
  for (const c of charges) if (live(c.atMs)) total += c.hits;
  return total;
}

/** Any interval of length W holds at most `limit` (sliding window, sliding log). */
function slidingViolation(charges: readonly ModelHit[], p: LimitParams): string | undefined {
  for (const end of charges) {
    const held = sumWhere(charges, (t) => t > end.atMs - p.windowMs && t <= end.atMs);
    if (held > p.limit) return `${held} hits in the ${p.windowMs} ms ending at ${end.atMs}`;
  }
  return undefined;
}

/** sliding_window: a hit at t counts while floor(now / b) <= floor(t / b) + 20, b = W / 20. */
const slidingWindow: AlgorithmModel = {
  fits(charges, now, hits, p) {
    return total(charges, now, p) + hits <= p.limit;
  },
  room(charges, now, p) {
    return Math.max(0, p.limit - total(charges, now, p));
  },
  nextGrowthMs(charges, now, p) {
    const b = Math.ceil(p.windowMs / 20);
    const expiries = charges
      .filter((c) => Math.floor(now / b) <= Math.floor(c.atMs / b) + 20)
      .map((c) => (Math.floor(c.atMs / b) + 21) * b);
    return expiries.length === 0 ? 0 : Math.min(...expiries) - now;
  },
  capacity: (p) => p.limit,
  violation: slidingViolation,
};

function total(charges: readonly ModelHit[], now: number, p: LimitParams): number {
  const b = Math.ceil(p.windowMs / 20);
  return sumWhere(charges, (t) => Math.floor(now / b) <= Math.floor(t / b) + 20);
}

/** fixed_window: hits charged in the epoch-aligned window [kW, (k+1)W) that holds now. */
const fixedWindow: AlgorithmModel = {
  fits(charges, now, hits, p) {
    return used(charges, now, p) + hits <= p.limit;
  },
  room(charges, now, p) {
    return Math.max(0, p.limit - used(charges, now, p));
  },
  nextGrowthMs(_charges, now, p) {
    return (Math.floor(now / p.windowMs) + 1) * p.windowMs - now;
  },
  capacity: (p) => p.limit,
  violation(charges, p) {
    const perWindow = new Map<number, number>();
    for (const c of charges) {
      const k = Math.floor(c.atMs / p.windowMs);
      const held = (perWindow.get(k) ?? 0) + c.hits;
      perWindow.set(k, held);
      if (held > p.limit) return `${held} hits in window ${k}`;
    }
    return undefined;
  },
};

function used(charges: readonly ModelHit[], now: number, p: LimitParams): number {
  const k = Math.floor(now / p.windowMs);
  return sumWhere(charges, (t) => Math.floor(t / p.windowMs) === k);
}

/** sliding_log: a hit at t counts while now < t + W. */
const slidingLog: AlgorithmModel = {
  fits(charges, now, hits, p) {
    return logged(charges, now, p) + hits <= p.limit;
  },
  room(charges, now, p) {
    return Math.max(0, p.limit - logged(charges, now, p));
  },
  nextGrowthMs(charges, now, p) {
    const live = charges.filter((c) => now < c.atMs + p.windowMs);
    return live.length === 0 ? 0 : Math.min(...live.map((c) => c.atMs + p.windowMs)) - now;
  },
  capacity: (p) => p.limit,
  violation: slidingViolation,
};

function logged(charges: readonly ModelHit[], now: number, p: LimitParams): number {
  return sumWhere(charges, (t) => now < t + p.windowMs);
}

/**
 * token_bucket, replayed as a level in exact integers: the level is tokens x W, starts full at
 * B x W, refills L per ms up to B x W, and each admitted charge takes hits x W.
 */
function level(charges: readonly ModelHit[], now: number, p: LimitParams): number {
  const full = p.burst * p.windowMs;
  let value = full;
  let last = -Infinity;
  for (const c of charges) {
    value = last === -Infinity ? full : Math.min(full, value + (c.atMs - last) * p.limit);
    value -= c.hits * p.windowMs;
    last = c.atMs;
  }
  return last === -Infinity ? full : Math.min(full, value + (now - last) * p.limit);
}

const tokenBucket: AlgorithmModel = {
  fits(charges, now, hits, p) {
    if (p.limit <= 0) return hits <= 0;
    return level(charges, now, p) >= hits * p.windowMs;
  },
  room(charges, now, p) {
    if (p.limit <= 0) return 0;
    return Math.max(0, Math.floor(level(charges, now, p) / p.windowMs));
  },
  nextGrowthMs(charges, now, p) {
    const room = this.room(charges, now, p);
    if (room >= p.burst) return 0;
    const need = (room + 1) * p.windowMs - level(charges, now, p);
    return Math.ceil(need / p.limit);
  },
  capacity: (p) => p.burst,
  violation(charges, p) {
    // Over any span [a, b]: admitted x W <= B x W + (b - a) x L.
    for (let i = 0; i < charges.length; i++) {
      let sum = 0;
      for (let j = i; j < charges.length; j++) {
        sum += charges[j]!.hits;
        const span = charges[j]!.atMs - charges[i]!.atMs;
        if (sum * p.windowMs > p.burst * p.windowMs + span * p.limit) {
          return `${sum} hits within ${span} ms`;
        }
      }
    }
    return undefined;
  },
};

/** The model of each algorithm. */
export const MODELS: Readonly<Record<Algorithm, AlgorithmModel>> = {
  sliding_window: slidingWindow,
  fixed_window: fixedWindow,
  token_bucket: tokenBucket,
  sliding_log: slidingLog,
};
