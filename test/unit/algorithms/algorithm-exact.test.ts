/**
 * Exact numbers of each algorithm (docs/semantics.md §4, docs/algorithms.md) at the boundaries
 * the random tests reach only by chance: token bucket refill to the millisecond (whole and
 * fractional token periods, `limit` 0, more hits than the burst), the sliding log and window
 * when the clock steps back, and the resets of requests that can never fit. Driven through each
 * algorithm's steps, as one counter of a store would be.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHM_STEPS } from '../../../src/algorithms/index.js';
import {
  createCounterState,
  type Algorithm,
  type AlgorithmResult,
  type CounterState,
  type LimitParams,
} from '../../../src/algorithms/index.js';

/** One counter driven the way a store drives it: refresh, check, charge when there is room, result. */
class Counter {
  readonly state: CounterState = createCounterState();
  constructor(
    readonly algorithm: Algorithm,
    readonly params: LimitParams,
  ) {}

  hit(now: number, hits = 1): AlgorithmResult {
    const steps = ALGORITHM_STEPS[this.algorithm];
    steps.refresh(this.state, now, this.params);
    const room = steps.hasRoom(this.state, now, hits, this.params);
    if (room) steps.charge(this.state, now, hits, this.params);
    return steps.result(this.state, now, hits, this.params, !room, {
      overLimit: false,
      remaining: 0,
      resetMs: 0,
    });
  }
}

const T = 1_700_000_000_000;

