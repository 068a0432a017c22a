/**
 * The one builder of counter specs (`CounterSpec`, what a store's `apply` takes) for every test:
 * `spec(key, hits, limit, more)`, always in that order. A file that needs other defaults (an
 * algorithm, a window, a limit) makes its own with {@link specBuilder} once, at the top.
 */
import type { CounterSpec } from '../../src/stores/counter-store.js';

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
