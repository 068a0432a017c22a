/**
 * The one builder of counter specs (`CounterSpec`, what a store's `apply` takes) for every test:
 * `spec(key, hits, limit, more)`, always in that order. A file that needs other defaults (an
 * algorithm, a window, a limit) makes its own with {@link specBuilder} once, at the top.
 */
import { ALGORITHM_DESCRIPTORS } from '../../src/algorithms/index.js';
import type { BatchResult, CounterSpec } from '../../src/stores/counter-store.js';

/** What a builder fills in when the call does not say: everything but the key and the hits. */
export type SpecDefaults = Partial<Omit<CounterSpec, 'key' | 'hits'>>;

/** Builds one counter spec; `burst` is the limit unless `more` or the defaults say otherwise. */
export type SpecFn = (
  key: string,
  hits?: number,
  limit?: number,
  more?: Partial<CounterSpec>,
) => CounterSpec;

/** The defaults of {@link spec}: an enforced sliding window of 10 per minute. */
const SPEC_DEFAULTS = {
  algorithm: 'sliding_window',
  limit: 10,
  windowMs: 60_000,
  mode: 'enforced',
} as const satisfies SpecDefaults;

/**
 * A spec builder with `defaults` over {@link SPEC_DEFAULTS}: `hits` defaults to 1, `limit` to the
 * defaults' limit, `burst` to the defaults' burst or else the limit; `more` overrides any field.
 */
export function specBuilder(defaults: SpecDefaults = {}): SpecFn {
  const base = { ...SPEC_DEFAULTS, ...defaults };
  return (key, hits = 1, limit = base.limit, more = {}) => ({
    ...base,
    key,
    limit,
    burst: defaults.burst ?? limit,
    hits,
    ...more,
  });
}

/** A spec with {@link SPEC_DEFAULTS}. */
export const spec: SpecFn = specBuilder();

/**
 * A seeded xorshift32 sequence: each call returns the next integer in `[0, n)`. Every bit of it is
 * random enough to pick small sizes, where an LCG's low bits, taken modulo 4, repeat.
 */
export function xorshift32(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % n;
  };
}

/**
 * One random spec drawn from `next` (see {@link xorshift32}), built with `build`: any algorithm,
 * a 10 s or a minute window, 3 keys per algorithm and window, 0 to 3 hits of a limit of 4; one in
 * ten a shadow counter and one in ten a quota counter of group 0 or 1.
 */
export function randomSpec(next: (n: number) => number, build: SpecFn): CounterSpec {
  const algorithm = ALGORITHM_DESCRIPTORS[next(ALGORITHM_DESCRIPTORS.length)]!;
  const windowMs = next(2) === 0 ? 10_000 : 60_000;
  const roll = next(10);
  return build(`${algorithm.tag}|${windowMs}|k=${next(3)}`, next(4), 4, {
    algorithm: algorithm.name,
    windowMs,
    ...(roll === 0 ? { mode: 'shadow' as const } : {}),
    ...(roll === 1 ? { mode: 'quota' as const, quotaGroup: next(2) } : {}),
  });
}

/** A batch's decision without the optional fields, to compare two stores' answers. */
export function decisionOf(batch: BatchResult): {
  admitted: boolean;
  results: { overLimit: boolean; remaining: number; resetMs: number }[];
} {
  return {
    admitted: batch.admitted,
    results: batch.results.map(({ overLimit, remaining, resetMs }) => ({
      overLimit,
      remaining,
      resetMs,
    })),
  };
}
