/**
 * Issue 22, item 6: counting stays integer-exact with absurd `hits_addend` values, so no total
 * goes negative and no small charge is lost. A descriptor's hits are bounded by the reference's
 * request type (uint32: at most 4294967295 per descriptor), and a counter's total saturates
 * below 2^53, where doubles stop being exact. The attack of the issue: a shadow rule (charged
 * even over its limit) takes 2^64 hits, later small charges, the huge bucket expires, and a
 * reload turns shadow off.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import type { ConfigSnapshot, LimitMatch } from '../../../src/config/types.js';
import { createLimiter, hitsFor } from '../../../src/limiter/limiter.js';
import type { RateLimitRequest, RateLimitRule, RequestDescriptor } from '../../../src/model.js';
import { MAX_UINT32 } from '../../../src/model.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { Algorithm } from '../../../src/algorithms/index.js';
import { makeRule } from '../../helpers/rules.js';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import { specBuilder } from '../../helpers/specs.js';

function snapshotOf(rule: RateLimitRule): ConfigSnapshot {
  const match: LimitMatch = { rule, sharedPatterns: undefined };
  return {
    files: [],
    warnings: [],
    domains: new Map([['d', { name: 'd', files: [] }]]),
    getLimit: (domain) => (domain === 'd' ? match : undefined),
    dump: () => [],
  };
}

const request = (hitsAddend?: number, value = 'v'): RateLimitRequest => ({
  domain: 'd',
  descriptors: [{ entries: [{ key: 'k', value }], limit: undefined, hitsAddend }],
  hitsAddend: 0,
});

const ALGORITHMS: readonly Algorithm[] = ['sliding_window', 'fixed_window', 'sliding_log'];

describe('hits are bounded by uint32', () => {
  it('a descriptor hits_addend above 4294967295 counts as 4294967295', () => {
    const d = (hitsAddend: number | undefined): RequestDescriptor => ({
      entries: [],
      limit: undefined,
      hitsAddend,
    });
    expect(hitsFor(d(2 ** 64), 0)).toBe(MAX_UINT32);
    expect(hitsFor(d(MAX_UINT32 + 1), 0)).toBe(MAX_UINT32);
    expect(hitsFor(d(MAX_UINT32), 0)).toBe(MAX_UINT32);
    expect(hitsFor(d(undefined), 2 ** 40)).toBe(MAX_UINT32);
    expect(hitsFor(d(7), 0)).toBe(7);
  });
});

describe.each(ALGORITHMS)('%s: totals never go negative and no charge is lost', (algorithm) => {
  const rule = (shadowMode: boolean) =>
    makeRule({
      fullKey: 'd.k',
      requestsPerUnit: 3,
      unit: 'second',
      windowMs: 1_000,
      algorithm,
      shadowMode,
      limits: [
        {
          requestsPerUnit: 3,
          unit: 'second',
          unitMultiplier: 1,
          windowMs: 1_000,
          algorithm,
          burst: 3,
          name: '',
        },
      ],
    });

  it('a shadow rule charged 2^64 hits, small charges, expiry, then shadow turned off', async () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    const limiter = createLimiter({ store, shadowMode: false });
    const shadow = snapshotOf(rule(true));
    const enforced = snapshotOf(rule(false));
    const totals = (): number[] => store.top!(10).map((c) => c.count);

    for (let step = 0; step < 40; step++) {
      const huge = step % 10 === 0;
      const response = await limiter.decide(shadow, request(huge ? 2 ** 64 : 1));
      const status = response.statuses[0]!;
      expect(response.overallCode).toBe('OK');
      expect(status.limitRemaining).toBeGreaterThanOrEqual(0);
      expect(status.limitRemaining).toBeLessThanOrEqual(3);
      for (const total of totals()) {
        expect(total).toBeGreaterThanOrEqual(0);
        expect(Number.isSafeInteger(total)).toBe(true);
      }
      clock.advance(130);
    }
    // Every huge bucket expires; what is left must be exactly what was charged since.
    clock.advance(2_000);
    expect(totals().every((t) => t >= 0)).toBe(true);
    // A reload turns shadow off: the same counter admits at most 3 in a second.
    let admitted = 0;
    for (let k = 0; k < 50; k++) {
      const response = await limiter.decide(enforced, request(1));
      if (response.overallCode === 'OK') admitted++;
      const status = response.statuses[0]!;
      expect(status.limitRemaining).toBeLessThanOrEqual(3);
      clock.advance(5);
    }
    expect(admitted).toBeLessThanOrEqual(3);
    expect(admitted).toBeGreaterThan(0);
    for (const total of totals()) expect(total).toBeGreaterThanOrEqual(0);
    await store.close();
  });

  it('a shadow counter saturates below 2^53 and stays an exact integer', () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    const spec = specBuilder({ algorithm, limit: 3, windowMs: 1_000, mode: 'shadow' });
    // The store itself does not rely on the limiter's bound.
    for (let k = 0; k < 4; k++) store.applyNow!([spec('sat', 2 ** 52)]);
    store.applyNow!([spec('sat', 1)]);
    const [counter] = store.top!(1);
    expect(counter!.count).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER);
    expect(counter!.count).toBeGreaterThanOrEqual(2 ** 52);
    expect(Number.isSafeInteger(counter!.count)).toBe(true);
    clock.advance(5_000);
    const after = store.applyNow!([spec('sat', 1)]);
    expect(after.results[0]!.remaining).toBe(2);
    expect(store.top!(1)[0]!.count).toBe(1);
  });
});

describe('an enforced override on a shadow rule counter (the issue attack, real config)', () => {
  it('after 2^64-hit shadow charges and expiry, the override admits at most 3 per second', async () => {
    const snapshot = buildSnapshot([
      {
        name: 'd.yaml',
        content:
          'domain: d\ndescriptors:\n  - key: k\n    shadow_mode: true\n    rate_limit: {unit: second, requests_per_unit: 3}\n',
      },
    ]);
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    const limiter = createLimiter({ store, shadowMode: false });
    const shadowCall = (hits: number) => limiter.decide(snapshot, request(hits));
    const overrideCall = () =>
      limiter.decide(snapshot, {
        domain: 'd',
        descriptors: [
          {
            entries: [{ key: 'k', value: 'v' }],
            limit: { requestsPerUnit: 3, unit: 'second' },
            hitsAddend: 1,
          },
        ],
        hitsAddend: 0,
      });
    // A huge shadow charge, then small ones in later sub-buckets: in floating point the small
    // ones vanish into the huge total, so when the huge bucket expires the total is short of
    // them, and when they expire in turn it goes below zero.
    await shadowCall(2 ** 64);
    clock.advance(300);
    await shadowCall(1);
    clock.advance(300);
    await shadowCall(1);
    clock.advance(500);
    // t0 + 1100 ms: the huge bucket has expired, the two small ones have not.
    let admitted = 0;
    for (let k = 0; k < 8; k++) {
      const response = await overrideCall();
      if (response.overallCode === 'OK') admitted++;
      expect(response.statuses[0]!.limitRemaining).toBeLessThanOrEqual(3);
      for (const counter of store.top!(10)) expect(counter.count).toBeGreaterThanOrEqual(0);
      clock.advance(100);
    }
    // Between t0 + 1100 and t0 + 1800 the window still holds the two small hits (until 1300
    // and 1600): at most 3 - 2 + 2 = 3 can be admitted.
    expect(admitted).toBeLessThanOrEqual(3);
    await store.close();
  });
});
