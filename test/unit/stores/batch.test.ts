import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  admits,
  BatchKeys,
  charges,
  cumulativeHits,
  quotaRejects,
} from '../../../src/stores/batch.js';
import { specBuilder } from '../../helpers/specs.js';

/** Specs whose numbers the batch rule never reads are fixed: 10 per second, fixed window. */
const spec = specBuilder({ algorithm: 'fixed_window', windowMs: 1_000 });

/** Up to 40 specs on a few keys: both sides of the scan / map threshold, many repeated keys. */
const batches = fc.array(fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd'), hits: fc.nat(5) }), {
  maxLength: 40,
  size: 'max',
});

describe('the batch kernel (docs/semantics.md §3)', () => {
  it('checks specs sharing a key with the hits of every spec up to them on that key', () => {
    fc.assert(
      fc.property(batches, (rows) => {
        const specs = rows.map((row) => spec(row.key, row.hits));
        const keys = new BatchKeys();
        // A reused instance: a longer batch first must not leak into a shorter one.
        keys.group([...specs, ...specs]);
        keys.group(specs);
        for (let i = 0; i < specs.length; i++) {
          const first = specs.findIndex((other) => other.key === specs[i]!.key);
          const upTo = specs.slice(0, i + 1).filter((other) => other.key === specs[i]!.key);
          expect(keys.firstOf[i]).toBe(first);
          expect(keys.cumHits[i]).toBe(upTo.reduce((sum, other) => sum + other.hits, 0));
        }
        expect(cumulativeHits(specs)).toEqual(keys.cumHits.slice(0, specs.length));
      }),
      { seed: 23, numRuns: 300 },
    );
  });

  it('admits when every enforced spec has room, whatever shadow specs say', () => {
    const specs = [spec('a', 1), spec('b', 1, undefined, { mode: 'shadow' })];
    expect(admits(specs, [false, true])).toBe(true);
    expect(admits(specs, [true, false])).toBe(false);
  });

  it('rejects on quota only when every quota group has a spec without room', () => {
    const specs = [
      spec('a', 1, undefined, { mode: 'quota', quotaGroup: 0 }),
      spec('b', 1, undefined, { mode: 'quota', quotaGroup: 0 }),
      spec('c', 1, undefined, { mode: 'quota', quotaGroup: 1 }),
    ];
    expect(quotaRejects(specs, [true, false, true])).toBe(true);
    expect(admits(specs, [true, false, true])).toBe(false);
    expect(admits(specs, [true, false, false])).toBe(true);
    // Quota specs without a group never reject.
    const ungrouped = [
      spec('a', 1, undefined, { mode: 'quota' }),
      spec('b', 1, undefined, { mode: 'quota' }),
    ];
    expect(admits(ungrouped, [true, true])).toBe(true);
    expect(quotaRejects(ungrouped, [true, true])).toBe(false);
    expect(quotaRejects([], [])).toBe(false);
  });

  it('an empty batch has no cumulative hits', () => {
    expect(cumulativeHits([])).toEqual([]);
  });

  it('charges an admitted spec with hits, a quota spec only when it had room', () => {
    expect(charges(spec('a', 2), false)).toBe(true);
    expect(charges(spec('a', 0), false)).toBe(false);
    expect(charges(spec('a', 2, undefined, { mode: 'shadow' }), true)).toBe(true);
    expect(charges(spec('a', 2, undefined, { mode: 'quota' }), true)).toBe(false);
    expect(charges(spec('a', 2, undefined, { mode: 'quota' }), false)).toBe(true);
  });
});
