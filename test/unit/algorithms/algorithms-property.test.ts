/**
 * Every algorithm against its own brute-force model (test/helpers/algorithm-models.ts), with a
 * manual clock and seeded random traffic: bursts in one millisecond, short and idle gaps, hits
 * 0..5, several keys with their own limits and windows. For every call: the decision, `remaining`
 * and both kinds of reset match the model; the memory store answers exactly as the algorithm's
 * steps; every OVER_LIMIT reset is exact (refused 1 ms before, admitted at it, by the model and by
 * the algorithm); and the promise each algorithm makes (docs/semantics.md §4) holds over the
 * whole history. A failure names its seed; `SLUICE_SEED=<seed>` replays it.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { ALGORITHM_STEPS } from '../../../src/algorithms/index.js';
import {
  ALGORITHMS,
  cloneCounterState,
  createCounterState,
  type Algorithm,
  type AlgorithmResult,
  type CounterState,
  type LimitParams,
} from '../../../src/algorithms/index.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import { MODELS, mulberry32, type ModelHit } from '../../helpers/algorithm-models.js';
import { propertyRuns } from '../../helpers/property-budget.js';

const T0 = 1_700_000_000_000;
// 20 and 100 ms windows stress sub-bucket and tick boundaries; the rest are real lengths
// (300 000 ms is a 5-minute unit_multiplier window).
const WINDOWS = [20, 100, 1_000, 60_000, 300_000];
const LIMITS = [0, 1, 2, 3, 5, 8, 12, 20];
const RUNS_PER_ALGORITHM = 12;
const STEPS = 300;

function seeds(base: number): number[] {
  const only = process.env['SLUICE_SEED'];
  if (only !== undefined && only !== '') return [Number(only)];
  return Array.from({ length: propertyRuns(RUNS_PER_ALGORITHM) }, (_, k) => base + k);
}

function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)]!;
}

interface Key {
  readonly name: string;
  readonly params: LimitParams;
  readonly state: CounterState;
  readonly charges: ModelHit[];
}

function randomParams(rand: () => number, algorithm: Algorithm): LimitParams {
  const windowMs = pick(rand, WINDOWS);
  // A token bucket that never refills (limit 0) has no steady state to compare; unit tests cover it.
  const limits = algorithm === 'token_bucket' ? LIMITS.filter((l) => l > 0) : LIMITS;
  const limit = pick(rand, limits);
  const burst = algorithm === 'token_bucket' ? limit + Math.floor(rand() * 5) : limit;
  return { limit, windowMs, burst };
}

/** Gap before the next call: often none (a burst), often short, sometimes idle for up to 3 W. */
function gapMs(rand: () => number, windowMs: number): number {
  const r = rand();
  if (r < 0.35) return 0;
  if (r < 0.75) return Math.floor(rand() * Math.max(2, windowMs / 10));
  if (r < 0.95) return Math.floor(rand() * windowMs);
  return Math.floor(rand() * 3 * windowMs);
}

/** The algorithm's steps on one state, as a store runs them for a one-counter batch. */
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
    remaining: 0,
    resetMs: 0,
  });
}

/** Whether the algorithm, from a copy of `state`, would admit `hits` at `at`. */
function algorithmAdmits(
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

async function run(algorithm: Algorithm, seed: number): Promise<void> {
  const rand = mulberry32(seed);
  const model = MODELS[algorithm];
  const clock = createManualClock(T0 + Math.floor(rand() * 1_000_000));
  const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const keys: Key[] = Array.from({ length: 1 + Math.floor(rand() * 3) }, (_, k) => ({
    name: `key-${k}`,
    params: randomParams(rand, algorithm),
    state: createCounterState(),
    charges: [],
  }));
  let overSeen = 0;
  for (let step = 0; step < STEPS; step++) {
    const key = pick(rand, keys);
    const { params, charges, state } = key;
    clock.advance(gapMs(rand, params.windowMs));
    const now = clock.now();
    const hits = rand() < 0.15 ? 0 : 1 + Math.floor(rand() * (rand() < 0.7 ? 2 : 5));
    const where = `step ${step}, ${key.name} ${JSON.stringify(params)}, t+${now - T0}, hits ${hits}`;

    const stateBefore = cloneCounterState(state);
    const expectedOver = !model.fits(charges, now, hits, params);
    const got = decide(algorithm, state, now, hits, params);
    const batch = await store.apply([
      { key: key.name, algorithm, ...params, hits, mode: 'enforced' },
    ]);
    expect(batch.results[0], `${where}: the store agrees with the steps`).toEqual(got);
    expect(batch.admitted, where).toBe(!expectedOver);
    expect(got.overLimit, `${where}: decision`).toBe(expectedOver);

    if (!expectedOver && hits > 0) charges.push({ atMs: now, hits });
    if (expectedOver) {
      overSeen++;
      expect(got.remaining, where).toBe(0);
      if (hits > model.capacity(params)) {
        // Never admissible: a full window (fixed window: its end, as the reference says).
        const expected =
          algorithm === 'fixed_window' ? model.nextGrowthMs(charges, now, params) : params.windowMs;
        expect(got.resetMs, `${where}: never-admissible reset`).toBe(expected);
      } else {
        const wait = got.resetMs;
        expect(wait, `${where}: over-limit wait is positive`).toBeGreaterThan(0);
        expect(
          model.fits(charges, now + wait - 1, hits, params),
          `${where}: model refuses at wait-1`,
        ).toBe(false);
        expect(
          model.fits(charges, now + wait, hits, params),
          `${where}: model admits at wait`,
        ).toBe(true);
        expect(algorithmAdmits(algorithm, stateBefore, now + wait - 1, hits, params), where).toBe(
          false,
        );
        expect(algorithmAdmits(algorithm, stateBefore, now + wait, hits, params), where).toBe(true);
      }
    } else {
      expect(got.remaining, `${where}: remaining`).toBe(model.room(charges, now, params));
      expect(got.resetMs, `${where}: OK reset`).toBe(model.nextGrowthMs(charges, now, params));
    }
  }
  for (const key of keys) {
    expect(
      MODELS[algorithm].violation(key.charges, key.params),
      `${key.name}: promise`,
    ).toBeUndefined();
  }
  // The traffic must actually reach the limits, or the run proves little.
  expect(overSeen, 'some calls were over limit').toBeGreaterThan(0);
  await store.close();
}

describe.each(ALGORITHMS.map((algorithm, index) => ({ algorithm, index })))(
  '$algorithm vs its brute-force model',
  ({ algorithm, index }) => {
    it('matches every decision, remaining and reset; resets are exact; the promise holds', async () => {
      for (const seed of seeds(7_000 + index * 100)) {
        try {
          await run(algorithm, seed);
        } catch (error) {
          if (error instanceof Error) {
            error.message = `seed ${seed} (SLUICE_SEED=${seed}): ${error.message}`;
          }
          throw error;
        }
      }
    }, 60_000);
  },
);
