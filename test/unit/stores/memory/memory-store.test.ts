/**
 * What only the memory store does: idle reclaim and the MEMORY_MAX_KEYS cap. The cases every
 * store must pass (all-or-nothing, repeated keys, no allocation on rejection, concurrency) are in
 * the shared contract suite, test/contract/store-contract.test.ts, run against memory and Redis.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createManualClock, type ManualClock } from '../../../../src/clock.js';
import { createMemoryStore, type EvictReason } from '../../../../src/stores/memory/memory-store.js';
import type { CounterStore } from '../../../../src/stores/counter-store.js';
import { specBuilder } from '../../../helpers/specs.js';

const T0 = 1_700_000_000_000;
const W = 1_000;

const spec = specBuilder({ windowMs: W });

interface Harness {
  clock: ManualClock;
  store: CounterStore;
  evictions: [EvictReason, number][];
}

const open: CounterStore[] = [];

function harness(options: { maxKeys?: number; sweepBatch?: number } = {}): Harness {
  const clock = createManualClock(T0);
  const evictions: [EvictReason, number][] = [];
  const store = createMemoryStore({
    clock: clock.now,
    sweepIntervalMs: 0,
    onEvict: (reason, count) => evictions.push([reason, count]),
    ...options,
  });
  open.push(store);
  return { clock, store, evictions };
}

/** Remaining room of `key` under `limit`, read with a check that charges nothing. */
async function peek(store: CounterStore, key: string, limit: number, windowMs = W) {
  const { results } = await store.apply([spec(key, 0, limit, { windowMs })]);
  return results[0]!;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
  vi.restoreAllMocks();
  vi.useRealTimers();
});

describe('memory store: idle reclaim', () => {
  it('reclaims expired keys a few per apply() call, never all at once', async () => {
    const { store, clock, evictions } = harness({ sweepBatch: 2 });
    for (let k = 0; k < 100; k++) await store.apply([spec(`k${k}`, 1, 5)]);
    expect(store.size()).toBe(100);
    clock.advance(W + 50);
    const sizes: number[] = [];
    for (let call = 0; call < 40; call++) {
      await store.apply([spec('probe', 0, 5)]);
      sizes.push(store.size());
    }
    // Each call examines sweepBatch (2) + one per spec (1) entries.
    expect(sizes.slice(0, 4)).toEqual([97, 94, 91, 88]);
    expect(sizes.at(-1)).toBe(0);
    expect(evictions.every(([reason, count]) => reason === 'expired' && count <= 3)).toBe(true);
    expect(evictions.reduce((sum, [, count]) => sum + count, 0)).toBe(100);
  });

  it('keeps live keys while reclaiming expired ones', async () => {
    const { store, clock } = harness({ sweepBatch: 50 });
    await store.apply([spec('short', 1, 5)]);
    await store.apply([spec('long', 1, 5, { windowMs: 60_000 })]);
    clock.advance(W + 50);
    await store.apply([spec('probe', 0, 5)]);
    expect(store.size()).toBe(1);
    expect(await peek(store, 'long', 5, 60_000)).toMatchObject({ remaining: 4 });
  });

  it('drops an expired counter when it is next looked up, even by a rejected request', async () => {
    const { store, clock, evictions } = harness({ sweepBatch: 0 });
    await store.apply([spec('k', 1, 5)]);
    // sweepBatch 0 still examines one entry per spec: here 'k', then 'long' below, so the
    // cursor is past 'k' when it expires.
    await store.apply([spec('long', 1, 5, { windowMs: 60_000 })]);
    clock.advance(W + 50);
    expect((await store.apply([spec('k', 1, 0)])).admitted).toBe(false);
    expect(store.size()).toBe(1);
    expect(evictions).toEqual([['expired', 1]]);
  });

  it('a background timer sweeps idle keys without traffic, and close() stops it', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const clock = createManualClock(T0);
    const store = createMemoryStore({
      clock: clock.now,
      sweepIntervalMs: 1_000,
      timerSweepBatch: 10,
    });
    open.push(store);
    expect(vi.getTimerCount()).toBe(1);
    for (let k = 0; k < 25; k++) await store.apply([spec(`k${k}`, 1, 5)]);
    clock.advance(W + 50);
    vi.advanceTimersByTime(1_000);
    // One tick examines at most timerSweepBatch (10) entries.
    expect(store.size()).toBeGreaterThanOrEqual(15);
    expect(store.size()).toBeLessThan(25);
    vi.advanceTimersByTime(4_000);
    expect(store.size()).toBe(0);
    await store.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('sweepIntervalMs 0 starts no timer, and the default tick sweeps a whole small map', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const clock = createManualClock(T0);
    const off = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    open.push(off);
    expect(vi.getTimerCount()).toBe(0);
    // The default batch per tick (10 000) finishes the reclaim cursor's pass and the next one.
    const on = createMemoryStore({ clock: clock.now, sweepIntervalMs: 1_000 });
    open.push(on);
    expect(vi.getTimerCount()).toBe(1);
    for (let k = 0; k < 25; k++) {
      await off.apply([spec(`k${k}`, 1, 5)]);
      await on.apply([spec(`k${k}`, 1, 5)]);
    }
    const offSize = off.size();
    clock.advance(W + 50);
    vi.advanceTimersByTime(2_000);
    expect(on.size()).toBe(0);
    // Without a timer nothing is reclaimed until the next call.
    expect(off.size()).toBe(offSize);
  });

  it('the debug view shows a limit above 2^32 - 1 as 4294967295, never wrapped', async () => {
    const { store } = harness();
    await store.apply([spec('big', 1, 5_000_000_000)]);
    expect(store.top!(1)).toEqual([
      { key: 'big', count: 1, limit: 4_294_967_295, expiresInMs: expect.any(Number) as number },
    ]);
  });

  it('the timer does not keep the process alive', async () => {
    const setIntervalSpy = vi.spyOn(globalThis, 'setInterval');
    const store = createMemoryStore({ clock: createManualClock(T0).now, sweepIntervalMs: 60_000 });
    const timer = setIntervalSpy.mock.results[0]!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    await store.close();
  });

  it('close() drops every counter', async () => {
    const { store } = harness();
    await store.apply([spec('k', 1, 5)]);
    await store.close();
    expect(store.size()).toBe(0);
  });
});

