/**
 * Edges of the algorithm modules that traffic alone does not reach: the state of a counter that
 * was never charged, a clock that steps back across a fixed window, the token bucket's config
 * bound at exactly 2^53 - 1, copies of a state, and the ring the sliding algorithms keep their
 * pairs in (its growth cap and its emptied total).
 */
import { describe, expect, it } from 'vitest';
import {
  ALGORITHMS,
  ALGORITHM_STEPS,
  cloneCounterState,
  createCounterState,
  type AlgorithmResult,
  type BoundedLimit,
  type CounterState,
  type LimitParams,
} from '../../../src/algorithms/index.js';
import { dropPairsBelow, pairFreeing, pushPair } from '../../../src/algorithms/ring.js';
import {
  charge as swCharge,
  createSlidingWindowState,
  evict as swEvict,
  waitForRoomMs as swWaitForRoomMs,
} from '../../../src/algorithms/sliding-window.js';
import {
  TOKEN_BUCKET_MAX_PRODUCT,
  tokenBucketAlgorithm,
} from '../../../src/algorithms/token-bucket.js';

const T0 = 1_700_000_000_000;
const PARAMS: LimitParams = { limit: 3, windowMs: 1_000, burst: 3 };

function out(): AlgorithmResult {
  return { overLimit: false, remaining: -1, resetMs: -1 };
}

describe.each(ALGORITHMS)('%s: a counter never charged', (algorithm) => {
  const steps = ALGORITHM_STEPS[algorithm];

  it('implies a first number of 0, its stampMs', () => {
    const state = createCounterState();
    expect(steps.impliedFirst(state, PARAMS)).toBe(0);
    expect(state.stampMs).toBe(0);
  });

  it('is where a counter whose charges all expired is back to', () => {
    const state = createCounterState();
    steps.refresh(state, T0, PARAMS);
    steps.charge(state, T0, 2, PARAMS);
    // Two windows later everything charged has gone: the whole limit remains.
    const later = T0 + 2 * PARAMS.windowMs;
    steps.refresh(state, later, PARAMS);
    expect(state).toMatchObject({ total: 0, length: 0 });
    expect(steps.result(state, later, 0, PARAMS, false, out())).toMatchObject({
      overLimit: false,
      remaining: PARAMS.limit,
    });
  });
});

describe('fixed_window when the clock steps back', () => {
  const steps = ALGORITHM_STEPS.fixed_window;
  const W = 1_000;
  const params: LimitParams = { limit: 3, windowMs: W, burst: 3 };

  function hit(state: CounterState, now: number, hits = 1): AlgorithmResult {
    steps.refresh(state, now, params);
    const over = !steps.hasRoom(state, now, hits, params);
    if (!over) steps.charge(state, now, hits, params);
    return steps.result(state, now, hits, params, over, out());
  }

  it('hits from a step back into the previous window still count in the window being counted', () => {
    const state = createCounterState();
    // T0 is window-aligned: window [T0 + W, T0 + 2W) counts 1 hit.
    expect(hit(state, T0 + W + 10)).toMatchObject({ overLimit: false, remaining: 2 });
    // The clock steps back into [T0, T0 + W): the hit joins the counted window...
    hit(state, T0 + 900);
    // ...and when the clock is back in that window, both hits are still counted.
    expect(hit(state, T0 + W + 20)).toMatchObject({ overLimit: false, remaining: 0 });
    expect(hit(state, T0 + W + 30)).toMatchObject({ overLimit: true, remaining: 0 });
    // The count ends with the window it was started in, not earlier.
    expect(state.emptyAtMs).toBe(T0 + 2 * W);
    expect(hit(state, T0 + 2 * W)).toMatchObject({ overLimit: false, remaining: 2 });
  });
});

describe('the sliding algorithms at the epoch itself', () => {
  // Bucket 0 and a log entry at t = 0 are real positions, not the "cannot free enough" marker.
  for (const algorithm of ['sliding_window', 'sliding_log'] as const) {
    it(`${algorithm}: hits charged at t = 0 are freed when they expire, not a window from now`, () => {
      const steps = ALGORITHM_STEPS[algorithm];
      const params: LimitParams = { limit: 2, windowMs: 1_000, burst: 2 };
      const state = createCounterState();
      steps.refresh(state, 0, params);
      steps.charge(state, 0, 2, params);
      steps.refresh(state, 10, params);
      expect(steps.hasRoom(state, 10, 1, params)).toBe(false);
      // sliding_window: bucket 0 (50 ms) expires at 21 x 50 ms; sliding_log: the entry at W.
      const freedAt = algorithm === 'sliding_window' ? 1_050 : 1_000;
      expect(steps.result(state, 10, 1, params, true, out())).toEqual({
        overLimit: true,
        remaining: 0,
        resetMs: freedAt - 10,
      });
    });
  }
});

