/**
 * What a quiet counter costs the memory store (docs/operations.md, "Capacity planning"; the
 * layout in src/stores/memory/counter-columns.ts): its key, a map entry and a few cells of typed
 * arrays, and no JavaScript object of its own. A counter of any algorithm that holds hits from
 * one moment (a fixed window, a token bucket, a sliding window or log with one sub-bucket or
 * timestamp) is quiet; only busier ones are kept as a whole state object. And what the byte cap
 * (`maxBytes`, `MEMORY_MAX_BYTES`) counts is what the heap really holds: a store kept full of
 * long keys or busy counters holds no more heap than its cap.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createManualClock, type ManualClock } from '../../../../src/clock.js';
import type { Algorithm } from '../../../../src/algorithms/index.js';
import type { CounterStore } from '../../../../src/stores/counter-store.js';
import { createMemoryStore } from '../../../../src/stores/memory/memory-store.js';
import { spec, specBuilder } from '../../../helpers/specs.js';

/** A full garbage collection: `--expose-gc` when given, else enabled at run time. */
const gc: () => void = (() => {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed !== undefined) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

const COUNTERS = 10_000;

/** Stores for the column test: each would hold 21 KiB of columns if they grew to 1024 slots. */
const STORES = 200;

/**
 * JavaScript heap per counter, beyond its key: its share of the map's table, measured at about 45
 * bytes; a state object of its own (with its ring array and side-map entry) makes it over 250.
 * The bound between leaves room for what else the test process allocates meanwhile.
 */
const MAX_HEAP_PER_COUNTER = 150;

describe('memory store: a quiet counter is held without an object of its own', () => {
  it.each(['fixed_window', 'token_bucket', 'sliding_window', 'sliding_log'] as Algorithm[])(
    '%s: under 150 bytes of heap per counter besides its key',
    (algorithm) => {
      const clock = createManualClock(1_700_000_000_000);
      const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
      // The keys exist before and after, so only what the store adds is measured.
      const keys = Array.from({ length: COUNTERS }, (_, i) => `quiet-${algorithm}-${i}`);
      for (const key of keys) store.applyNow!([spec(key, 2, 10, { algorithm })]);
      const before = heapAfterGc();
      // The same counters again: charged a second time in the same moment, still quiet.
      for (const key of keys) store.applyNow!([spec(key, 1, 10, { algorithm })]);
      expect(store.size()).toBe(COUNTERS);
      const sample = store.applyNow!([spec(keys[0]!, 0, 10, { algorithm })]).results[0]!;
      expect(sample.remaining).toBe(7);
      void store.close();
      const freed = before - heapAfterGc();
      expect(freed / COUNTERS, `heap freed by ${COUNTERS} counters`).toBeLessThan(
        MAX_HEAP_PER_COUNTER,
      );
      expect(keys).toHaveLength(COUNTERS);
    },
  );
});

describe('memory store: the columns never outgrow the cap', () => {
  it('a store capped at 2 counters holds columns for 2, not the first 1024 slots', async () => {
    const before = (gc(), process.memoryUsage().arrayBuffers);
    const clock = createManualClock(1_700_000_000_000);
    const stores = Array.from({ length: STORES }, () =>
      createMemoryStore({ clock: clock.now, maxKeys: 2, sweepIntervalMs: 0 }),
    );
    for (const store of stores) store.applyNow!([spec('a'), spec('b')]);
    const held = (gc(), process.memoryUsage().arrayBuffers) - before;
    expect(stores.map((store) => store.size())).toEqual(stores.map(() => 2));
    // 1024 slots of the four columns are 21 KiB; 2 slots are 42 bytes (on the JavaScript heap).
    expect(held / STORES, 'array buffer bytes per store').toBeLessThan(4_096);
    await Promise.all(stores.map((store) => store.close()));
  });
});

/** The byte cap of the flood tests below: 16 MiB. */
const MAX_BYTES = 16 * 1_048_576;

/**
 * How far above its cap a full store's heap was measured on Node 24 (up to 1.2%: two-byte keys
 * and busy logs hold a little more there than on Node 20, where it stays under the cap); the
 * bound the tests hold it to, and docs/operations.md says so.
 */
const ENGINE_SLACK = 1.02;

/**
 * Fill a store capped at `maxBytes` through `fill` (which gets the store and a fresh
 * manual clock), then return the heap it held: what closing it freed.
 */
function heapHeldAtCap(
  maxBytes: number,
  fill: (store: CounterStore, clock: ManualClock) => void,
): { held: number; size: number } {
  const clock = createManualClock(1_700_000_000_000);
  const store = createMemoryStore({ clock: clock.now, maxBytes, sweepIntervalMs: 0 });
  fill(store, clock);
  const size = store.size();
  const before = heapAfterGc();
  void store.close();
  return { held: before - heapAfterGc(), size };
}

/** Distinct keys `chars` characters of `fill` long, 64 per call, `count` in all. */
function floodLongKeys(store: CounterStore, count: number, chars: number, fill: string): void {
  const pad = fill.repeat(chars);
  for (let i = 0; i < count; i += 64) {
    const batch = [];
    for (let k = i; k < i + 64; k++) batch.push(spec(`sw|60000|flood|v=${k}-${pad}`));
    store.applyNow!(batch);
  }
}

describe('memory store: the byte cap bounds the heap really held', () => {
  it('4,000-character keys, 64 per call: 80 MB of key text leaves at most the 16 MiB cap held', () => {
    const { held, size } = heapHeldAtCap(MAX_BYTES, (store) =>
      floodLongKeys(store, 20_032, 4_000, 'v'),
    );
    expect(size).toBeLessThan(20_032 / 4);
    expect(held, `heap held by ${size} counters`).toBeLessThanOrEqual(MAX_BYTES * ENGINE_SLACK);
  });

  it('keys with a character outside ASCII (two bytes each in V8) stay under the cap too', () => {
    const { held, size } = heapHeldAtCap(MAX_BYTES, (store) =>
      floodLongKeys(store, 10_048, 4_000, 'é€'),
    );
    expect(size).toBeLessThan(10_048 / 4);
    expect(held, `heap held by ${size} counters`).toBeLessThanOrEqual(MAX_BYTES * ENGINE_SLACK);
  });

  it('busy counters: sliding logs with a hit every millisecond stay under the cap', () => {
    const log = specBuilder({ algorithm: 'sliding_log', windowMs: 3_600_000, limit: 10_000 });
    // 520 hits in as many milliseconds give each log a ring of 1,024 pairs (16 KiB): 320 of them
    // would hold 5.3 MB, over a 4 MiB cap.
    const maxBytes = 4 * 1_048_576;
    const { held, size } = heapHeldAtCap(maxBytes, (store, clock) => {
      const specs = Array.from({ length: 320 }, (_, i) => log(`busy-${i}`));
      for (let ms = 0; ms < 520; ms++) {
        store.applyNow!(specs);
        clock.advance(1);
      }
    });
    expect(held, `heap held by ${size} counters`).toBeLessThanOrEqual(maxBytes * ENGINE_SLACK);
  });
});
