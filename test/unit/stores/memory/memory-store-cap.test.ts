/**
 * The memory store's key cap (`MEMORY_MAX_KEYS`, docs/operations.md "Memory store") at the
 * places the clock hand decides: which counter a new key replaces (an expired one, else one not
 * used since the hand last passed, never one limiting someone), where the hand gives up, and what
 * a counter evicted in the middle of its own batch leaves behind.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../../../src/clock.js';
import type { CounterStore } from '../../../../src/stores/counter-store.js';
import { createMemoryStore, type EvictReason } from '../../../../src/stores/memory/memory-store.js';
import { spec } from '../../../helpers/specs.js';

const T0 = 1_700_000_000_000;

const open: CounterStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
});

function make(maxKeys: number) {
  const clock = createManualClock(T0);
  const evictions: [EvictReason, number][] = [];
  let notStored = 0;
  const store = createMemoryStore({
    clock: clock.now,
    maxKeys,
    sweepIntervalMs: 0,
    sweepBatch: 0,
    onEvict: (reason, count) => void evictions.push([reason, count]),
    onNotStored: (count) => (notStored += count),
  });
  open.push(store);
  const keys = () =>
    store.top!(maxKeys + 1)
      .map((row) => row.key)
      .sort();
  return { clock, store, evictions, keys, notStored: () => notStored };
}

const range = (n: number, name: string) => Array.from({ length: n }, (_, i) => `${name}${i}`);

describe('memory store cap: the clock hand', () => {
  it('gives counters in use a second chance: after a full turn the first one passed goes', async () => {
    const { store, evictions, keys } = make(2);
    for (const key of ['a', 'b', 'a', 'b']) await store.apply([spec(key)]);
    await store.apply([spec('c')]);
    // The hand cleared the used bits of 'a' and 'b', came round, and took 'a'.
    expect(keys()).toEqual(['b', 'c']);
    expect(evictions).toEqual([['lru', 1]]);
    expect((await store.apply([spec('b', 0)])).results[0]!.remaining).toBe(8);
  });

  it('drops an expired counter it passes as expired, even one expiring this very millisecond', async () => {
    const { clock, store, evictions, keys } = make(41);
    const live = range(40, 'live');
    await store.apply(live.map((key) => spec(key)));
    // A fixed window of 1 s from T0: its hits are gone at exactly T0 + 1 s.
    await store.apply([spec('short', 1, 10, { algorithm: 'fixed_window', windowMs: 1_000 })]);
    // Used twice: the hand passes them. The reclaim cursor has passed 'short' while it was live.
    await store.apply(live.map((key) => spec(key)));
    clock.set(T0 + 1_000);
    await store.apply([spec('new')]);
    expect(evictions).toEqual([['expired', 1]]);
    expect(keys()).toEqual([...live, 'new'].sort());
    expect((await store.apply([spec('live0', 0)])).results[0]!.remaining).toBe(8);
  });

  it('gives up after 256 limiting counters in a row: the new key is decided but not stored', async () => {
    // 256 limiting counters, then one that is not: the hand stops just before it.
    const { store, evictions, keys, notStored } = make(257);
    await store.apply(range(256, 'limiting').map((key) => spec(key, 10, 10)));
    await store.apply([spec('quiet', 1, 10)]);
    const { admitted, results } = await store.apply([spec('new', 3, 10)]);
    expect(admitted).toBe(true);
    expect(results[0]).toMatchObject({ overLimit: false, remaining: 7 });
    expect(notStored()).toBe(1);
    expect(evictions).toEqual([]);
    expect(keys()).not.toContain('new');
    expect(keys()).toContain('quiet');
  });

  it('after 255 limiting counters it still reaches the next one and takes it', async () => {
    const { store, evictions, keys, notStored } = make(257);
    await store.apply(range(255, 'limiting').map((key) => spec(key, 10, 10)));
    await store.apply([spec('quiet', 1, 10)]);
    await store.apply([spec('other', 1, 10)]);
    await store.apply([spec('new', 3, 10)]);
    expect(notStored()).toBe(0);
    expect(evictions).toEqual([['lru', 1]]);
    expect(keys()).toContain('new');
    expect(keys()).not.toContain('quiet');
    expect(keys()).toContain('other');
  });
});

describe('memory store cap: within one batch', () => {
  it('a counter evicted by a later key of its own batch does not write over that key', async () => {
    const { store, keys } = make(1);
    // 'a' is charged, then evicted to make room for 'b', whose slot it was; its repeat must not
    // write its limit or its count into that slot.
    const { admitted } = await store.apply([spec('a', 1, 10), spec('b', 1, 20), spec('a', 1, 30)]);
    expect(admitted).toBe(true);
    expect(keys()).toEqual(['b']);
    expect(store.top!(1).map((row) => [row.key, row.count, row.limit])).toEqual([['b', 1, 20]]);
  });

  it.each([
    ['no spec on it is', [100, 10], false],
    ['its first spec is', [2, 100], true],
    ['a repeat is', [100, 2], true],
  ] as const)(
    'a counter some batch left without room is kept at the cap: when %s, kept = %s',
    async (_name, [firstLimit, repeatLimit], kept) => {
      const { store, keys, notStored } = make(1);
      await store.apply([spec('a', 1, firstLimit), spec('a', 1, repeatLimit)]);
      await store.apply([spec('b', 1, 10)]);
      expect(keys()).toEqual([kept ? 'a' : 'b']);
      expect(notStored()).toBe(kept ? 1 : 0);
    },
  );
});
