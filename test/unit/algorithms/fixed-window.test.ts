/**
 * `fixed_window` against the reference's own numbers (docs/semantics.md §4): epoch-aligned
 * windows, `duration_until_reset` = window end - now, `remaining` = limit - count. Unlike the
 * reference, a rejected request charges nothing. Checked on the module and through the memory store
 * with a manual clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { fixedWindow, windowStartMs } from '../../../src/algorithms/fixed-window.js';
import { createCounterState, type AlgorithmResult } from '../../../src/algorithms/types.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { CounterStore } from '../../../src/stores/counter-store.js';
import { specBuilder } from '../../helpers/specs.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const open: CounterStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
});

function storeAt(startMs: number) {
  const clock = createManualClock(startMs);
  const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  open.push(store);
  return { clock, store };
}

const spec = specBuilder({ algorithm: 'fixed_window', windowMs: MINUTE });

/** One request on the bare module: refresh, hasRoom, charge on room, result. */
function step(
  state: ReturnType<typeof createCounterState>,
  nowMs: number,
  hits: number,
  limit: number,
  windowMs: number,
): AlgorithmResult {
  const params = { limit, windowMs, burst: limit };
  fixedWindow.refresh(state, nowMs, params);
  const room = fixedWindow.hasRoom(state, nowMs, hits, params);
  if (room) fixedWindow.charge(state, nowMs, hits, params);
  return fixedWindow.result(state, nowMs, hits, params, !room, {
    overLimit: false,
    remaining: 0,
    resetMs: 0,
  });
}

// The reference: duration_until_reset = divider - now % divider (seconds), remaining = limit - count.
const TABLE: {
  name: string;
  windowMs: number;
  limit: number;
  nowMs: number;
  resetMs: number;
}[] = [
  {
    name: '10 per MINUTE at 2222 s',
    windowMs: MINUTE,
    limit: 10,
    nowMs: 2222 * SECOND,
    resetMs: 58 * SECOND,
  },
  {
    name: '10 per HOUR at 2222 s',
    windowMs: HOUR,
    limit: 10,
    nowMs: 2222 * SECOND,
    resetMs: (3600 - 2222) * SECOND,
  },
  {
    name: '10 per DAY at 2222 s',
    windowMs: DAY,
    limit: 10,
    nowMs: 2222 * SECOND,
    resetMs: (86400 - 2222) * SECOND,
  },
  {
    name: '10 per SECOND at 2222 s',
    windowMs: SECOND,
    limit: 10,
    nowMs: 2222 * SECOND,
    resetMs: SECOND,
  },
  {
    name: '10 per MINUTE x5 at 2222 s (window 300 s)',
    windowMs: 5 * MINUTE,
    limit: 10,
    nowMs: 2222 * SECOND,
    resetMs: (300 - (2222 % 300)) * SECOND,
  },
  {
    name: '10 per MINUTE at 2222.5 s (ms inside the second)',
    windowMs: MINUTE,
    limit: 10,
    nowMs: 2222_500,
    resetMs: 57_500,
  },
];

describe('fixed_window reproduces the reference (table)', () => {
  for (const row of TABLE) {
    it(`${row.name}: reset ${row.resetMs} ms, remaining ${row.limit - 1} after the first hit`, async () => {
      const state = createCounterState();
      const first = step(state, row.nowMs, 1, row.limit, row.windowMs);
      expect(first).toEqual({ overLimit: false, remaining: row.limit - 1, resetMs: row.resetMs });

      const { store } = storeAt(row.nowMs);
      const { admitted, results } = await store.apply([
        spec('k', 1, row.limit, { windowMs: row.windowMs }),
      ]);
      expect(admitted).toBe(true);
      expect(results[0]).toEqual({
        overLimit: false,
        remaining: row.limit - 1,
        resetMs: row.resetMs,
      });
    });
  }

  it('the reference numbers by hand: 58 s, 1378 s, 84178 s, 178 s', () => {
    expect(TABLE.map((r) => r.resetMs / SECOND).slice(0, 5)).toEqual([58, 1378, 84178, 1, 178]);
  });

  it('a unit_multiplier 5 minute window is aligned to multiples of 300 s', () => {
    expect(windowStartMs(2222 * SECOND, 5 * MINUTE)).toBe(2100 * SECOND);
    expect(windowStartMs(2399_999, 5 * MINUTE)).toBe(2100 * SECOND);
    expect(windowStartMs(2400 * SECOND, 5 * MINUTE)).toBe(2400 * SECOND);
    expect(windowStartMs(0, 5 * MINUTE)).toBe(0);
  });
});

