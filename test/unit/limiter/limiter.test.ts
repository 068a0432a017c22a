import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import type { ConfigSnapshot, LimitMatch } from '../../../src/config/types.js';
import { createLimiter, hitsFor } from '../../../src/limiter/limiter.js';
import {
  MAX_UINT32,
  type RateLimitRequest,
  type RateLimitRule,
  type RequestDescriptor,
} from '../../../src/model.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { CounterStore } from '../../../src/stores/counter-store.js';
import { makeRule } from '../../helpers/rules.js';

/** A snapshot whose rules are keyed by the descriptor's first entry key (the input under test). */
function snapshotOf(rules: Record<string, RateLimitRule>): ConfigSnapshot {
  const matches = new Map<string, LimitMatch>(
    Object.entries(rules).map(([k, r]) => [k, { rule: r, sharedPatterns: undefined }]),
  );
  return {
    files: [],
    warnings: [],
    domains: new Map([['d', { name: 'd', files: [] }]]),
    getLimit: (domain, descriptor) =>
      domain === 'd' ? matches.get(descriptor.entries[0]?.key ?? '') : undefined,
    dump: () => [],
  };
}

const desc = (key: string, value = 'v', hitsAddend?: number): RequestDescriptor => ({
  entries: [{ key, value }],
  limit: undefined,
  hitsAddend,
});
const req = (descriptors: RequestDescriptor[], hitsAddend = 0): RateLimitRequest => ({
  domain: 'd',
  descriptors,
  hitsAddend,
});

function setup(rules: Record<string, RateLimitRule>, shadowMode = false) {
  const clock = createManualClock();
  const store = createMemoryStore({ clock: clock.now });
  const limiter = createLimiter({ store, shadowMode });
  const snapshot = snapshotOf(rules);
  return { clock, store, decide: (r: RateLimitRequest) => limiter.decide(snapshot, r) };
}

describe('hitsFor', () => {
  it('prefers the descriptor value, else max(1, request value)', () => {
    expect(hitsFor(desc('a', 'v', 0), 7)).toBe(0);
    expect(hitsFor(desc('a', 'v', 3), 7)).toBe(3);
    expect(hitsFor(desc('a'), 0)).toBe(1);
    expect(hitsFor(desc('a'), 4)).toBe(4);
  });
});

