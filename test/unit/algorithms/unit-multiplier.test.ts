/**
 * `unit_multiplier: 5` with `unit: minute` is a 300-second window for every algorithm
 * (docs/semantics.md §4), checked through the memory store with a manual clock. Each algorithm is
 * held to its own definition of when hits stop counting:
 * - fixed_window: the epoch-aligned 300 s window ends;
 * - sliding_log: a hit at t counts while now < t + 300 s;
 * - token_bucket: an empty bucket of capacity L refills L tokens in 300 s (one in 300 s / L);
 * - sliding_window: a hit counts for at least 300 s and at most 300 s + one sub-bucket (15 s).
 * The wire side (current_limit.unit stays MINUTE) is in test/integration/algorithms-grpc.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { ALGORITHMS, type Algorithm } from '../../../src/algorithms/index.js';
import { SUB_BUCKETS } from '../../../src/algorithms/sliding-window.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { CounterStore } from '../../../src/stores/counter-store.js';
import { UNIT_MS } from '../../../src/model.js';
import { specBuilder } from '../../helpers/specs.js';

const W = 5 * 60_000;
/** A multiple of 300 s (so also of a 15 s sub-bucket): fixed windows and buckets start here. */
const T0 = 1_700_000_100_000;
const LIMIT = 5;

/** When hits charged at T0 (filling the limit) stop counting, per algorithm's definition. */
const FREED_AT: Record<Algorithm, number> = {
  fixed_window: T0 + W,
  sliding_log: T0 + W,
  token_bucket: T0 + W,
  sliding_window: T0 + W + W / SUB_BUCKETS,
};

const open: CounterStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
});

const spec = specBuilder({ limit: LIMIT, windowMs: W });

it('the window of minute x 5 is 300 000 ms', () => {
  expect(UNIT_MS.minute * 5).toBe(W);
  expect(T0 % W).toBe(0);
});

describe.each(ALGORITHMS)('unit_multiplier 5 x minute with %s', (algorithm) => {
  it('limit reached, refused 1 ms before the hits are freed (with that exact wait), admitted then', async () => {
    const clock = createManualClock(T0);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    open.push(store);
    const filled = await store.apply([spec('k', LIMIT, LIMIT, { algorithm })]);
    expect(filled.admitted).toBe(true);
    expect(filled.results[0]!.remaining).toBe(0);

    const freedAt = FREED_AT[algorithm];
    // A one-minute window would have freed them long ago: still refused at 60 s, 61 s and 299.999 s.
    for (const at of [T0 + 60_000, T0 + 61_000, T0 + W - 1, freedAt - 1]) {
      clock.set(at);
      const over = await store.apply([spec('k', LIMIT, LIMIT, { algorithm })]);
      expect(over.admitted, `${algorithm} at +${at - T0} ms`).toBe(false);
      expect(over.results[0]!.overLimit).toBe(true);
      expect(over.results[0]!.resetMs, `${algorithm} reset at +${at - T0} ms`).toBe(freedAt - at);
    }

    clock.set(freedAt);
    const again = await store.apply([spec('k', LIMIT, LIMIT, { algorithm })]);
    expect(again.admitted, `${algorithm} at +${freedAt - T0} ms`).toBe(true);
    expect(again.results[0]!.remaining).toBe(0);
  });
});

it('token_bucket minute x 5 with 5 per window refills one token per 60 s', async () => {
  const clock = createManualClock(T0);
  const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  open.push(store);
  expect(
    (await store.apply([spec('k', LIMIT, LIMIT, { algorithm: 'token_bucket' })])).admitted,
  ).toBe(true);
  clock.set(T0 + W / LIMIT - 1);
  const over = await store.apply([spec('k', 1, LIMIT, { algorithm: 'token_bucket' })]);
  expect(over.admitted).toBe(false);
  expect(over.results[0]!.resetMs).toBe(1);
  clock.set(T0 + W / LIMIT);
  expect((await store.apply([spec('k', 1, LIMIT, { algorithm: 'token_bucket' })])).admitted).toBe(
    true,
  );
});