describe('memory store: maxKeys', () => {
  it('evicts expired entries first, then the least recently used, and counts both', async () => {
    const { store, clock, evictions } = harness({ maxKeys: 3, sweepBatch: 0 });
    const long = { windowMs: 60_000 };
    await store.apply([spec('b', 1, 5, long)]);
    await store.apply([spec('a', 1, 5)]); // 1 s window: expired below
    await store.apply([spec('c', 1, 5, long)]);
    clock.advance(W + 50);

    // Full: 'b' (front) is live, so the cap looks further and drops the expired 'a'.
    await store.apply([spec('d', 1, 5, long)]);
    expect(store.size()).toBe(3);
    expect(evictions).toEqual([['expired', 1]]);

    // Using 'b' makes 'c' the least recently used.
    expect(await peek(store, 'b', 5, 60_000)).toMatchObject({ remaining: 4 });
    await store.apply([spec('e', 1, 5, long)]);
    expect(store.size()).toBe(3);
    expect(evictions).toEqual([
      ['expired', 1],
      ['lru', 1],
    ]);
    expect(await peek(store, 'b', 5, 60_000)).toMatchObject({ remaining: 4 });
    // 'c' was forgotten: its count starts over.
    expect(await peek(store, 'c', 5, 60_000)).toMatchObject({ remaining: 5 });
  });

  it("a cap below one batch's counters keeps every surviving counter exact", async () => {
    // Several limits per rule can put more counters in one request than MEMORY_MAX_KEYS.
    const { store, evictions } = harness({ maxKeys: 2, sweepBatch: 0 });
    await store.apply([spec('z', 1, 9)]);
    const batch = await store.apply([spec('x', 1, 9), spec('y', 2, 9), spec('z', 3, 9)]);
    expect(batch.admitted).toBe(true);
    expect(batch.results.map((r) => r.remaining)).toEqual([8, 7, 5]);
    expect(store.size()).toBe(2);
    expect(evictions).toEqual([['lru', 1]]);
    // The new x, not used since, made way: y and z hold exactly their own counts.
    const left = await Promise.all(['x', 'y', 'z'].map((key) => peek(store, key, 9)));
    expect(left.map((r) => r.remaining)).toEqual([9, 7, 5]);
  });

  it("a counter evicted while its own batch is applied is not written over the slot's new owner", async () => {
    // 70 counters, all used again; the hand clears 64 used bits, then takes the one it is at:
    // k64, which the batch loaded after the new n1, whose insert the eviction made room for.
    const { store } = harness({ maxKeys: 70, sweepBatch: 0 });
    const long = { windowMs: 60_000 };
    for (let k = 0; k < 70; k++) await store.apply([spec(`k${k}`, 1, 9, long)]);
    for (let k = 0; k < 70; k++) await peek(store, `k${k}`, 9, 60_000);
    const batch = await store.apply([spec('n1', 5, 9, long), spec('k64', 1, 9, long)]);
    expect(batch.results.map((r) => r.remaining)).toEqual([4, 7]);
    expect(store.size()).toBe(70);
    expect((await peek(store, 'n1', 9, 60_000)).remaining).toBe(4);
    expect((await peek(store, 'k64', 9, 60_000)).remaining).toBe(9);
    expect((await peek(store, 'k63', 9, 60_000)).remaining).toBe(8);
  });

  it('a rejected request never evicts anything', async () => {
    const { store, evictions } = harness({ maxKeys: 2 });
    await store.apply([spec('a', 1, 5)]);
    await store.apply([spec('b', 1, 5)]);
    expect((await store.apply([spec('c', 1, 5), spec('a', 5, 5)])).admitted).toBe(false);
    expect(store.size()).toBe(2);
    expect(evictions).toEqual([]);
  });

  it('a failing onEvict does not fail the decision', async () => {
    const clock = createManualClock(T0);
    const store = createMemoryStore({
      clock: clock.now,
      maxKeys: 1,
      sweepIntervalMs: 0,
      onEvict: () => {
        throw new Error('metrics sink is broken');
      },
    });
    open.push(store);
    await store.apply([spec('a', 1, 5)]);
    await expect(store.apply([spec('b', 1, 5)])).resolves.toMatchObject({ admitted: true });
    expect(store.size()).toBe(1);
  });
});

