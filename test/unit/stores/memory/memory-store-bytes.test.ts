/**
 * The memory store's byte cap (`maxBytes`, the `MEMORY_MAX_BYTES` setting; docs/operations.md,
 * "Capacity planning"): long keys and busy counters are bounded in bytes, not only in count, by
 * the same eviction rules as the key cap (expired first, then not recently used, never a counter
 * that is limiting someone), and the bytes counted come back when counters go. The heap the store
 * really holds under the cap is measured in memory-store-heap.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../../../src/clock.js';
import type { CounterStore } from '../../../../src/stores/counter-store.js';
import { createMemoryStore, type EvictReason } from '../../../../src/stores/memory/memory-store.js';
import { specBuilder } from '../../../helpers/specs.js';

const T0 = 1_700_000_000_000;
/** One hour: nothing expires unless a test moves the clock that far. */
const HOUR = 3_600_000;
const spec = specBuilder({ algorithm: 'fixed_window', windowMs: HOUR, limit: 100 });

const open: CounterStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
});

/** A store capped at `maxBytes` (and a million keys), with its clock and what it reported. */
function make(maxBytes: number) {
  const clock = createManualClock(T0);
  const evicted: Record<EvictReason, number> = { expired: 0, lru: 0 };
  let notStored = 0;
  const store = createMemoryStore({
    clock: clock.now,
    maxBytes,
    sweepIntervalMs: 0,
    sweepBatch: 0,
    onEvict: (reason, count) => void (evicted[reason] += count),
    onNotStored: (count) => void (notStored += count),
  });
  open.push(store);
  return { clock, store, evicted, notStored: () => notStored };
}

/** Key `i` of a flood: distinct, `chars` characters of `fill` after its number. */
const longKey = (i: number, chars: number, fill = 'v') =>
  `fw|${HOUR}|flood|v=${i}-${fill.repeat(chars)}`;

/** Send keys `from` to `to - 1` (each `chars` long) in batches of 64, as one request would. */
async function flood(store: CounterStore, from: number, to: number, chars: number, fill?: string) {
  for (let i = from; i < to; i += 64) {
    const batch = [];
    for (let k = i; k < Math.min(to, i + 64); k++) batch.push(spec(longKey(k, chars, fill)));
    const result = await store.apply(batch);
    expect(result.admitted).toBe(true);
  }
}