describe('token_bucket', () => {
  const tb = (limit: number, windowMs: number, burst = limit) =>
    new Counter('token_bucket', { limit, windowMs, burst });

  it('2 per minute: one token every 30 s, to the millisecond', () => {
    const c = tb(2, 60_000);
    expect(c.hit(T)).toEqual({ overLimit: false, remaining: 1, resetMs: 30_000 });
    expect(c.hit(T + 10_000)).toEqual({ overLimit: false, remaining: 0, resetMs: 20_000 });
    // Empty: the next token is back at T + 30 s (the first one's), not before.
    expect(c.hit(T + 29_999)).toEqual({ overLimit: true, remaining: 0, resetMs: 1 });
    expect(c.hit(T + 30_000)).toEqual({ overLimit: false, remaining: 0, resetMs: 30_000 });
    // Two hits at once wait for two tokens.
    expect(c.hit(T + 30_000, 2)).toEqual({ overLimit: true, remaining: 0, resetMs: 60_000 });
    // Idle long enough, the bucket is full again and the state is dropped.
    expect(c.hit(T + 200_000, 2)).toEqual({ overLimit: false, remaining: 0, resetMs: 30_000 });
  });

  it('3 per second: token periods of 333 1/3 ms are kept exact', () => {
    const c = tb(3, 1_000);
    expect(c.hit(T)).toEqual({ overLimit: false, remaining: 2, resetMs: 334 });
    expect(c.state.stampMs).toBe(T + 333);
    expect(c.state.total).toBe(1);
    expect(c.state.emptyAtMs).toBe(T + 334);
    expect(c.hit(T)).toEqual({ overLimit: false, remaining: 1, resetMs: 334 });
    expect(c.hit(T)).toEqual({ overLimit: false, remaining: 0, resetMs: 334 });
    expect(c.state.emptyAtMs).toBe(T + 1_000);
    // Next token at T + 333.33: refused at 333, admitted at 334.
    expect(c.hit(T + 333)).toEqual({ overLimit: true, remaining: 0, resetMs: 1 });
    expect(c.hit(T + 334)).toMatchObject({ overLimit: false, remaining: 0 });
    // Full again exactly when emptyAtMs says: the state is forgotten there, not a ms before.
    const d = tb(3, 1_000);
    d.hit(T);
    ALGORITHM_STEPS.token_bucket.refresh(d.state, T + 333, d.params);
    expect(d.state.emptyAtMs).toBe(T + 334);
    ALGORITHM_STEPS.token_bucket.refresh(d.state, T + 334, d.params);
    expect(d.state).toEqual(createCounterState());
  });

  it('a burst above the rate: the bucket holds the burst and refills at the rate', () => {
    const c = tb(1, 10_000, 3);
    expect(c.hit(T, 3)).toEqual({ overLimit: false, remaining: 0, resetMs: 10_000 });
    expect(c.hit(T + 9_999)).toEqual({ overLimit: true, remaining: 0, resetMs: 1 });
    expect(c.hit(T + 10_000)).toEqual({ overLimit: false, remaining: 0, resetMs: 10_000 });
    // Three tokens back after 30 s without traffic: full, and nothing to wait for.
    const full = c.hit(T + 40_000, 0);
    expect(full).toEqual({ overLimit: false, remaining: 3, resetMs: 0 });
  });

  it('more hits than the burst can never fit: over, with one window as the reset', () => {
    const c = tb(5, 60_000, 4);
    expect(c.hit(T, 5)).toEqual({ overLimit: true, remaining: 0, resetMs: 60_000 });
    expect(c.state).toEqual(createCounterState());
    expect(c.hit(T, 4)).toEqual({ overLimit: false, remaining: 0, resetMs: 12_000 });
  });

  it('limit 0 never refills: only 0 hits fit, the reset is one window, nothing is counted', () => {
    const c = tb(0, 60_000, 0);
    expect(c.hit(T, 0)).toEqual({ overLimit: false, remaining: 0, resetMs: 60_000 });
    expect(c.hit(T, 1)).toEqual({ overLimit: true, remaining: 0, resetMs: 60_000 });
    ALGORITHM_STEPS.token_bucket.charge(c.state, T, 1, c.params);
    expect(c.state).toEqual(createCounterState());
    // Even with a burst configured, a zero rate admits nothing.
    const b = tb(0, 60_000, 5);
    expect(ALGORITHM_STEPS.token_bucket.hasRoom(b.state, T, 1, b.params)).toBe(false);
    expect(ALGORITHM_STEPS.token_bucket.hasRoom(b.state, T, 0, b.params)).toBe(true);
  });

  it('a charge after the bucket refilled starts from now, not from the old TAT', () => {
    const c = tb(2, 1_000);
    c.hit(T);
    const steps = ALGORITHM_STEPS.token_bucket;
    // No refresh in between (a store may skip it): TAT T+500 is in the past at T+2000.
    steps.charge(c.state, T + 2_000, 1, c.params);
    expect(c.state.stampMs).toBe(T + 2_500);
    expect(c.state.emptyAtMs).toBe(T + 2_500);
    const result = steps.result(c.state, T + 2_000, 1, c.params, false, {
      overLimit: false,
      remaining: 0,
      resetMs: 0,
    });
    expect(result).toEqual({ overLimit: false, remaining: 1, resetMs: 500 });
  });
});