describe('memory store: maxKeys under a flood of new keys', () => {
  it('never evicts a counter used between the new keys, while keys seen once are evicted', async () => {
    const { store, evictions } = harness({ maxKeys: 4, sweepBatch: 0 });
    const long = { windowMs: 60_000 };
    const remaining: number[] = [];
    for (let round = 0; round < 12; round++) {
      remaining.push((await store.apply([spec('hot', 1, 100, long)])).results[0]!.remaining);
      await store.apply([spec(`cold${round}`, 1, 100, long)]);
    }
    // Every hit on the hot key stayed counted.
    expect(remaining).toEqual(Array.from({ length: 12 }, (_, k) => 99 - k));
    expect(store.size()).toBe(4);
    const lru = evictions.filter(([reason]) => reason === 'lru');
    expect(lru.reduce((sum, [, count]) => sum + count, 0)).toBe(13 - 4);
  });
});

describe('memory store: batch grouping', () => {
  it('a one-spec batch after a batch with a repeated key is checked with its own hits', async () => {
    // applyNow groups a one-spec batch itself (no BatchKeys.group call); the cumulative hits of
    // the batch before must not leak into it.
    const { store } = harness();
    await store.apply([spec('a', 6, 100), spec('a', 1, 100)]);
    const { admitted, results } = await store.apply([spec('b', 5, 5)]);
    expect(admitted).toBe(true);
    expect(results[0]).toMatchObject({ overLimit: false, remaining: 0 });
  });
});
