/**
 * The counter store contract (src/stores/counter-store.ts, docs/semantics.md §3): the same cases
 * against the memory store and against the Redis store on a real `redis-server`, driven by one
 * manual clock (the Redis store passes it to its script instead of Redis `TIME`; a separate
 * integration test shows `TIME` is used in production). The exact-number cases are the memory
 * store's (moved from test/unit/stores/memory/memory-store.test.ts, sliding_window); every algorithm in
 * ALGORITHMS then runs the algorithm-independent cases and a random differential run in which the
 * Redis store must answer exactly as the memory store.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/index.js';
import { createManualClock, type ManualClock } from '../../src/clock.js';
import type { CounterSpec, CounterStore } from '../../src/stores/counter-store.js';
import { createMemoryStore } from '../../src/stores/memory/memory-store.js';
import { useSharedRedis } from '../helpers/redis.js';
import { mulberry32 } from '../helpers/sliding-model.js';
import { specBuilder } from '../helpers/specs.js';

const T0 = 1_700_000_000_000;
const W = 1_000;

const spec = specBuilder({ windowMs: W });

/** One store under test with its clock and a store-independent count of the counters it holds. */
interface Harness {
  readonly clock: ManualClock;
  readonly store: CounterStore;
  /** Counters that exist (memory: entries; Redis: keys under the test's prefix). */
  readonly held: () => Promise<number>;
}

interface Backend {
  readonly name: string;
  readonly skip: boolean;
  make(): Promise<Harness>;
}

const redis = useSharedRedis('store contract against redis-server');

const BACKENDS: Backend[] = [
  {
    name: 'memory',
    skip: false,
    make() {
      const clock = createManualClock(T0);
      const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
      redis.track(store);
      return Promise.resolve({ clock, store, held: () => Promise.resolve(store.size()) });
    },
  },
  {
    name: 'redis',
    skip: redis.requirement.skip,
    async make() {
      const clock = createManualClock(T0);
      const { store, prefix } = await redis.openStore('test', { scriptClock: clock.now });
      return {
        clock,
        store,
        held: async () => (await redis.admin.keys(`${prefix}*`)).length,
      };
    },
  },
];

/** Remaining room of `key` under `limit`, read with a check that charges nothing. */
async function peek(
  store: CounterStore,
  key: string,
  limit: number,
  more: Partial<CounterSpec> = {},
) {
  const { results } = await store.apply([spec(key, 0, limit, more)]);
  return results[0]!;
}