describe('limiter decisions', () => {
  it('is all-or-nothing: a rejected request charges none of its descriptors', async () => {
    const { decide } = setup({
      a: makeRule({ fullKey: 'd.a', requestsPerUnit: 5 }),
      b: makeRule({ fullKey: 'd.b', requestsPerUnit: 1 }),
    });
    expect((await decide(req([desc('a'), desc('b')]))).overallCode).toBe('OK');
    const rejected = await decide(req([desc('a'), desc('b')]));
    expect(rejected.overallCode).toBe('OVER_LIMIT');
    expect(rejected.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT']);
    // 'a' had room but was not charged: 5 - 1 = 4 left, both before and after the rejection.
    expect(rejected.statuses[0]!.limitRemaining).toBe(4);
    const alone = await decide(req([desc('a')]));
    expect(alone.statuses[0]!.limitRemaining).toBe(3);
  });

  it('never blocks on a shadow-mode rule but still counts it', async () => {
    const { decide } = setup({
      s: makeRule({ fullKey: 'd.s', requestsPerUnit: 1, shadowMode: true }),
    });
    const first = await decide(req([desc('s')]));
    const second = await decide(req([desc('s')]));
    expect(first.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
    expect(second.overallCode).toBe('OK');
    expect(second.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
    expect(second.statuses[0]!.currentLimit).toEqual({
      requestsPerUnit: 1,
      unit: 'minute',
      name: '',
    });
  });

  it('global SHADOW_MODE answers OK overall while statuses keep their real codes', async () => {
    const { decide } = setup({ a: makeRule({ fullKey: 'd.a', requestsPerUnit: 1 }) }, true);
    await decide(req([desc('a')]));
    const over = await decide(req([desc('a')]));
    expect(over.overallCode).toBe('OK');
    expect(over.statuses[0]!.code).toBe('OVER_LIMIT');
  });

  it('answers unlimited rules with the max remaining and no limit, without counting', async () => {
    const { decide, store } = setup({ u: makeRule({ fullKey: 'd.u', unlimited: true }) });
    const response = await decide(req([desc('u')]));
    expect(response.statuses[0]).toMatchObject({
      code: 'OK',
      currentLimit: undefined,
      limitRemaining: MAX_UINT32,
      durationUntilResetMs: undefined,
    });
    expect(store.size()).toBe(0);
  });

  it("drops a rule named in another matched rule's replaces", async () => {
    const { decide } = setup({
      general: makeRule({ fullKey: 'd.general', name: 'general', requestsPerUnit: 1 }),
      special: makeRule({
        fullKey: 'd.special',
        name: 'special',
        requestsPerUnit: 10,
        replaces: ['general'],
      }),
    });
    await decide(req([desc('general')]));
    // Alone, 'general' is exhausted; next to 'special' it is replaced and does not count.
    expect((await decide(req([desc('general')]))).overallCode).toBe('OVER_LIMIT');
    const both = await decide(req([desc('general'), desc('special')]));
    expect(both.overallCode).toBe('OK');
    expect(both.statuses[0]).toMatchObject({
      code: 'OK',
      currentLimit: undefined,
      limitRemaining: 0,
      durationUntilResetMs: undefined,
    });
    expect(both.statuses[1]).toMatchObject({ code: 'OK', limitRemaining: 9 });
  });

  it('answers OK with no limit for unknown domains and unmatched descriptors', async () => {
    const { decide, store } = setup({ a: makeRule({ fullKey: 'd.a' }) });
    const unknown = await decide({ domain: 'zzz', descriptors: [desc('a')], hitsAddend: 0 });
    expect(unknown.overallCode).toBe('OK');
    expect(unknown.statuses[0]).toMatchObject({
      code: 'OK',
      currentLimit: undefined,
      limitRemaining: 0,
    });
    expect((await decide(req([desc('nothing')]))).statuses[0]!.currentLimit).toBeUndefined();
    expect(store.size()).toBe(0);
  });

  it('checks without charging when a descriptor says hits_addend 0', async () => {
    const { decide } = setup({ a: makeRule({ fullKey: 'd.a', requestsPerUnit: 2 }) });
    expect((await decide(req([desc('a', 'v', 0)]))).statuses[0]!.limitRemaining).toBe(2);
    expect((await decide(req([desc('a')], 2))).statuses[0]!.limitRemaining).toBe(0);
    expect((await decide(req([desc('a', 'v', 1)]))).overallCode).toBe('OVER_LIMIT');
  });

  it('reports reset durations in milliseconds: exact wait when over', async () => {
    const { decide, clock } = setup({
      a: makeRule({ fullKey: 'd.a', requestsPerUnit: 1, windowMs: 1000, unit: 'second' }),
    });
    clock.set(1_000_000);
    await decide(req([desc('a')]));
    clock.advance(250);
    const over = await decide(req([desc('a')]));
    const wait = over.statuses[0]!.durationUntilResetMs!;
    expect(wait).toBeGreaterThan(0);
    clock.advance(wait - 1);
    expect((await decide(req([desc('a')]))).overallCode).toBe('OVER_LIMIT');
    clock.advance(1);
    expect((await decide(req([desc('a')]))).overallCode).toBe('OK');
  });
});

describe('limiter: several limits, non-wire fields, quota mode', () => {
  const twoLimits = makeRule({
    name: 'per_second',
    requestsPerUnit: 2,
    unit: 'second',
    windowMs: 1_000,
    limits: [
      {
        requestsPerUnit: 2,
        unit: 'second',
        unitMultiplier: 1,
        windowMs: 1_000,
        algorithm: 'sliding_log',
        burst: 2,
        name: 'per_second',
      },
      {
        requestsPerUnit: 3,
        unit: 'minute',
        unitMultiplier: 1,
        windowMs: 60_000,
        algorithm: 'sliding_log',
        burst: 3,
        name: 'per_minute',
      },
    ],
  });

  it('reports the least-remaining limit when OK and the longest-waiting one when over', async () => {
    const { clock, decide } = setup({ k: twoLimits });
    const first = (await decide(req([desc('k')]))).statuses[0]!;
    // second: 1 left, minute: 2 left -> the second limit is reported.
    expect(first.currentLimit).toEqual({ requestsPerUnit: 2, unit: 'second', name: 'per_second' });
    expect(first.limitRemaining).toBe(1);
    expect(first).toMatchObject({ hits: 1, overLimit: false, rule: twoLimits });
    await decide(req([desc('k')]));
    const third = (await decide(req([desc('k')]))).statuses[0]!;
    expect(third.code).toBe('OVER_LIMIT');
    expect(third.overLimit).toBe(true);
    expect(third.currentLimit!.name).toBe('per_second');
    expect(third.durationUntilResetMs).toBe(1_000);
    clock.advance(1_000);
    const fourth = (await decide(req([desc('k')]))).statuses[0]!;
    // Minute limit now has 0 left after this hit: it is the least remaining.
    expect(fourth.code).toBe('OK');
    expect(fourth.currentLimit!.name).toBe('per_minute');
    expect(fourth.limitRemaining).toBe(0);
    clock.advance(1_000);
    const fifth = (await decide(req([desc('k')]))).statuses[0]!;
    // Only the minute limit is over: it is reported with its own wait (first hit at t=0).
    expect(fifth.code).toBe('OVER_LIMIT');
    expect(fifth.currentLimit!.name).toBe('per_minute');
    expect(fifth.durationUntilResetMs).toBe(58_000);
  });

  it('passes the store’s local-cache flag to an over-limit status', async () => {
    const rule = makeRule();
    const store: CounterStore = {
      apply: (specs) =>
        Promise.resolve({
          admitted: false,
          results: specs.map(() => ({
            overLimit: true,
            remaining: 0,
            resetMs: 5,
            fromLocalCache: true,
          })),
        }),
      size: () => 0,
      healthy: () => true,
      close: () => Promise.resolve(),
    };
    const limiter = createLimiter({ store, shadowMode: false });
    const response = await limiter.decide(snapshotOf({ k: rule }), req([desc('k')]));
    expect(response.statuses[0]!.overLimitWithLocalCache).toBe(true);
  });

  it('quota mode: the only quota descriptor over its limit says OVER_LIMIT and rejects, charging nothing', async () => {
    const quota = makeRule({ quotaMode: true, requestsPerUnit: 1 });
    const plain = makeRule({ requestsPerUnit: 5 });
    const clock = createManualClock();
    const store = createMemoryStore({ clock: clock.now });
    const limiter = createLimiter({ store, shadowMode: false, responseDynamicMetadata: true });
    const snapshot = snapshotOf({ q: quota, p: plain });
    const request = req([desc('p'), desc('q')]);
    const first = await limiter.decide(snapshot, request);
    expect(first.overallCode).toBe('OK');
    expect(first.dynamicMetadata).toEqual({
      domain: 'd',
      descriptors: [{ entries: ['p=v'] }, { entries: ['q=v'] }],
    });
    const second = await limiter.decide(snapshot, request);
    // Every quota descriptor of the request (the only one) is over: rejected, as the reference.
    expect(second.overallCode).toBe('OVER_LIMIT');
    expect(second.statuses[1]).toMatchObject({
      code: 'OVER_LIMIT',
      limitRemaining: 0,
      durationUntilResetMs: 61_000, // the sliding window’s wait
      overLimit: true,
    });
    expect(second.statuses[0]!.limitRemaining).toBe(4);
    // The rejected request charged nothing: each counter holds the first call's hit.
    const counts = new Map(store.top!(10).map((counter) => [counter.key.split('|')[3], counter]));
    expect(counts.get('p=v')!.count).toBe(1);
    expect(counts.get('q=v')!.count).toBe(1);
  });
});
