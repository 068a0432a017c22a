/**
 * The store contract for cached mode (docs/cached-mode.md): the part of it one replica can keep,
 * on the real Redis store over a real `redis-server` (its script on the test's manual clock, as in
 * store-contract.test.ts). Cached mode is not exact across replicas, so the shared contract suite
 * does not run on it; on one replica:
 *
 * - `fixed_window`: every answer (admitted, over limit, remaining, reset) equals the memory
 *   store's for the same random batches (shadow, quota, keys repeated in a batch, several limits),
 *   whatever the sync times and window changes, and Redis ends up holding exactly the hits
 *   admitted;
 * - `sliding_window`: never more than the limit in a window (the hits it admitted, replayed into a
 *   memory store, never overflow it), and Redis ends up holding the hits admitted.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock, type ManualClock } from '../../src/clock.js';
import { createCachedStore } from '../../src/stores/cached/cached-store.js';
import type { CounterSpec, CounterStore } from '../../src/stores/counter-store.js';
import { createMemoryStore } from '../../src/stores/memory/memory-store.js';
import { openTestStore, useSharedRedis } from '../helpers/redis.js';
import { mulberry32 } from '../helpers/sliding-model.js';

const T0 = 1_700_000_040_000;
const W = 10_000;

const redis = useSharedRedis('cached store contract against redis-server');

/**
 * A cached store on `clock`'s time (synced by hand: no timer) over a Redis store whose script
 * runs on the same clock; the cached store is closed after the file, and closes the Redis one.
 */
async function openCached(
  clock: ManualClock,
): Promise<{ remote: CounterStore; cached: ReturnType<typeof createCachedStore> }> {
  const { store: remote } = await openTestStore(redis.server.port, 'cached', {
    scriptClock: clock.now,
  });
  const cached = createCachedStore({
    remote,
    syncIntervalMs: 100,
    maxCounters: 100,
    failureMode: 'error',
    clock: clock.now,
    timer: false,
  });
  redis.track(cached);
  return { remote, cached };
}

/** A random batch of 1 to 4 specs on keys a, b, c (limits 5 and 8), modes mixed. */
function randomBatch(
  rand: () => number,
  algorithm: 'fixed_window' | 'sliding_window',
): CounterSpec[] {
  const size = 1 + Math.floor(rand() * 4);
  const quota = rand() < 0.2;
  return Array.from({ length: size }, (_, i) => {
    const name = 'abc'[Math.floor(rand() * 3)]!;
    const limit = name === 'c' ? 8 : 5;
    const roll = rand();
    const mode = quota ? 'quota' : roll < 0.15 ? 'shadow' : 'enforced';
    return {
      key: `${algorithm}|${name}`,
      algorithm,
      limit,
      windowMs: W,
      burst: limit,
      hits: Math.floor(rand() * 3),
      mode,
      quotaGroup: mode === 'quota' ? i : undefined,
    };
  });
}

/** Each key's room as `store` reports it now, read with checks that charge nothing. */
async function rooms(
  store: CounterStore,
  algorithm: 'fixed_window' | 'sliding_window',
): Promise<number[]> {
  const out: number[] = [];
  for (const name of 'abc') {
    const limit = name === 'c' ? 8 : 5;
    const peek = await store.apply([
      {
        key: `${algorithm}|${name}`,
        algorithm,
        limit,
        windowMs: W,
        burst: limit,
        hits: 0,
        mode: 'shadow',
      },
    ]);
    out.push(peek.results[0]!.remaining);
  }
  return out;
}

describe.skipIf(redis.requirement.skip)(
  'cached store contract: one replica on redis-server',
  () => {
    it('fixed_window: answers as the memory store, and Redis holds the hits admitted', async () => {
      const clock = createManualClock(T0);
      const { remote, cached } = await openCached(clock);
      const memory = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
      redis.track(memory);
      const rand = mulberry32(3030);
      let admitted = 0;
      for (let step = 0; step < 600; step++) {
        const roll = rand();
        if (roll < 0.15) await cached.sync();
        if (roll > 0.9) clock.advance(Math.floor(rand() * 3_000));
        const batch = randomBatch(rand, 'fixed_window');
        const want = await memory.apply(batch);
        const got = await cached.apply(batch);
        expect(got).toEqual(want);
        if (got.admitted) admitted++;
      }
      expect(admitted).toBeGreaterThan(100);
      // After a sync, Redis holds what the memory store holds: every hit admitted in the window.
      await cached.sync();
      expect(await rooms(remote, 'fixed_window')).toEqual(await rooms(memory, 'fixed_window'));
    });

    it('sliding_window: never more than the limit in a window, and Redis holds the hits admitted', async () => {
      const clock = createManualClock(T0);
      const { remote, cached } = await openCached(clock);
      // What the cached store admitted, replayed as shadow hits: the true count of each window.
      const truth = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
      redis.track(truth);
      const rand = mulberry32(3031);
      let admittedBatches = 0;
      for (let step = 0; step < 600; step++) {
        const roll = rand();
        if (roll < 0.15) await cached.sync();
        if (roll > 0.9) clock.advance(Math.floor(rand() * 3_000));
        const batch = randomBatch(rand, 'sliding_window').filter((s) => s.mode !== 'shadow');
        const got = await cached.apply(batch);
        if (!got.admitted) continue;
        admittedBatches++;
        const charged = batch.filter(
          (s, i) => s.hits > 0 && !(s.mode === 'quota' && got.results[i]!.overLimit),
        );
        await truth.apply(charged.map((s) => ({ ...s, mode: 'shadow' as const })));
        for (const s of charged) {
          const now = await truth.apply([{ ...s, hits: 0 }]);
          expect(now.results[0]!.overLimit).toBe(false);
        }
      }
      expect(admittedBatches).toBeGreaterThan(100);
      // After a sync Redis holds every hit admitted, each counted from its sync, not earlier: never
      // more room than the replay shows.
      await cached.sync();
      const inRedis = await rooms(remote, 'sliding_window');
      const replayed = await rooms(truth, 'sliding_window');
      inRedis.forEach((room, i) => expect(room).toBeLessThanOrEqual(replayed[i]!));
    });
  },
);