for (const backend of BACKENDS) {
  describe.skipIf(backend.skip)(`store contract: ${backend.name}`, () => {
    describe('sliding_window, exact numbers (moved from the memory store unit tests)', () => {
      it('charges nothing when one enforced counter is over', async () => {
        const { store, held } = await backend.make();
        await store.apply([spec('full', 2, 2)]);
        const batch = await store.apply([spec('fresh', 1, 5), spec('full', 1, 2), spec('x', 1, 5)]);
        expect(batch.admitted).toBe(false);
        expect(batch.results).toEqual([
          { overLimit: false, remaining: 5, resetMs: 0 },
          { overLimit: true, remaining: 0, resetMs: 1_050 },
          { overLimit: false, remaining: 5, resetMs: 0 },
        ]);
        expect(await peek(store, 'full', 2)).toMatchObject({ remaining: 0 });
        // Rejected: no counter was created for the fresh keys.
        expect(await held()).toBe(1);
      });

      it('admits and charges every counter when only shadow counters are over', async () => {
        const { store, held } = await backend.make();
        await store.apply([spec('shadow', 2, 2, { mode: 'shadow' })]);
        const batch = await store.apply([
          spec('shadow', 2, 2, { mode: 'shadow' }),
          spec('k', 1, 5),
        ]);
        expect(batch.admitted).toBe(true);
        expect(batch.results).toEqual([
          // 4 counted against 2: the next 2 hits fit once the bucket holding all 4 expires.
          { overLimit: true, remaining: 0, resetMs: 1_050 },
          { overLimit: false, remaining: 4, resetMs: 1_050 },
        ]);
        // The shadow counter was charged while over, so even a hits-0 check is over now.
        expect(await peek(store, 'shadow', 3)).toEqual({
          overLimit: true,
          remaining: 0,
          resetMs: 1_050,
        });
        expect(await peek(store, 'shadow', 4)).toMatchObject({ overLimit: false, remaining: 0 });
        // Hits above the limit can never fit: a full window.
        const never = await store.apply([spec('shadow', 3, 2, { mode: 'shadow' })]);
        expect(never.results[0]).toEqual({ overLimit: true, remaining: 0, resetMs: W });
        expect(await held()).toBe(2);
      });

      it('an empty batch is admitted', async () => {
        const { store } = await backend.make();
        expect(await store.apply([])).toEqual({ admitted: true, results: [] });
      });

      it('the same key twice: each spec is checked against the hits of the earlier ones', async () => {
        const { store, clock } = await backend.make();
        await store.apply([spec('k', 2, 5)]);
        clock.advance(100);
        // 2 counted; 2 more fit (4 <= 5), 2 more after them do not (6 > 5).
        const batch = await store.apply([spec('k', 2, 5), spec('k', 2, 5)]);
        expect(batch.admitted).toBe(false);
        expect(batch.results).toEqual([
          { overLimit: false, remaining: 3, resetMs: 950 },
          // Retrying both needs 1 more hit of room: when the first bucket expires.
          { overLimit: true, remaining: 0, resetMs: 950 },
        ]);
        expect(await peek(store, 'k', 5)).toMatchObject({ remaining: 3 });
      });

      it('the same key twice: admits the pair when their sum fits, reporting the room after both', async () => {
        const { store, held } = await backend.make();
        const batch = await store.apply([spec('k', 2, 5), spec('other', 1, 1), spec('k', 3, 5)]);
        expect(batch.admitted).toBe(true);
        expect(batch.results).toEqual([
          { overLimit: false, remaining: 0, resetMs: 1_050 },
          { overLimit: false, remaining: 0, resetMs: 1_050 },
          { overLimit: false, remaining: 0, resetMs: 1_050 },
        ]);
        expect(await peek(store, 'k', 5)).toMatchObject({ remaining: 0 });
        expect(await held()).toBe(2);
      });

      it('the same key twice: a full window when the pair can never fit together', async () => {
        const { store, held } = await backend.make();
        const batch = await store.apply([spec('k', 3, 5), spec('k', 3, 5)]);
        expect(batch.admitted).toBe(false);
        expect(batch.results[1]).toEqual({ overLimit: true, remaining: 0, resetMs: W });
        expect(await held()).toBe(0);
      });

      it('the same key twice: a check-only first spec sees the counter a later duplicate creates', async () => {
        const { store } = await backend.make();
        const batch = await store.apply([spec('k', 0, 5), spec('k', 2, 5)]);
        expect(batch.admitted).toBe(true);
        expect(batch.results).toEqual([
          { overLimit: false, remaining: 3, resetMs: 1_050 },
          { overLimit: false, remaining: 3, resetMs: 1_050 },
        ]);
      });

      it('creates no counter for hits 0, for a rejection, or for hits above the limit', async () => {
        const { store, held } = await backend.make();
        expect((await store.apply([spec('a', 0, 5)])).admitted).toBe(true);
        expect((await store.apply([spec('b', 1, 0)])).admitted).toBe(false);
        expect((await store.apply([spec('c', 6, 5)])).results[0]).toEqual({
          overLimit: true,
          remaining: 0,
          resetMs: W,
        });
        expect(await held()).toBe(0);
      });

      it('does not charge a rejected request (a flood of rejections does not extend the wait)', async () => {
        const { store, clock } = await backend.make();
        await store.apply([spec('k', 3, 3)]);
        for (let k = 0; k < 100; k++) {
          clock.advance(10);
          expect((await store.apply([spec('k', 1, 3)])).admitted).toBe(false);
        }
        clock.set(T0 + 1_050);
        expect((await store.apply([spec('k', 3, 3)])).admitted).toBe(true);
      });

      it('keeps live counters while expired ones count nothing', async () => {
        const { store, clock } = await backend.make();
        await store.apply([spec('short', 1, 5)]);
        await store.apply([spec('long', 1, 5, { windowMs: 60_000 })]);
        clock.advance(W + 50);
        expect(await peek(store, 'short', 5)).toEqual({
          overLimit: false,
          remaining: 5,
          resetMs: 0,
        });
        expect(await peek(store, 'long', 5, { windowMs: 60_000 })).toMatchObject({ remaining: 4 });
      });
    });

    for (const algorithm of ALGORITHMS) {
      describe(`${algorithm}`, () => {
        const s = (key: string, hits: number, limit: number, more: Partial<CounterSpec> = {}) =>
          spec(key, hits, limit, { algorithm, windowMs: 60_000, ...more });

        it('a request with one enforced counter out of room charges none of its counters', async () => {
          const { store, held } = await backend.make();
          expect((await store.apply([s('full', 3, 3)])).admitted).toBe(true);
          const before = await peek(store, 'other', 10, { algorithm, windowMs: 60_000 });
          const batch = await store.apply([s('other', 2, 10), s('full', 1, 3), s('third', 1, 4)]);
          expect(batch.admitted).toBe(false);
          expect(batch.results[1]).toMatchObject({ overLimit: true, remaining: 0 });
          expect(batch.results[1]!.resetMs).toBeGreaterThan(0);
          expect(batch.results[0]).toMatchObject({ overLimit: false });
          expect(await peek(store, 'other', 10, { algorithm, windowMs: 60_000 })).toEqual(before);
          expect(await held()).toBe(1);
        });

        it('shadow counters are charged while over; quota counters only when they have room', async () => {
          const { store } = await backend.make();
          await store.apply([s('sh', 2, 2), s('q', 2, 2)]);
          const batch = await store.apply([
            s('sh', 1, 2, { mode: 'shadow' }),
            s('q', 1, 2, { mode: 'quota' }),
            s('e', 1, 5),
          ]);
          expect(batch.admitted).toBe(true);
          expect(batch.results[0]).toMatchObject({ overLimit: true, remaining: 0 });
          expect(batch.results[1]).toMatchObject({ overLimit: true, remaining: 0 });
          expect(batch.results[2]).toMatchObject({ overLimit: false, remaining: 4 });
          // The shadow counter now holds 3 (> 2): even a check-only call is over; the quota
          // counter was not charged, so it is exactly full.
          expect(await peek(store, 'sh', 2, { algorithm, windowMs: 60_000 })).toMatchObject({
            overLimit: true,
          });
          expect(await peek(store, 'q', 2, { algorithm, windowMs: 60_000 })).toMatchObject({
            overLimit: false,
            remaining: 0,
          });
        });

        it('quota groups: rejected, charging nothing, only when every group has a counter over', async () => {
          const { store } = await backend.make();
          await store.apply([s('q1', 2, 2), s('q3', 1, 2)]);
          const quota = (key: string, group: number, limit = 2) =>
            s(key, 1, limit, { mode: 'quota', quotaGroup: group });
          // Group 0 (q1, full) is over, group 1 (q2, empty) has room: admitted; q2, e charged.
          const some = await store.apply([quota('q1', 0), quota('q2', 1), s('e', 1, 5)]);
          expect(some.admitted).toBe(true);
          expect(some.results.map((r) => r.overLimit)).toEqual([true, false, false]);
          // Group 0 has two counters, one over (q1): the group is over. Group 1 (q2) has room:
          // admitted, and the counters with room (q3, q2) are charged to their limit.
          const mixed = await store.apply([quota('q1', 0), quota('q3', 0), quota('q2', 1)]);
          expect(mixed.admitted).toBe(true);
          // Every group over: rejected, and the enforced counter with room is not charged.
          const all = await store.apply([quota('q1', 0), quota('q3', 1), s('e', 1, 5)]);
          expect(all.admitted).toBe(false);
          expect(all.results.map((r) => r.overLimit)).toEqual([true, true, false]);
          expect(await peek(store, 'e', 5, { algorithm, windowMs: 60_000 })).toMatchObject({
            remaining: 4,
          });
          // Without groups, quota counters never reject.
          const plain = await store.apply([s('q1', 1, 2, { mode: 'quota' })]);
          expect(plain.admitted).toBe(true);
        });

        it('N concurrent callers on one key: exactly the limit is admitted', async () => {
          const { store } = await backend.make();
          const answers = await Promise.all(
            Array.from({ length: 50 }, () => store.apply([s('k', 1, 20)])),
          );
          expect(answers.filter((a) => a.admitted)).toHaveLength(20);
        });

        // The memory store is the model here, so only other stores run this case.
        if (backend.name !== 'memory')
          it('random batches: answers exactly as the memory store (the algorithm module)', async () => {
            const { store, clock } = await backend.make();
            const model = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
            redis.track(model);
            const rand = mulberry32(ALGORITHMS.indexOf(algorithm) * 7919 + 17);
            const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
            const modes = ['enforced', 'enforced', 'enforced', 'shadow', 'quota'] as const;
            // Each key has one window and limit, as counter keys include both.
            const keys = [
              { key: 'a', windowMs: 1_000, limit: 5, burst: 7 },
              { key: 'b', windowMs: 60_000, limit: 13, burst: 13 },
              { key: 'c', windowMs: 7_000, limit: 3, burst: 2 },
              { key: 'd', windowMs: 3_600_000, limit: 40, burst: 55 },
            ];
            for (let step = 0; step < 300; step++) {
              clock.advance(pick([0, 0, 1, 7, 49, 50, 120, 333, 999, 1_000, 2_500, 61_000]));
              const size = 1 + Math.floor(rand() * 4);
              const batch: CounterSpec[] = [];
              for (let k = 0; k < size; k++) {
                const def = pick(keys);
                batch.push({
                  key: def.key,
                  algorithm: algorithm,
                  limit: def.limit,
                  windowMs: def.windowMs,
                  burst: algorithm === 'token_bucket' ? def.burst : def.limit,
                  hits: pick([0, 1, 1, 1, 2, 3, 6]),
                  mode: pick(modes),
                });
              }
              const expected = await model.apply(batch);
              const actual = await store.apply(batch);
              expect(actual, `step ${step}: ${JSON.stringify(batch)}`).toEqual(expected);
            }
          });
      });
    }
  });
}