describe('sliding_log', () => {
  it('hits from a clock that stepped back join the newest entry and are counted from it', () => {
    const c = new Counter('sliding_log', { limit: 2, windowMs: 1_000, burst: 2 });
    expect(c.hit(T + 1_000)).toEqual({ overLimit: false, remaining: 1, resetMs: 1_000 });
    // The clock steps back 100 ms: the hit is logged at T + 1000, not T + 900.
    expect(c.hit(T + 900)).toEqual({ overLimit: false, remaining: 0, resetMs: 1_100 });
    expect(c.state.length).toBe(1);
    // Two more hits need both logged ones to leave: at T + 2000, 1050 ms from T + 950.
    expect(c.hit(T + 950, 2)).toEqual({ overLimit: true, remaining: 0, resetMs: 1_050 });
    expect(c.hit(T + 1_999)).toMatchObject({ overLimit: true, resetMs: 1 });
    expect(c.hit(T + 2_000, 2)).toEqual({ overLimit: false, remaining: 0, resetMs: 1_000 });
  });

  it('hits in the same millisecond share one entry; the wait frees the oldest first', () => {
    const c = new Counter('sliding_log', { limit: 3, windowMs: 1_000, burst: 3 });
    c.hit(T);
    c.hit(T);
    expect(c.state.length).toBe(1);
    c.hit(T + 400);
    expect(c.state.length).toBe(2);
    // One more fits when the T entry (2 hits) leaves; three more need the T + 400 one too.
    expect(c.hit(T + 500)).toEqual({ overLimit: true, remaining: 0, resetMs: 500 });
    expect(c.hit(T + 500, 3)).toEqual({ overLimit: true, remaining: 0, resetMs: 900 });
    // More than the limit never fits: one window.
    expect(c.hit(T + 500, 4)).toEqual({ overLimit: true, remaining: 0, resetMs: 1_000 });
    // An entry leaves exactly W after it was logged.
    expect(c.hit(T + 999)).toMatchObject({ overLimit: true });
    expect(c.hit(T + 1_000)).toEqual({ overLimit: false, remaining: 1, resetMs: 400 });
  });

  it('shadow-style charges past the limit report 0 remaining, never negative', () => {
    const c = new Counter('sliding_log', { limit: 2, windowMs: 1_000, burst: 2 });
    const steps = ALGORITHM_STEPS.sliding_log;
    steps.charge(c.state, T, 5, c.params);
    const out = steps.result(c.state, T, 0, c.params, false, {
      overLimit: true,
      remaining: -1,
      resetMs: -1,
    });
    expect(out).toEqual({ overLimit: false, remaining: 0, resetMs: 1_000 });
  });
});

describe('sliding_window', () => {
  it('more hits than the limit never fit: one window; the wait for fitting hits is exact', () => {
    const c = new Counter('sliding_window', { limit: 2, windowMs: 1_000, burst: 2 });
    expect(c.hit(T, 3)).toEqual({ overLimit: true, remaining: 0, resetMs: 1_000 });
    expect(c.hit(T, 2)).toMatchObject({ overLimit: false, remaining: 0 });
    // 50 ms buckets: the T bucket is counted through T + 1049 and leaves at T + 1050.
    expect(c.hit(T + 10)).toEqual({ overLimit: true, remaining: 0, resetMs: 1_040 });
    expect(c.hit(T + 1_049)).toMatchObject({ overLimit: true, resetMs: 1 });
    expect(c.hit(T + 1_050)).toMatchObject({ overLimit: false, remaining: 1 });
  });

  it('charges past the limit (shadow) report 0 remaining, never negative', () => {
    const c = new Counter('sliding_window', { limit: 2, windowMs: 1_000, burst: 2 });
    const steps = ALGORITHM_STEPS.sliding_window;
    steps.charge(c.state, T, 5, c.params);
    expect(
      steps.result(c.state, T, 0, c.params, false, { overLimit: true, remaining: -1, resetMs: -1 }),
    ).toMatchObject({ overLimit: false, remaining: 0 });
    // Over with hits that fit once the shadow hits leave.
    expect(
      steps.result(c.state, T + 20, 1, c.params, true, {
        overLimit: false,
        remaining: -1,
        resetMs: -1,
      }),
    ).toEqual({ overLimit: true, remaining: 0, resetMs: 1_030 });
  });
});

describe('fixed_window', () => {
  it('charges past the limit report 0 remaining; the reset is the window end', () => {
    const c = new Counter('fixed_window', { limit: 2, windowMs: 60_000, burst: 2 });
    const steps = ALGORITHM_STEPS.fixed_window;
    const start = 1_699_999_980_000; // a minute boundary
    steps.charge(c.state, start + 5_000, 3, c.params);
    expect(
      steps.result(c.state, start + 5_000, 0, c.params, false, {
        overLimit: true,
        remaining: -1,
        resetMs: -1,
      }),
    ).toEqual({ overLimit: false, remaining: 0, resetMs: 55_000 });
    expect(c.hit(start + 59_999)).toEqual({ overLimit: true, remaining: 0, resetMs: 1 });
    expect(c.hit(start + 60_000)).toEqual({ overLimit: false, remaining: 1, resetMs: 60_000 });
  });
});
