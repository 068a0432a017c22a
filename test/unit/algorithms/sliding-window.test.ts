import { describe, expect, it } from 'vitest';
import {
  SUB_BUCKETS,
  bucketMsFor,
  charge,
  checkAndCharge,
  cloneState,
  createSlidingWindowState,
  evict,
  expiresAtMs,
  hasRoom,
  result,
  waitForRoomMs,
  type SlidingWindowResult,
  type SlidingWindowState,
} from '../../../src/algorithms/sliding-window.js';

// 1 s window: 20 sub-buckets of 50 ms. T0 is on a bucket boundary.
const W = 1_000;
const B = 50;
const T0 = 1_700_000_000_000;

function fresh(): SlidingWindowState {
  return createSlidingWindowState();
}

function decide(state: SlidingWindowState, at: number, hits: number, limit: number) {
  const out: SlidingWindowResult = { overLimit: false, remaining: -1, resetMs: -1 };
  return { ...checkAndCharge(state, at, hits, limit, W, out) };
}

describe('bucketMsFor', () => {
  it('splits a window into SUB_BUCKETS sub-buckets', () => {
    expect(SUB_BUCKETS).toBe(20);
    expect(bucketMsFor(1_000)).toBe(50);
    expect(bucketMsFor(60_000)).toBe(3_000);
    expect(bucketMsFor(86_400_000)).toBe(4_320_000);
  });

  it('rounds up lengths not divisible by 20, never below 1 ms', () => {
    expect(bucketMsFor(1_010)).toBe(51);
    expect(bucketMsFor(7)).toBe(1);
    expect(bucketMsFor(0)).toBe(1);
  });
});

