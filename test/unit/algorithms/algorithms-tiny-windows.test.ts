/**
 * Every algorithm against its brute-force model (test/helpers/algorithm-models.ts) on windows of
 * a few milliseconds, where each millisecond is a boundary: a token period that ends within the
 * same millisecond as a charge, a TAT with a fraction left, a sub-bucket of 1 ms, a log entry
 * that expires at the very next call. The seeded traffic of algorithms-property.test.ts reaches
 * these only by chance on real window lengths; here every call lands on one. Deterministic and
 * not scaled by SLUICE_PROPERTY_SCALE: it takes a few milliseconds per algorithm.
 */
import { describe, expect, it } from 'vitest';
import {
  ALGORITHMS,
  ALGORITHM_STEPS,
  cloneCounterState,
  createCounterState,
  type Algorithm,
  type AlgorithmResult,
  type CounterState,
  type LimitParams,
} from '../../../src/algorithms/index.js';
import { MODELS, mulberry32, type ModelHit } from '../../helpers/algorithm-models.js';

const T0 = 1_700_000_000_000;
const STEPS = 400;

/** Windows of 3 to 20 ms, limits 1 to 5, token buckets with a burst of the limit to limit + 2. */
function paramsFor(algorithm: Algorithm, seed: number): LimitParams {
  const rand = mulberry32(seed);
  const windowMs = [3, 5, 7, 10, 20][Math.floor(rand() * 5)]!;
  const limit = 1 + Math.floor(rand() * 5);
  const burst = algorithm === 'token_bucket' ? limit + Math.floor(rand() * 3) : limit;
  return { limit, windowMs, burst };
}

function decide(
  algorithm: Algorithm,
  state: CounterState,
  now: number,
  hits: number,
  params: LimitParams,
): AlgorithmResult {
  const steps = ALGORITHM_STEPS[algorithm];
  steps.refresh(state, now, params);
  const over = !steps.hasRoom(state, now, hits, params);
  if (!over) steps.charge(state, now, hits, params);
  return steps.result(state, now, hits, params, over, {
    overLimit: false,
    remaining: -1,
    resetMs: -1,
  });
}

function admitsAt(
  algorithm: Algorithm,
  state: CounterState,
  at: number,
  hits: number,
  params: LimitParams,
): boolean {
  const copy = cloneCounterState(state);
  const steps = ALGORITHM_STEPS[algorithm];
  steps.refresh(copy, at, params);
  return steps.hasRoom(copy, at, hits, params);
}

/** `expect(got).toBe(want)`, building the message only on a mismatch (this runs per call). */
function same<T>(got: T, want: T, what: () => string): void {
  if (got !== want) expect(got, what()).toBe(want);
}

describe.each(ALGORITHMS)('%s on windows of a few milliseconds', (algorithm) => {
  it('answers every call as its model does: decision, remaining, and an exact reset', () => {
    const model = MODELS[algorithm];
    let over = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const params = paramsFor(algorithm, seed);
      const rand = mulberry32(seed * 7919);
      const state = createCounterState();
      const charges: ModelHit[] = [];
      let now = T0 + seed;
      for (let step = 0; step < STEPS; step++) {
        // Mostly 0 or 1 ms apart, sometimes a window or more.
        const r = rand();
        now += r < 0.4 ? 0 : r < 0.8 ? 1 : Math.floor(rand() * 3 * params.windowMs);
        const hits = Math.floor(rand() * (params.burst + 2));
        const where = (what: string) => () =>
          `seed ${seed} ${JSON.stringify(params)} step ${step} t+${now - T0} hits ${hits}: ${what}`;
        const before = cloneCounterState(state);
        const fits = model.fits(charges, now, hits, params);
        const got = decide(algorithm, state, now, hits, params);
        same(got.overLimit, !fits, where('decision'));
        if (fits) {
          if (hits > 0) charges.push({ atMs: now, hits });
          same(got.remaining, model.room(charges, now, params), where('remaining'));
          same(got.resetMs, model.nextGrowthMs(charges, now, params), where('OK reset'));
          continue;
        }
        over++;
        same(got.remaining, 0, where('over-limit remaining'));
        if (hits > model.capacity(params)) {
          const expected =
            algorithm === 'fixed_window'
              ? model.nextGrowthMs(charges, now, params)
              : params.windowMs;
          same(got.resetMs, expected, where('never-admissible reset'));
          continue;
        }
        const wait = got.resetMs;
        same(model.fits(charges, now + wait - 1, hits, params), false, where('model at wait-1'));
        same(model.fits(charges, now + wait, hits, params), true, where('model at wait'));
        same(admitsAt(algorithm, before, now + wait - 1, hits, params), false, where('at wait-1'));
        same(admitsAt(algorithm, before, now + wait, hits, params), true, where('at wait'));
      }
      expect(model.violation(charges, params), `seed ${seed}: promise`).toBeUndefined();
    }
    // The traffic reaches the limits often, or the run proves little.
    expect(over).toBeGreaterThan(STEPS);
  });
});
