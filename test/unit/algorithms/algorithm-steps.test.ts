/**
 * The step contract every algorithm shares (src/algorithms/types.ts `CounterAlgorithm`,
 * docs/semantics.md §4), checked on each algorithm's own steps: a charge of 0, negative or NaN
 * hits changes nothing (a check-only request must not start a window or a log), refresh of a
 * state that holds nothing changes nothing, and 0 hits fit whenever the state is not over.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHM_STEPS } from '../../../src/algorithms/index.js';
import {
  ALGORITHMS,
  cloneCounterState,
  createCounterState,
  type LimitParams,
} from '../../../src/algorithms/index.js';

const T0 = 1_699_999_980_000;
const PARAMS: LimitParams = { limit: 3, windowMs: 60_000, burst: 3 };

describe.each(ALGORITHMS)('%s steps', (algorithm) => {
  const steps = ALGORITHM_STEPS[algorithm];

  it('a charge of 0, negative or NaN hits leaves a fresh state fresh', () => {
    for (const hits of [0, -1, Number.NaN]) {
      const state = createCounterState();
      steps.charge(state, T0 + 5, hits, PARAMS);
      expect(state, `hits ${hits}`).toEqual(createCounterState());
      // Nothing counted: the full limit remains and nothing waits.
      const out = steps.result(state, T0 + 5, 0, PARAMS, false, {
        overLimit: true,
        remaining: -1,
        resetMs: -1,
      });
      expect(out.remaining).toBe(PARAMS.limit);
      expect(out.overLimit).toBe(false);
    }
  });

  it('a charge of 0 hits leaves a charged state as it was', () => {
    const state = createCounterState();
    steps.charge(state, T0 + 5, 2, PARAMS);
    const before = cloneCounterState(state);
    steps.refresh(state, T0 + 7, PARAMS);
    steps.charge(state, T0 + 7, 0, PARAMS);
    expect(state).toEqual(before);
    expect(state.emptyAtMs).toBeGreaterThan(T0 + 7);
  });

  it('refresh of a state that holds nothing changes nothing, at any time', () => {
    for (const now of [0, T0, T0 + 10 * PARAMS.windowMs]) {
      const state = createCounterState();
      steps.refresh(state, now, PARAMS);
      expect(state).toEqual(createCounterState());
    }
  });

  it('0 hits fit on a fresh state and on one with room; the limit fits exactly, one more does not', () => {
    const state = createCounterState();
    expect(steps.hasRoom(state, T0, 0, PARAMS)).toBe(true);
    expect(steps.hasRoom(state, T0, PARAMS.limit, PARAMS)).toBe(true);
    expect(steps.hasRoom(state, T0, PARAMS.limit + 1, PARAMS)).toBe(false);
    steps.charge(state, T0, 1, PARAMS);
    expect(steps.hasRoom(state, T0, 0, PARAMS)).toBe(true);
    expect(steps.hasRoom(state, T0, PARAMS.limit - 1, PARAMS)).toBe(true);
    expect(steps.hasRoom(state, T0, PARAMS.limit, PARAMS)).toBe(false);
  });

  it('once the counted hits have all left, refresh forgets them and the full limit fits', () => {
    const state = createCounterState();
    steps.charge(state, T0 + 1, 3, PARAMS);
    expect(state.emptyAtMs).toBeGreaterThan(T0 + 1);
    // One ms before the state is empty it still counts something.
    steps.refresh(state, state.emptyAtMs - 1, PARAMS);
    expect(state.emptyAtMs).not.toBe(0);
    const emptyAt = state.emptyAtMs;
    expect(steps.hasRoom(state, emptyAt - 1, PARAMS.limit, PARAMS)).toBe(false);
    steps.refresh(state, emptyAt, PARAMS);
    expect(state.total).toBe(0);
    expect(steps.hasRoom(state, emptyAt, PARAMS.limit, PARAMS)).toBe(true);
    const out = steps.result(state, emptyAt, 0, PARAMS, false, {
      overLimit: true,
      remaining: -1,
      resetMs: -1,
    });
    expect(out).toMatchObject({ overLimit: false, remaining: PARAMS.limit });
  });
});
