/**
 * The memory store through the public CounterStore interface (src/stores/memory/memory-store.ts,
 * docs/semantics.md §3), at the places its layout could leak one counter into another: many
 * counters (the columns grow), slots freed by expiry and reused, large batches with repeated
 * keys (checked cumulatively, as small ones are), busy counters with many stored pairs, the
 * debug view's `top(n)`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../../../src/clock.js';
import type { Algorithm } from '../../../../src/algorithms/index.js';
import type { CounterStore } from '../../../../src/stores/counter-store.js';
import { createMemoryStore, type EvictReason } from '../../../../src/stores/memory/memory-store.js';
import { spec } from '../../../helpers/specs.js';

const T0 = 1_700_000_000_000;

const open: CounterStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
});

function make() {
  const clock = createManualClock(T0);
  const evictions: [EvictReason, number][] = [];
  const store = createMemoryStore({
    clock: clock.now,
    sweepIntervalMs: 0,
    sweepBatch: 0,
    onEvict: (reason, count) => void evictions.push([reason, count]),
  });
  open.push(store);
  return { clock, store, evictions };
}

describe('memory store: many counters', () => {
  it.each(['sliding_window', 'fixed_window', 'token_bucket', 'sliding_log'] as Algorithm[])(
    '%s: 3000 counters keep their own counts as the store grows',
    async (algorithm) => {
      const { store } = make();
      for (let i = 0; i < 3_000; i++) {
        await store.apply([spec(`k${i}`, 1 + (i % 5), 10, { algorithm })]);
      }
      expect(store.size()).toBe(3_000);
      for (const i of [0, 1, 2, 1023, 1024, 1025, 2047, 2048, 2999]) {
        const { results } = await store.apply([spec(`k${i}`, 0, 10, { algorithm })]);
        expect(results[0]!.remaining, `k${i}`).toBe(10 - (1 + (i % 5)));
      }
    },
  );

  it('a slot freed by an expired counter starts from nothing when reused', async () => {
    const { clock, store } = make();
    for (let i = 0; i < 50; i++) {
      await store.apply([spec(`old${i}`, 4, 5, { windowMs: 1_000, algorithm: 'fixed_window' })]);
    }
    clock.advance(2_000);
    // Each lookup of an expired counter frees its slot; new counters take those slots.
    for (let i = 0; i < 50; i++) {
      expect((await store.apply([spec(`old${i}`, 0, 5, { windowMs: 1_000 })])).results[0]).toEqual(
        expect.objectContaining({ remaining: 5 }),
      );
    }
    for (let i = 0; i < 50; i++) {
      const { results } = await store.apply([spec(`new${i}`, 1, 7, { algorithm: 'sliding_log' })]);
      expect(results[0]).toEqual({ overLimit: false, remaining: 6, resetMs: 60_000 });
    }
    const top = store.top!(100);
    expect(top.filter((row) => row.key.startsWith('new'))).toHaveLength(50);
    for (const row of top) expect(row).toMatchObject({ count: 1, limit: 7 });
  });
});

describe('memory store: batches', () => {
  it('a batch of more than 16 specs checks a repeated key cumulatively, like a small one', async () => {
    for (const size of [4, 40]) {
      const { store } = make();
      const fillers = Array.from({ length: size - 3 }, (_, i) => spec(`f${i}`, 1, 100));
      // 'r' appears three times with 1 + 1 + 1 hits under a limit of 2: the third has no room.
      const batch = [spec('r', 1, 2), ...fillers, spec('r', 1, 2), spec('r', 1, 2)];
      const refused = await store.apply(batch);
      expect(refused.admitted, `size ${size}`).toBe(false);
      expect(refused.results.at(-1)!.overLimit).toBe(true);
      expect(refused.results.at(-2)!.overLimit).toBe(false);
      expect(refused.results[0]!.overLimit).toBe(false);
      expect(store.size()).toBe(0);
      // Without the third, the pair fits and 'r' is left with 0.
      const admitted = await store.apply(batch.slice(0, -1));
      expect(admitted.admitted).toBe(true);
      expect(admitted.results[0]!.remaining).toBe(0);
      expect(admitted.results.at(-1)!.remaining).toBe(0);
      expect(store.size()).toBe(size - 2);
    }
  });

  it('a busy counter with hits in many sub-buckets keeps every one of them', async () => {
    const { clock, store } = make();
    // 20 hits 3 s apart in a 60 s window: 20 stored buckets, then each leaves in turn.
    for (let i = 0; i < 20; i++) {
      expect((await store.apply([spec('busy', 1, 20)])).results[0]!.remaining).toBe(19 - i);
      clock.advance(3_000);
    }
    expect((await store.apply([spec('busy', 1, 20)])).admitted).toBe(false);
    // At T0 + 63 s the first bucket (T0) has left: exactly one hit fits.
    clock.set(T0 + 63_000);
    const one = await store.apply([spec('busy', 1, 20)]);
    expect(one.admitted).toBe(true);
    expect(one.results[0]!.remaining).toBe(0);
  });
});

describe('memory store: top(n)', () => {
  it('n is floored; ties keep map order; counts and limits are the latest', async () => {
    const { clock, store } = make();
    await store.apply([spec('a', 2, 10), spec('b', 2, 10), spec('c', 5, 10), spec('d', 1, 10)]);
    await store.apply([spec('a', 1, 30)]);
    clock.advance(1_000);
    expect(store.top!(2.9).map((row) => row.key)).toEqual(['c', 'a']);
    expect(store.top!(3)).toEqual([
      { key: 'c', count: 5, limit: 10, expiresInMs: 60_000 },
      { key: 'a', count: 3, limit: 30, expiresInMs: 60_000 },
      { key: 'b', count: 2, limit: 10, expiresInMs: 60_000 },
    ]);
    expect(store.top!(-1)).toEqual([]);
    expect(store.top!(0.5)).toEqual([]);
  });
});
