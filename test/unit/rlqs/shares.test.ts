/**
 * The share computation (src/rlqs/shares.ts), issue 35 acceptance 3: examples, then properties
 * over random limits and demands with fast-check (seeded by vitest's run, bounded in count).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { replicaBudget } from '../../../src/rlqs/assignment.js';
import { DEFAULT_RESERVE_FRACTION, computeShares, shareFloor } from '../../../src/rlqs/shares.js';
import { propertyRuns } from '../../helpers/property-budget.js';

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

/**
 * docs/rlqs.md's bound on the shares of `n` instances, `idle` of them idle beside busy ones: the
 * limit plus a standby of a tenth of it, or of one token per idle instance when that is more.
 */
const standbyBound = (limit: number, n: number, idle: number): number =>
  limit + Math.max(limit * DEFAULT_RESERVE_FRACTION, n <= limit ? idle : 0);

describe('computeShares: examples', () => {
  it('a lone instance gets the whole limit, with or without demand', () => {
    expect(computeShares(100, [0])).toEqual([100]);
    expect(computeShares(100, [5_000])).toEqual([100]);
  });

  it('beside an idle instance the busy one gets the whole limit; the idle one a standby', () => {
    // standby = 10% of 1000 split between 2 = 50, on top of the limit
    expect(shareFloor(1000, 2)).toBe(50);
    expect(computeShares(1000, [300, 0])).toEqual([1000, 50]);
    // three instances, one idle: the two busy ones split 1000 (floors 50 each, the 600 nobody
    // asked for 3:1), the idle one gets 10% of 1000 over 3 = 33
    expect(computeShares(1000, [300, 100, 0])).toEqual([750, 250, 33]);
  });

  it('a small demand is met whole before a large one takes the rest (water-filling)', () => {
    // floors 5 each; pool 90: B wants 10-5=5, A takes the other 85
    expect(computeShares(100, [1_000, 10])).toEqual([90, 10]);
  });

  it('what nobody asked for goes by demand', () => {
    // floors 5 each; wants 25 and 5; the 60 left split 3:1
    expect(computeShares(100, [30, 10])).toEqual([75, 25]);
  });

  it('a limit of zero gives every instance zero; more instances than tokens: floors of 0', () => {
    expect(computeShares(0, [5, 5])).toEqual([0, 0]);
    expect(shareFloor(2, 3)).toBe(0);
    expect(sum(computeShares(2, [1, 1, 1]))).toBe(2);
  });
});

describe('computeShares: properties', () => {
  const limits = fc.integer({ min: 0, max: 1_000_000 });
  const demands = fc.array(fc.double({ min: 0, max: 1e7, noNaN: true }), {
    minLength: 1,
    maxLength: 40,
  });

  it('shares are integers, each at least the floor; the busy ones sum to exactly the limit', () => {
    fc.assert(
      fc.property(limits, demands, (limit, ds) => {
        const shares = computeShares(limit, ds);
        expect(shares).toHaveLength(ds.length);
        const busy = ds.map((d, i) => (d > 0 ? i : -1)).filter((i) => i >= 0);
        const idle = ds.length - busy.length;
        if (busy.length === 0 || idle === 0) expect(sum(shares)).toBe(limit);
        else {
          expect(sum(busy.map((i) => shares[i]!))).toBe(limit);
          expect(sum(shares)).toBe(limit + idle * shareFloor(limit, ds.length));
          expect(sum(shares)).toBeLessThanOrEqual(standbyBound(limit, ds.length, idle));
        }
        const floor = shareFloor(limit, ds.length);
        for (const share of shares) {
          expect(Number.isInteger(share)).toBe(true);
          expect(share).toBeGreaterThanOrEqual(floor);
        }
        if (limit >= ds.length) expect(floor).toBeGreaterThanOrEqual(1);
      }),
      { numRuns: propertyRuns(500) },
    );
  });

  it('a lone instance gets the whole limit', () => {
    fc.assert(
      fc.property(limits, fc.double({ min: 0, max: 1e9, noNaN: true }), (limit, d) => {
        expect(computeShares(limit, [d])).toEqual([limit]);
      }),
      { numRuns: propertyRuns(200) },
    );
  });

  it('idle instances get exactly their standby, the floor of all instances, when any other has demand', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.array(fc.double({ min: 1, max: 1e7, noNaN: true }), { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 1, max: 10 }),
        (limit, busy, idle) => {
          const shares = computeShares(limit, [...busy, ...new Array<number>(idle).fill(0)]);
          const floor = shareFloor(limit, busy.length + idle);
          for (const share of shares.slice(busy.length)) expect(share).toBe(floor);
        },
      ),
      { numRuns: propertyRuns(300) },
    );
  });

  it('a demand met in full: an instance asking for less than its even part gets at least it', () => {
    fc.assert(
      fc.property(limits, demands, (limit, ds) => {
        const shares = computeShares(limit, ds);
        const even = Math.floor(limit / ds.length);
        ds.forEach((d, i) => {
          if (d <= even) expect(shares[i]!).toBeGreaterThanOrEqual(Math.floor(d));
        });
      }),
      { numRuns: propertyRuns(300) },
    );
  });
});

describe('replicaBudget: several sluice replicas', () => {
  it('every replica computing its part from the same view: the parts add up to the limit (1.1 x with idle ones)', () => {
    const replica = fc.record({
      demand: fc.double({ min: 0, max: 1e6, noNaN: true }),
      instances: fc.integer({ min: 1, max: 20 }),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.array(replica, { minLength: 1, maxLength: 8 }),
        (limit, replicas) => {
          const view = replicas.map((r, i) => ({ replica: `r${i}`, ...r }));
          const parts = view.map((self) =>
            replicaBudget(
              limit,
              view.filter((p) => p !== self),
              self,
              DEFAULT_RESERVE_FRACTION,
            ),
          );
          // An instance's demand is its replica's over its instances (5e-324 / 2 is 0).
          const busyOf = (r: { demand: number; instances: number }): boolean =>
            r.demand / r.instances > 0;
          const busy = replicas.filter(busyOf).length;
          if (busy === 0 || busy === replicas.length) expect(sum(parts)).toBe(limit);
          else {
            expect(sum(parts)).toBeGreaterThanOrEqual(limit);
            const instances = sum(replicas.map((r) => r.instances));
            const idle = sum(replicas.map((r) => (busyOf(r) ? 0 : r.instances)));
            expect(sum(parts)).toBeLessThanOrEqual(standbyBound(limit, instances, idle));
          }
        },
      ),
      { numRuns: propertyRuns(300) },
    );
  });

  it('a lone replica keeps the whole limit; a replica claiming absurd instances is capped', () => {
    const self = { replica: 'a', demand: 10, instances: 1 };
    expect(replicaBudget(100, [], self, DEFAULT_RESERVE_FRACTION)).toBe(100);
    const hostile = { replica: 'b', demand: 1e12, instances: 1e9 };
    expect(replicaBudget(100, [hostile], self, DEFAULT_RESERVE_FRACTION)).toBeGreaterThanOrEqual(0);
  });
});