describe('sliding window decisions', () => {
  it('admits a fresh key and reports when remaining next grows', () => {
    const state = fresh();
    expect(decide(state, T0, 1, 3)).toEqual({ overLimit: false, remaining: 2, resetMs: 1_050 });
    expect(decide(state, T0 + 10, 1, 3)).toEqual({
      overLimit: false,
      remaining: 1,
      resetMs: 1_040,
    });
    expect(state.total).toBe(2);
  });

  it('admits exactly up to the limit, then rejects with the exact wait', () => {
    const state = fresh();
    expect(decide(state, T0, 3, 3)).toEqual({ overLimit: false, remaining: 0, resetMs: 1_050 });
    expect(decide(state, T0 + 200, 1, 3)).toEqual({
      overLimit: true,
      remaining: 0,
      resetMs: 850,
    });
    expect(state.total).toBe(3);
    expect(decide(state, T0 + 1_049, 1, 3)).toEqual({
      overLimit: true,
      remaining: 0,
      resetMs: 1,
    });
    expect(decide(state, T0 + 1_050, 1, 3)).toEqual({
      overLimit: false,
      remaining: 2,
      resetMs: 1_050,
    });
  });

  it('hits 0 checks without charging', () => {
    const state = fresh();
    expect(decide(state, T0, 0, 3)).toEqual({ overLimit: false, remaining: 3, resetMs: 0 });
    expect(state.length).toBe(0);
    decide(state, T0, 3, 3);
    expect(decide(state, T0 + 100, 0, 3)).toEqual({
      overLimit: false,
      remaining: 0,
      resetMs: 950,
    });
    expect(state.total).toBe(3);
  });

  it('hits above the limit are never admitted and report a full window', () => {
    const state = fresh();
    expect(decide(state, T0, 4, 3)).toEqual({ overLimit: true, remaining: 0, resetMs: W });
    expect(state.length).toBe(0);
    expect(decide(state, T0, 1, 0)).toEqual({ overLimit: true, remaining: 0, resetMs: W });
    expect(decide(state, T0, 0, 0)).toEqual({ overLimit: false, remaining: 0, resetMs: 0 });
  });

  it('keeps a bucket until all its hits are at least W old', () => {
    const state = fresh();
    // Bucket [T0, T0+50): a hit at its last millisecond expires W + 1 ms later.
    decide(state, T0 + 49, 1, 1);
    expect(expiresAtMs(state)).toBe(T0 + 1_050);
    expect(decide(state, T0 + 1_049, 1, 1)).toEqual({
      overLimit: true,
      remaining: 0,
      resetMs: 1,
    });
    expect(decide(state, T0 + 1_050, 1, 1).overLimit).toBe(false);
  });

  it('under-admits by at most one sub-bucket: a hit at a bucket start expires at W + b', () => {
    const state = fresh();
    decide(state, T0, 1, 1);
    expect(decide(state, T0 + W, 1, 1)).toEqual({ overLimit: true, remaining: 0, resetMs: B });
    expect(decide(state, T0 + W + B, 1, 1).overLimit).toBe(false);
  });

  it('walks buckets oldest first to find the exact wait', () => {
    const state = fresh();
    decide(state, T0, 2, 5); // bucket 0, expires T0+1050
    decide(state, T0 + 100, 2, 5); // bucket 2, expires T0+1150
    decide(state, T0 + 300, 1, 5); // bucket 6, expires T0+1350
    const now = T0 + 400;
    evict(state, now, W);
    expect(waitForRoomMs(state, now, 1, 5, W)).toBe(650);
    expect(waitForRoomMs(state, now, 2, 5, W)).toBe(650);
    expect(waitForRoomMs(state, now, 3, 5, W)).toBe(750);
    expect(waitForRoomMs(state, now, 4, 5, W)).toBe(750);
    expect(waitForRoomMs(state, now, 5, 5, W)).toBe(950);
    expect(waitForRoomMs(state, now, 6, 5, W)).toBe(W);
    expect(decide(state, now, 3, 5)).toEqual({ overLimit: true, remaining: 0, resetMs: 750 });
  });

  it('evicts buckets from the front as time passes', () => {
    const state = fresh();
    decide(state, T0, 1, 10);
    decide(state, T0 + 60, 2, 10);
    decide(state, T0 + 120, 3, 10);
    evict(state, T0 + 1_050, W);
    expect(state.total).toBe(5);
    expect(state.length).toBe(2);
    evict(state, T0 + 1_149, W);
    expect(state.total).toBe(3);
    evict(state, T0 + 1_150, W);
    expect(state.total).toBe(0);
    expect(state.length).toBe(0);
  });

  it('groups hits of one sub-bucket and stores at most 21 buckets', () => {
    const state = fresh();
    for (let k = 0; k < 40; k++) {
      decide(state, T0 + k * B, 1, 1_000);
      decide(state, T0 + k * B + 49, 1, 1_000);
    }
    expect(state.length).toBe(SUB_BUCKETS + 1);
    expect(state.total).toBe(2 * (SUB_BUCKETS + 1));
    expect(state.ring.length).toBe(2 * (SUB_BUCKETS + 1));
  });

  it('floors fractional clocks', () => {
    const state = fresh();
    expect(decide(state, T0 + 0.9, 1, 1)).toEqual({
      overLimit: false,
      remaining: 0,
      resetMs: 1_050,
    });
    expect(decide(state, T0 + 1_049.9, 1, 1).resetMs).toBe(1);
  });

  it('counts hits for at least W even when the clock moves backwards', () => {
    const state = fresh();
    decide(state, T0 + 500, 1, 2);
    decide(state, T0 + 100, 1, 2);
    expect(state.length).toBe(1);
    expect(state.total).toBe(2);
    expect(expiresAtMs(state)).toBe(T0 + 1_550);
  });

  it('reports shadow counters charged over the limit', () => {
    const state = fresh();
    charge(state, T0, 5, W);
    charge(state, T0 + 100, 2, W);
    evict(state, T0 + 200, W);
    expect(hasRoom(state, 0, 4)).toBe(false);
    const out: SlidingWindowResult = { overLimit: false, remaining: 0, resetMs: 0 };
    // 7 counted, limit 4: 3 must expire, the first bucket frees 5.
    expect(result(state, T0 + 200, 0, 4, W, true, out)).toEqual({
      overLimit: true,
      remaining: 0,
      resetMs: 850,
    });
  });

  it('result() reads the state after charging, or as is when the batch was rejected', () => {
    const state = fresh();
    decide(state, T0, 1, 5);
    evict(state, T0 + 300, W);
    const out: SlidingWindowResult = { overLimit: false, remaining: 0, resetMs: 0 };
    expect(result(state, T0 + 300, 2, 5, W, false, out)).toEqual({
      overLimit: false,
      remaining: 4,
      resetMs: 750,
    });
    charge(state, T0 + 300, 2, W);
    expect(result(state, T0 + 300, 2, 5, W, false, out)).toEqual({
      overLimit: false,
      remaining: 2,
      resetMs: 750,
    });
  });

  it('expiresAtMs is when the newest bucket expires, 0 when never charged', () => {
    const state = fresh();
    expect(expiresAtMs(state)).toBe(0);
    charge(state, T0, 1, W);
    expect(expiresAtMs(state)).toBe(T0 + 1_050);
    charge(state, T0 + 120, 1, W);
    expect(expiresAtMs(state)).toBe(T0 + 1_150);
    charge(state, T0 + 0, 0, W);
    expect(expiresAtMs(state)).toBe(T0 + 1_150);
  });

  it('cloneState is independent of the original', () => {
    const state = fresh();
    charge(state, T0, 2, W);
    const copy = cloneState(state);
    charge(copy, T0 + 60, 3, W);
    expect(state.total).toBe(2);
    expect(state.length).toBe(1);
    expect(copy.total).toBe(5);
  });
});