describe('fixed_window through the memory store with a manual clock', () => {
  it('counts down 9..0, then rejects with the window end as reset', async () => {
    const { clock, store } = storeAt(2222 * SECOND);
    const remaining: number[] = [];
    for (let i = 0; i < 10; i++) {
      const { admitted, results } = await store.apply([spec('k', 1, 10)]);
      expect(admitted).toBe(true);
      remaining.push(results[0]!.remaining);
      expect(results[0]!.resetMs).toBe(58 * SECOND - i * 100);
      clock.advance(100);
    }
    expect(remaining).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    const over = await store.apply([spec('k', 1, 10)]);
    expect(over.admitted).toBe(false);
    expect(over.results[0]).toEqual({ overLimit: true, remaining: 0, resetMs: 57 * SECOND });
  });

  it('rejected hits charge nothing (unlike the reference)', async () => {
    const { store } = storeAt(2222 * SECOND);
    expect((await store.apply([spec('k', 7, 10)])).results[0]!.remaining).toBe(3);
    // 4 hits do not fit in 3: rejected, and the count stays 7.
    const over = await store.apply([spec('k', 4, 10)]);
    expect(over.admitted).toBe(false);
    expect(over.results[0]!.overLimit).toBe(true);
    for (let i = 0; i < 5; i++)
      expect((await store.apply([spec('k', 4, 10)])).admitted).toBe(false);
    // Exactly the 3 left still fit.
    const fit = await store.apply([spec('k', 3, 10)]);
    expect(fit.admitted).toBe(true);
    expect(fit.results[0]!.remaining).toBe(0);
    expect((await store.apply([spec('k', 1, 10)])).admitted).toBe(false);
  });

  it('a request larger than the limit is refused with the window end as reset', async () => {
    const { store } = storeAt(2222 * SECOND);
    const over = await store.apply([spec('k', 11, 10)]);
    expect(over.admitted).toBe(false);
    expect(over.results[0]).toEqual({ overLimit: true, remaining: 0, resetMs: 58 * SECOND });
  });

  it('rolls over at the window boundary: full at 2279.999 s, fresh at 2280 s', async () => {
    const { clock, store } = storeAt(2222 * SECOND);
    expect((await store.apply([spec('k', 10, 10)])).admitted).toBe(true);
    clock.set(2279_999);
    const last = await store.apply([spec('k', 1, 10)]);
    expect(last.admitted).toBe(false);
    expect(last.results[0]!.resetMs).toBe(1);
    clock.advance(1);
    const fresh = await store.apply([spec('k', 1, 10)]);
    expect(fresh.admitted).toBe(true);
    expect(fresh.results[0]).toEqual({ overLimit: false, remaining: 9, resetMs: MINUTE });
  });

  it('a 300 s window (minute x 5) rolls over at 2400 s, not at the next minute', async () => {
    const { clock, store } = storeAt(2222 * SECOND);
    expect((await store.apply([spec('k', 3, 3, { windowMs: 5 * MINUTE })])).admitted).toBe(true);
    clock.set(2280 * SECOND); // next minute: still the same 300 s window
    const stillFull = await store.apply([spec('k', 1, 3, { windowMs: 5 * MINUTE })]);
    expect(stillFull.admitted).toBe(false);
    expect(stillFull.results[0]!.resetMs).toBe(120 * SECOND);
    clock.set(2400 * SECOND - 1);
    expect((await store.apply([spec('k', 1, 3, { windowMs: 5 * MINUTE })])).admitted).toBe(false);
    clock.advance(1);
    const fresh = await store.apply([spec('k', 1, 3, { windowMs: 5 * MINUTE })]);
    expect(fresh.admitted).toBe(true);
    expect(fresh.results[0]).toEqual({ overLimit: false, remaining: 2, resetMs: 300 * SECOND });
  });
});