describe('token_bucket config bound', () => {
  const { bounds } = tokenBucketAlgorithm;
  const check = (limit: BoundedLimit) => bounds.check!(limit);

  it('accepts a capacity x window of exactly 2^53 - 1 and refuses one more', () => {
    expect(TOKEN_BUCKET_MAX_PRODUCT).toBe(2 ** 53 - 1);
    expect(
      check({ requestsPerUnit: 2 ** 53 - 1, burst: undefined, burstWritten: false, windowMs: 1 }),
    ).toBeUndefined();
    expect(
      check({ requestsPerUnit: 2 ** 52, burst: undefined, burstWritten: false, windowMs: 2 }),
    ).toMatchObject({ field: 'requests_per_unit' });
  });

  it('points at the limit when no burst is written, at the burst when one is', () => {
    const tooBig = 2 ** 44;
    expect(
      check({ requestsPerUnit: tooBig, burst: undefined, burstWritten: false, windowMs: 1_000 }),
    ).toEqual({
      field: 'requests_per_unit',
      at: 'limit',
      message: expect.stringMatching(/^token_bucket capacity 17592186044416 x window 1000 ms/),
    });
    expect(
      check({ requestsPerUnit: 1, burst: tooBig, burstWritten: true, windowMs: 1_000 }),
    ).toMatchObject({ field: 'burst', at: 'burst' });
  });
});

describe('cloneCounterState', () => {
  it('gives a copy that later charges to either side do not reach', () => {
    for (const algorithm of ALGORITHMS) {
      const steps = ALGORITHM_STEPS[algorithm];
      const state = createCounterState();
      steps.charge(state, T0, 1, PARAMS);
      const copy = cloneCounterState(state);
      expect(copy).toEqual(state);
      const before = structuredClone(state);
      // Same millisecond: the sliding algorithms add to the stored pair in place.
      steps.charge(copy, T0, 1, PARAMS);
      expect(state, algorithm).toEqual(before);
    }
  });
});

describe('sliding_window waitForRoomMs', () => {
  it('is 0 for hits that fit now', () => {
    const state = createSlidingWindowState();
    swCharge(state, T0, 2, 1_000);
    swEvict(state, T0 + 10, 1_000);
    expect(swWaitForRoomMs(state, T0 + 10, 1, 3, 1_000)).toBe(0);
    expect(swWaitForRoomMs(state, T0 + 10, 2, 3, 1_000)).toBe(1_040);
  });
});

describe('the ring of pairs', () => {
  it('grows by doubling up to its cap and never past it', () => {
    const state = createCounterState();
    const capacities: number[] = [];
    for (let k = 0; k < 10; k++) {
      pushPair(state, k, 1, 5);
      capacities.push(state.ring.length / 2);
    }
    // Full at the cap, it doubles again (a caller only caps what it keeps live).
    expect(capacities).toEqual([1, 2, 4, 4, 5, 10, 10, 10, 10, 10]);
    // Full: the walk for more than every pair holds ends at the newest, not back at the oldest.
    expect(pairFreeing(state, 10)).toBe(9);
    expect(pairFreeing(state, 11)).toBe(-1);
  });

  it('a sliding window that keeps 21 buckets live holds a ring of exactly 21 pairs', () => {
    const state = createSlidingWindowState();
    // 1 s window, 50 ms buckets: one hit per bucket for 40 buckets keeps the last 21 live.
    for (let k = 0; k < 40; k++) {
      swEvict(state, T0 + k * 50, 1_000);
      swCharge(state, T0 + k * 50, 1, 1_000);
    }
    expect(state.length).toBe(21);
    expect(state.ring.length).toBe(42);
  });

  it('dropping every pair leaves a total of exactly 0, whatever the sums rounded to', () => {
    const state = createCounterState();
    for (const [a, b] of [
      [1, 0.1],
      [2, 0.2],
      [3, 0.4],
    ] as const) {
      pushPair(state, a, b, 8);
      state.total += b;
    }
    expect(dropPairsBelow(state, 3)).toBe(1);
    expect(state.total).not.toBe(0.4);
    expect(dropPairsBelow(state, 4)).toBe(0);
    expect(state.total).toBe(0);
  });
});
