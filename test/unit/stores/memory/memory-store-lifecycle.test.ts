/**
 * The memory store's life around its decisions (src/stores/memory/memory-store.ts): health, how a
 * failing call reaches the caller, `reset(key)` (the debug server's counter reset), the default
 * background sweep and `close()`.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createManualClock } from '../../../../src/clock.js';
import type { Algorithm } from '../../../../src/algorithms/index.js';
import { SluiceError } from '../../../../src/errors.js';
import type { CounterStore } from '../../../../src/stores/counter-store.js';
import {
  createMemoryStore,
  DEFAULT_SWEEP_INTERVAL_MS,
  type EvictReason,
} from '../../../../src/stores/memory/memory-store.js';
import { spec } from '../../../helpers/specs.js';

const T0 = 1_700_000_000_000;

const open: CounterStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
  vi.useRealTimers();
});

function make(options: { sweepIntervalMs?: number } = { sweepIntervalMs: 0 }) {
  const clock = createManualClock(T0);
  const evictions: [EvictReason, number][] = [];
  const store = createMemoryStore({
    clock: clock.now,
    onEvict: (reason, count) => void evictions.push([reason, count]),
    ...options,
  });
  open.push(store);
  return { clock, store, evictions };
}

describe('memory store: health and failures', () => {
  it('is always healthy: there is nothing to lose a connection to', () => {
    expect(make().store.healthy()).toBe(true);
  });

  it('a call that fails inside the store rejects its promise with a SluiceError, never throws', async () => {
    const { store } = make();
    const bad = spec('k', 1, 10, { algorithm: 'no_such_algorithm' as Algorithm });
    let pending: Promise<unknown> | undefined;
    expect(() => (pending = store.apply([bad]))).not.toThrow();
    const error: unknown = await pending!.then(
      () => 'resolved',
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(SluiceError);
    expect((error as SluiceError).code).toBe('INTERNAL');
    // The store still decides the next call.
    expect((await store.apply([spec('k', 1, 10)])).results[0]!.remaining).toBe(9);
  });
});

describe('memory store: reset(key)', () => {
  it('forgets a counter, which then starts over, and says whether there was one', async () => {
    const { store } = make();
    await store.apply([spec('a', 10, 10), spec('b', 3, 10)]);
    expect((await store.apply([spec('a', 1, 10)])).admitted).toBe(false);

    await expect(store.reset!('a')).resolves.toBe(true);
    expect(store.size()).toBe(1);
    const again = await store.apply([spec('a', 1, 10)]);
    expect(again.admitted).toBe(true);
    expect(again.results[0]!.remaining).toBe(9);
    // Only that key: 'b' keeps its count.
    expect((await store.apply([spec('b', 0, 10)])).results[0]!.remaining).toBe(7);

    await expect(store.reset!('never-seen')).resolves.toBe(false);
    await expect(store.reset!('a')).resolves.toBe(true);
    await expect(store.reset!('a')).resolves.toBe(false);
    expect(store.size()).toBe(1);
  });

  it('a reset busy counter leaves nothing behind for the key that reuses its slot', async () => {
    const { clock, store } = make();
    // Hits in several sub-buckets: the counter is kept whole, outside the columns.
    for (let i = 0; i < 5; i++) {
      await store.apply([spec('busy', 1, 10)]);
      clock.advance(5_000);
    }
    await store.reset!('busy');
    // 'next' takes the freed slot; it answers as 'control', a key in a slot never used, does.
    const [next, control] = (await store.apply([spec('next', 1, 10), spec('control', 1, 10)]))
      .results;
    expect(next).toEqual(control);
    expect(next!.remaining).toBe(9);
    // A sliding window counts a hit for up to a window and a sub-bucket.
    clock.advance(63_000);
    expect(store.top!(5)).toEqual([]);
  });
});

describe('memory store: background sweep and close()', () => {
  it('by default a timer reclaims idle counters once a second, with no traffic', async () => {
    vi.useFakeTimers();
    const { clock, store, evictions } = make({});
    await store.apply([spec('idle', 1, 10, { windowMs: 1_000, algorithm: 'fixed_window' })]);
    clock.advance(2_000);
    expect(store.size()).toBe(1);
    vi.advanceTimersByTime(DEFAULT_SWEEP_INTERVAL_MS - 1);
    expect(store.size()).toBe(1);
    vi.advanceTimersByTime(1);
    expect(store.size()).toBe(0);
    expect(evictions).toEqual([['expired', 1]]);
  });

  it('the timer runs at sweepIntervalMs when given', async () => {
    vi.useFakeTimers();
    const { clock, store } = make({ sweepIntervalMs: 250 });
    await store.apply([spec('idle', 1, 10, { windowMs: 1_000, algorithm: 'fixed_window' })]);
    clock.advance(2_000);
    vi.advanceTimersByTime(249);
    expect(store.size()).toBe(1);
    vi.advanceTimersByTime(1);
    expect(store.size()).toBe(0);
  });

  it('close() stops the timer and drops every counter', async () => {
    vi.useFakeTimers();
    const { store } = make({});
    await store.apply([spec('a'), spec('b')]);
    expect(vi.getTimerCount()).toBe(1);
    await store.close();
    expect(vi.getTimerCount()).toBe(0);
    expect(store.size()).toBe(0);
    expect(store.top!(5)).toEqual([]);
  });
});
