/**
 * The store's dry run (issue 33, item 2): `check` answers what `apply` would, from the same batch
 * rule, and changes nothing; a store without `check` (Redis) is dry-run by peeking with 0 hits
 * and deciding in process (`checkBatch`), which gives the same decision and room on the same
 * counters.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALGORITHM_DESCRIPTORS } from '../../../src/algorithms/index.js';
import { createManualClock } from '../../../src/clock.js';
import { checkBatch } from '../../../src/stores/batch.js';
import type { CounterSpec, CounterStore } from '../../../src/stores/counter-store.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';

const ALGORITHMS = ALGORITHM_DESCRIPTORS.map((algorithm) => algorithm.name);

/** One key per (name, algorithm): the key includes the algorithm, as limiter keys do. */
const specRow = fc.record({
  name: fc.constantFrom('a', 'b', 'c'),
  algorithm: fc.constantFrom(...ALGORITHMS),
  hits: fc.nat(3),
  mode: fc.constantFrom('enforced', 'enforced', 'shadow', 'quota'),
});

type SpecRow = typeof specRow extends fc.Arbitrary<infer T> ? T : never;

/** A batch of up to 6 specs of limit 4 per minute; quota specs form one group per spec. */
function batchOf(rows: readonly SpecRow[]): CounterSpec[] {
  return rows.map((row, i) => ({
    key: `${row.algorithm}|${row.name}`,
    algorithm: row.algorithm,
    limit: 4,
    windowMs: 60_000,
    burst: 4,
    hits: row.hits,
    mode: row.mode,
    quotaGroup: row.mode === 'quota' ? i : undefined,
  }));
}

const history = fc.array(fc.tuple(fc.array(specRow, { maxLength: 6 }), fc.nat(20_000)), {
  minLength: 1,
  maxLength: 12,
});

/** The memory store without its `check`, as a store whose only way in is `apply`. */
function withoutCheck(store: CounterStore): CounterStore {
  return {
    apply: (specs) => store.apply(specs),
    size: () => store.size(),
    healthy: () => store.healthy(),
    close: () => store.close(),
  };
}

describe('the dry run of a batch', () => {
  it('answers as apply() then does, and changes no counter (memory store)', async () => {
    await fc.assert(
      fc.asyncProperty(history, async (steps) => {
        const clock = createManualClock();
        const store = createMemoryStore({ clock: clock.now });
        for (const [rows, wait] of steps) {
          const specs = batchOf(rows);
          const before = store.top!(100);
          const checked = await store.check!(specs);
          expect(store.top!(100)).toEqual(before);
          expect(await store.apply(specs)).toEqual(checked);
          clock.advance(wait);
        }
        await store.close();
      }),
      { seed: 33, numRuns: 200 },
    );
  });

  it('by a peek with 0 hits, decides as check() does on the same counters', async () => {
    await fc.assert(
      fc.asyncProperty(history, async (steps) => {
        const clock = createManualClock();
        const store = createMemoryStore({ clock: clock.now });
        const peeking = withoutCheck(store);
        for (const [rows, wait] of steps) {
          const specs = batchOf(rows);
          const peeked = await checkBatch(peeking, specs);
          const checked = await store.check!(specs);
          expect(peeked.admitted).toBe(checked.admitted);
          // The reset time is the counter's as the peek read it (docs/operations-console.md).
          const decision = (result: { overLimit: boolean; remaining: number }) => ({
            overLimit: result.overLimit,
            remaining: result.remaining,
          });
          expect(peeked.results.map(decision)).toEqual(checked.results.map(decision));
          await store.apply(specs);
          clock.advance(wait);
        }
        await store.close();
      }),
      { seed: 33, numRuns: 200 },
    );
  });
});
