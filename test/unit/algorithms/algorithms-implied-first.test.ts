/**
 * `CounterAlgorithm.impliedFirst`: the memory store keeps a quiet counter as `total`, `emptyAtMs`
 * and a shape, and rebuilds the rest with it. For every algorithm, after every step of seeded
 * random traffic (bursts, gaps past the window, hits 0..4, checks without charges), a state with
 * at most one stored pair must give back its real `stampMs` or first pair number; otherwise the
 * store would keep each such counter as a full object (correct, but the compact layout lost).
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHM_STEPS } from '../../../src/algorithms/index.js';
import {
  ALGORITHMS,
  createCounterState,
  type AlgorithmResult,
  type LimitParams,
} from '../../../src/algorithms/index.js';
import { mulberry32 } from '../../helpers/algorithm-models.js';

const T0 = 1_700_000_000_123;
const WINDOWS = [20, 1_000, 60_000, 300_000];
const GAPS = [0, 0, 1, 7, 49, 333, 1_000, 59_999, 61_000, 400_000];

describe('impliedFirst gives back what a quiet state holds', () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: after every step with at most one stored pair`, () => {
      const steps = ALGORITHM_STEPS[algorithm];
      let checked = 0;
      for (let seed = 1; seed <= 40; seed++) {
        const rand = mulberry32(seed);
        const windowMs = WINDOWS[seed % WINDOWS.length]!;
        const limit = 1 + Math.floor(rand() * 6);
        const params: LimitParams = { limit, windowMs, burst: limit + (seed % 3) };
        const state = createCounterState();
        const out: AlgorithmResult = { overLimit: false, remaining: 0, resetMs: 0 };
        let now = T0 + seed;
        for (let step = 0; step < 200; step++) {
          now += GAPS[Math.floor(rand() * GAPS.length)]!;
          const hits = Math.floor(rand() * 5);
          steps.refresh(state, now, params);
          if (state.emptyAtMs !== 0 && state.emptyAtMs <= now) continue;
          if (steps.hasRoom(state, now, hits, params)) steps.charge(state, now, hits, params);
          steps.result(state, now, hits, params, false, out);
          if (state.length > 1) continue;
          const implied = steps.impliedFirst(state, params);
          if (state.length === 1) {
            expect(state.ring[state.head << 1]).toBe(implied);
            expect(state.ring[(state.head << 1) + 1]).toBe(state.total);
            expect(state.stampMs).toBe(0);
          } else if (state.emptyAtMs !== 0) {
            expect(state.stampMs).toBe(implied);
          }
          checked++;
        }
      }
      // The traffic reaches quiet states often enough for the check to mean something.
      expect(checked).toBeGreaterThan(100);
    });
  }
});