describe('memory store: the byte cap', () => {
  it('holds only as many 4,000-character keys as fit in the bytes, far under the key cap', async () => {
    const { store, evicted } = make(1_048_576);
    await flood(store, 0, 1_000, 4_000);
    // About 1 MiB / (4,000 characters + the fixed cost of a counter): some 250, not 1,000.
    expect(store.size()).toBeGreaterThan(200);
    expect(store.size()).toBeLessThan(262);
    // Every key past that evicted one not used since (each was seen once), and was counted.
    expect(evicted).toEqual({ expired: 0, lru: 1_000 - store.size() });
    // The newest key is held with its hit; the first ones were evicted and start again.
    expect((await store.apply([spec(longKey(999, 4_000), 0)])).results[0]!.remaining).toBe(99);
    expect((await store.apply([spec(longKey(0, 4_000), 0)])).results[0]!.remaining).toBe(100);
  });

  it('counts a counter at 192 bytes plus its key, rounded up to 8: a cap of exactly three holds three', async () => {
    // 13 characters, counted as 16: 208 bytes a counter.
    const keys = ['key-aaaaaaaa1', 'key-aaaaaaaa2', 'key-aaaaaaaa3', 'key-aaaaaaaa4'];
    const exact = make(3 * 208);
    for (const key of keys.slice(0, 3)) await exact.store.apply([spec(key)]);
    expect(exact.store.size()).toBe(3);
    expect(exact.evicted.lru).toBe(0);
    await exact.store.apply([spec(keys[3]!)]);
    expect(exact.store.size()).toBe(3);
    expect(exact.evicted.lru).toBe(1);
    // A byte less, and the third takes the place of one of the first two.
    const short = make(3 * 208 - 1);
    for (const key of keys.slice(0, 3)) await short.store.apply([spec(key)]);
    expect(short.store.size()).toBe(2);
    expect(short.evicted.lru).toBe(1);
    // A cap of exactly one counter holds it; a byte less holds none (and drops none).
    const one = make(208);
    await one.store.apply([spec(keys[0]!)]);
    expect(one.store.size()).toBe(1);
    const none = make(207);
    await none.store.apply([spec(keys[0]!)]);
    expect(none.store.size()).toBe(0);
    expect(none.notStored()).toBe(1);
  });

  it('counts a key with any character outside ASCII at two bytes each, its ASCII ones included', async () => {
    // 13 characters at two bytes: 26, counted as 32, so 224 bytes a counter.
    for (const odd of ['é', '€', '😀']) {
      const key = (i: number) => `key-aaaaaa${i}${odd}`.padEnd(13, 'b');
      const exact = make(2 * 224);
      await exact.store.apply([spec(key(1))]);
      await exact.store.apply([spec(key(2))]);
      expect(exact.evicted.lru, odd).toBe(0);
      const short = make(2 * 224 - 1);
      await short.store.apply([spec(key(1))]);
      await short.store.apply([spec(key(2))]);
      expect(short.evicted.lru, odd).toBe(1);
    }
  });

  it("counts a busy counter's state at 256 bytes plus 8 a number of its ring, growth included", async () => {
    const log = specBuilder({ algorithm: 'sliding_log', windowMs: HOUR, limit: 100 });
    // Key 'w' (200 bytes) with hits in 3 milliseconds: a ring of 4 pairs, 8 numbers (320 bytes);
    // then 'q' (200 bytes) fits exactly.
    const run = async (maxBytes: number) => {
      const made = make(maxBytes);
      for (let ms = 0; ms < 3; ms++) {
        await made.store.apply([log('w')]);
        made.clock.advance(1);
      }
      await made.store.apply([spec('q')]);
      return made;
    };
    const exact = await run(720);
    expect(exact.store.size()).toBe(2);
    expect(exact.evicted.lru).toBe(0);
    // A byte less: 'w', the only counter, goes to make room for 'q' (the clock hand clears its
    // used bit, comes round, and takes it).
    const short = await run(719);
    expect(short.store.size()).toBe(1);
    expect(short.evicted.lru).toBe(1);
    // Hits in a fifth millisecond grow the ring to 8 pairs (64 bytes more): 'q' is shed.
    await exact.store.apply([log('w')]);
    exact.clock.advance(1);
    expect(exact.evicted.lru).toBe(0);
    await exact.store.apply([log('w')]);
    expect(exact.evicted.lru).toBe(1);
    expect(exact.store.size()).toBe(1);
    expect((await exact.store.apply([log('w', 0)])).results[0]!.remaining).toBe(95);
  });

  it('counts a key with a character outside ASCII at two bytes a character', async () => {
    const ascii = make(1_048_576);
    await flood(ascii.store, 0, 500, 2_000);
    const wide = make(1_048_576);
    await flood(wide.store, 0, 500, 2_000, '€');
    // V8 holds such a key at two bytes a character, so half as many fit.
    const ratio = ascii.store.size() / wide.store.size();
    expect(ratio).toBeGreaterThan(1.8);
    expect(ratio).toBeLessThan(2.1);
  });

  it('drops expired counters before live ones, and never one that is limiting someone', async () => {
    const { clock, store, evicted, notStored } = make(65_536);
    // Short-lived counters first, then limiting ones (limit 1, one hit: no room left).
    const shortKeys = Array.from({ length: 5 }, (_, i) => longKey(i, 4_000, 's'));
    for (const key of shortKeys) await store.apply([spec(key, 1, 100, { windowMs: 1_000 })]);
    // 15 counters of 4,000-character keys fit in 64 KiB (each is counted at its 4,024
    // characters and a fixed cost of under 350 bytes; 16 would need under 72).
    let limiting = 0;
    for (let i = 0; store.size() < 15; i++, limiting++) {
      await store.apply([spec(longKey(i, 4_000, 'l'), 1, 1)]);
    }
    const full = store.size();
    expect(evicted).toEqual({ expired: 0, lru: 0 });

    // The short-lived counters expire: new keys take their place, counted as expired.
    clock.advance(1_000);
    for (let i = 0; i < 5; i++) await store.apply([spec(longKey(i, 4_000, 'n'))]);
    expect(store.size()).toBe(full);
    expect(evicted).toEqual({ expired: 5, lru: 0 });
    expect(notStored()).toBe(0);

    // The new ones are charged to their limit: now every counter held is limiting someone, and
    // a new key is decided as a first request but not stored, rather than evicting one of them.
    for (let i = 0; i < 5; i++) await store.apply([spec(longKey(i, 4_000, 'n'), 99)]);
    const result = await store.apply([spec(longKey(99, 4_000, 'n'))]);
    expect(result.results[0]!.remaining).toBe(99);
    expect(notStored()).toBe(1);
    expect(evicted).toEqual({ expired: 5, lru: 0 });
    for (let i = 0; i < limiting; i++) {
      const again = await store.apply([spec(longKey(i, 4_000, 'l'), 1, 1)]);
      expect(again.admitted, `limiting counter ${i}`).toBe(false);
    }
  });

  it('decides a key larger than the whole cap as a first request, storing it and dropping nothing', async () => {
    const { store, evicted, notStored } = make(16_384);
    await flood(store, 0, 3, 1_000);
    const result = await store.apply([spec(longKey(0, 20_000, 'x'), 3)]);
    expect(result.admitted).toBe(true);
    expect(result.results[0]!.remaining).toBe(97);
    expect(store.size()).toBe(3);
    expect(evicted).toEqual({ expired: 0, lru: 0 });
    expect(notStored()).toBe(1);
  });

  it('counts the rings of busy counters: when they grow past the cap, counters are shed', async () => {
    // A sliding log keeps one (time, hits) pair per millisecond with hits: 1,000 of them make a
    // ring of 1,024 pairs, 16 KiB, on top of the key.
    const log = specBuilder({ algorithm: 'sliding_log', windowMs: HOUR, limit: 10_000 });
    const { clock, store, evicted } = make(131_072);
    const keys = Array.from({ length: 20 }, (_, i) => `log-${i}`);
    for (let ms = 0; ms < 1_000; ms++) {
      await store.apply(keys.map((key) => log(key)));
      clock.advance(1);
    }
    // 20 rings of 16 KiB would be 320 KiB: at most 128 KiB of them are kept, so most counters
    // were evicted along the way (and started again, with fewer hits and a smaller ring).
    const whole = store.top!(100).filter((row) => row.count === 1_000);
    expect(whole.length).toBeLessThanOrEqual(7);
    expect(evicted.lru).toBeGreaterThan(0);
  });

  it('sheds as many counters as a ring that grew takes, not just one', async () => {
    const log = specBuilder({ algorithm: 'sliding_log', windowMs: HOUR, limit: 100 });
    // 'w' with hits in 9 milliseconds: a ring of 16 pairs, 32 numbers (200 + 256 + 256 bytes);
    // 'q1' and 'q2' (200 each) fill the cap exactly.
    const { clock, store, evicted } = make(712 + 400);
    for (let ms = 0; ms < 9; ms++) {
      await store.apply([log('w')]);
      clock.advance(1);
    }
    await store.apply([spec('q1')]);
    await store.apply([spec('q2')]);
    for (let ms = 9; ms < 16; ms++) {
      await store.apply([log('w')]);
      clock.advance(1);
    }
    expect(store.size()).toBe(3);
    expect(evicted.lru).toBe(0);
    // The 17th millisecond doubles the ring: 256 bytes more, so both go.
    await store.apply([log('w')]);
    expect(evicted.lru).toBe(2);
    expect(store.size()).toBe(1);
  });

  it('sheds down to the cap and no further: a counter that leaves it exactly at the cap stays', async () => {
    const log = specBuilder({ algorithm: 'sliding_log', windowMs: HOUR, limit: 100 });
    // 'w' with hits in 16 milliseconds: a ring of 16 pairs (712 bytes), and 'q' (200): 912 held,
    // under a cap of 968. The 17th millisecond doubles the ring (256 bytes more, 1,168 held):
    // shedding 'q' leaves exactly 968, at the cap, so 'w' stays.
    const { clock, store, evicted } = make(968);
    for (let ms = 0; ms < 9; ms++) {
      await store.apply([log('w')]);
      clock.advance(1);
    }
    await store.apply([spec('q')]);
    for (let ms = 9; ms < 16; ms++) {
      await store.apply([log('w')]);
      clock.advance(1);
    }
    expect(store.size()).toBe(2);
    await store.apply([log('w')]);
    expect(evicted.lru).toBe(1);
    expect(store.size()).toBe(1);
    expect((await store.apply([log('w', 0)])).results[0]!.remaining).toBe(83);
  });

  it('gives the bytes back when counters go: after expiry and reset, as many keys fit as at first', async () => {
    const { clock, store } = make(262_144);
    const log = specBuilder({ algorithm: 'sliding_log', windowMs: 1_000, limit: 10_000 });
    await flood(store, 0, 100, 4_000);
    const first = store.size();
    // Busy counters too (wide states), then everything expires and is reclaimed.
    for (let ms = 0; ms < 20; ms++) {
      await store.apply([log('busy-a'), log('busy-b')]);
      clock.advance(1);
    }
    clock.advance(HOUR);
    await store.apply([spec('sweep', 0)]);
    for (let round = 0; round < 3; round++) {
      await flood(store, 1_000 * (round + 1), 1_000 * (round + 1) + 100, 4_000);
      expect(store.size(), `round ${round}`).toBe(first);
      // Reset every counter held: the next round starts from an empty store again.
      for (const row of store.top!(1_000)) await store.reset!(row.key);
      expect(store.size()).toBe(0);
    }
  });
});
