/** The memory store's optional top(n), which feeds the debug server's /counters view. */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../../src/clock.js';
import { createMemoryStore } from '../../../../src/stores/memory/memory-store.js';
import { specBuilder } from '../../../helpers/specs.js';

const spec = specBuilder({ limit: 100 });

describe('memory store top(n)', () => {
  it('lists the busiest live counters first, with their limit and time to expiry', async () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    await store.apply([spec('a', 3), spec('b', 7, 50), spec('c', 1), spec('d', 5)]);
    const top = store.top!(3);
    expect(top.map((row) => [row.key, row.count, row.limit])).toEqual([
      ['b', 7, 50],
      ['d', 5, 100],
      ['a', 3, 100],
    ]);
    for (const row of top) {
      expect(row.expiresInMs).toBeGreaterThan(0);
      expect(row.expiresInMs).toBeLessThanOrEqual(63_000);
    }
    expect(store.top!(0)).toEqual([]);
    expect(store.top!(10)).toHaveLength(4);
    await store.close();
  });

  it('leaves out counters whose hits have all expired', async () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    await store.apply([spec('old', 9)]);
    clock.advance(30_000);
    await store.apply([spec('new', 1)]);
    clock.advance(40_000); // 'old' is past its window, 'new' is not
    expect(store.top!(5).map((row) => row.key)).toEqual(['new']);
    await store.close();
  });

  it('leaves out a counter from the millisecond its hits expire, as a decision would', async () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    // A fixed window of 1 s starting now: its hits count until, not at, its end.
    await store.apply([spec('w', 4, 10, { algorithm: 'fixed_window', windowMs: 1_000 })]);
    clock.advance(999);
    expect(store.top!(5)).toEqual([{ key: 'w', count: 4, limit: 10, expiresInMs: 1 }]);
    clock.advance(1);
    expect(store.top!(5)).toEqual([]);
    await store.close();
  });

  it('keeps the n busiest whatever order they come in, ties in the order first counted', async () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    const counts = [1, 5, 3, 5, 2, 8, 1, 3, 9, 2];
    await store.apply(counts.map((hits, i) => spec(`k${i}`, hits)));
    const top = (n: number) => store.top!(n).map((row) => `${row.key}=${row.count}`);
    expect(top(4)).toEqual(['k8=9', 'k5=8', 'k1=5', 'k3=5']);
    expect(top(5)).toEqual(['k8=9', 'k5=8', 'k1=5', 'k3=5', 'k2=3']);
    expect(top(100)).toEqual([
      'k8=9',
      'k5=8',
      'k1=5',
      'k3=5',
      'k2=3',
      'k7=3',
      'k4=2',
      'k9=2',
      'k0=1',
      'k6=1',
    ]);
    expect(top(1)).toEqual(['k8=9']);
    await store.close();
  });
});
