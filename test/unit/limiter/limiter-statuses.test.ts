/**
 * The limiter's statuses and quota rule in the cases limiter-quota-shadow-metadata.test.ts leaves open
 * (src/limiter/limiter.ts, docs/semantics.md §3 and §5): which of a rule's limits a status
 * reports when only some are over or two tie, the local-cache flag, quota groups next to
 * enforced, shadow, unmatched and replaced descriptors, the rule `metadata` merged into
 * `dynamic_metadata`, and that a request with nothing to count never reaches the store.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { SluiceError } from '../../../src/errors.js';
import { createLimiter } from '../../../src/limiter/limiter.js';
import type { JsonObject, RateLimitRule, RuleLimit } from '../../../src/model.js';
import type {
  CounterResult,
  CounterSpec,
  CounterStore,
} from '../../../src/stores/counter-store.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import { desc, makeRule, req, snapshotOf } from '../../helpers/rules.js';

function memory() {
  const clock = createManualClock(1_700_000_000_000);
  return createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
}

const limitOf = (name: string, requestsPerUnit: number): RuleLimit => ({
  requestsPerUnit,
  unit: 'minute',
  unitMultiplier: 1,
  windowMs: 60_000,
  algorithm: 'fixed_window',
  burst: requestsPerUnit,
  name,
});

/** A rule with one limit per name, so a status tells by its name which limit it reports. */
const ruleWith = (names: string[], more: Partial<RateLimitRule> = {}): RateLimitRule =>
  makeRule({ name: names[0], limits: names.map((n, i) => limitOf(n, 10 + i)), ...more });

/**
 * A store that answers every batch with the given results (one per spec) and `admitted`, and
 * records what it was asked: the way to give the limiter results no real store produces on
 * demand (ties, a local-cache answer).
 */
function scripted(results: CounterResult[], admitted: boolean) {
  const calls: CounterSpec[][] = [];
  const store: CounterStore = {
    apply: (specs) => {
      calls.push(specs.map((s) => ({ ...s })));
      return Promise.resolve({ admitted, results: results.slice(0, specs.length) });
    },
    size: () => 0,
    healthy: () => true,
    close: () => Promise.resolve(),
  };
  return { store, calls };
}

const over = (resetMs: number, extra: Partial<CounterResult> = {}): CounterResult => ({
  overLimit: true,
  remaining: 0,
  resetMs,
  ...extra,
});
const room = (remaining: number, resetMs = 60_000): CounterResult => ({
  overLimit: false,
  remaining,
  resetMs,
});

async function reported(results: CounterResult[], admitted = false) {
  const names = results.map((_, i) => `l${i}`);
  const { store } = scripted(results, admitted);
  const limiter = createLimiter({ store, shadowMode: false });
  const response = await limiter.decide(snapshotOf({ k: ruleWith(names) }), req([desc('k')]));
  return response.statuses[0]!;
}

describe('which limit of a rule a status reports', () => {
  it('an over-limit limit wins over one with room, even when the one with room resets later', async () => {
    const status = await reported([room(5, 3_600_000), over(1_000)]);
    expect(status).toMatchObject({
      code: 'OVER_LIMIT',
      currentLimit: { name: 'l1', requestsPerUnit: 11, unit: 'minute' },
      limitRemaining: 0,
      durationUntilResetMs: 1_000,
      overLimit: true,
    });
  });

  it('of two over-limit limits, the longer wait, also when it comes first', async () => {
    const status = await reported([over(50_000), over(1_000)]);
    expect(status.currentLimit!.name).toBe('l0');
    expect(status.durationUntilResetMs).toBe(50_000);
  });

  it('of two over-limit limits with the same wait, the first', async () => {
    const status = await reported([room(3), over(7_000), over(7_000)]);
    expect(status.currentLimit!.name).toBe('l1');
    expect(status.durationUntilResetMs).toBe(7_000);
  });

  it('with every limit in room: the least remaining, the first of a tie', async () => {
    const least = await reported([room(4, 1_000), room(2, 2_000), room(3, 3_000)], true);
    expect(least).toMatchObject({
      code: 'OK',
      currentLimit: { name: 'l1' },
      limitRemaining: 2,
      durationUntilResetMs: 2_000,
    });
    const tie = await reported([room(4, 1_000), room(2, 2_000), room(2, 3_000)], true);
    expect(tie.currentLimit!.name).toBe('l1');
    expect(tie.durationUntilResetMs).toBe(2_000);
  });
});

describe('the local-cache flag', () => {
  it('is set only on an over-limit answer that came from the local cache', async () => {
    const cached = await reported([over(2_000, { fromLocalCache: true })]);
    expect(cached.overLimitWithLocalCache).toBe(true);
    const fetched = await reported([over(2_000, { fromLocalCache: false })]);
    expect(fetched.overLimitWithLocalCache).toBe(false);
    const plain = await reported([over(2_000)]);
    expect(plain.overLimitWithLocalCache).toBe(false);
    const inRoom = await reported([{ ...room(1), fromLocalCache: true }], true);
    expect(inRoom.overLimitWithLocalCache).toBe(false);
  });
});

describe('a request with nothing to count', () => {
  it('never reaches an asynchronous store, which may be down', async () => {
    const store: CounterStore = {
      apply: () => Promise.reject(new SluiceError('STORE_UNAVAILABLE', 'redis is not connected')),
      size: () => 0,
      healthy: () => false,
      close: () => Promise.resolve(),
    };
    const limiter = createLimiter({ store, shadowMode: false });
    const snapshot = snapshotOf({ free: makeRule({ unlimited: true }) });
    const response = await limiter.decide(snapshot, req([desc('none'), desc('free')]));
    expect(response.overallCode).toBe('OK');
    expect(response.rejected).toBe(false);
    expect(response.statuses.map((s) => s.code)).toEqual(['OK', 'OK']);
  });
});

describe('quota groups', () => {
  it('an enforced rule reports quota false; a quota rule quota true, each in its own group', async () => {
    const { store, calls } = scripted([room(5), room(5), room(5)], true);
    const limiter = createLimiter({ store, shadowMode: false });
    const snapshot = snapshotOf({
      e: makeRule(),
      q: makeRule({ quotaMode: true }),
      r: makeRule({ quotaMode: true }),
    });
    const response = await limiter.decide(snapshot, req([desc('e'), desc('q'), desc('r')]));
    expect(response.statuses.map((s) => s.quota)).toEqual([false, true, true]);
    expect(calls[0]!.map((s) => [s.mode, s.quotaGroup])).toEqual([
      ['enforced', undefined],
      ['quota', 1],
      ['quota', 2],
    ]);
  });

  it('without QUOTA_MODE, an unmatched descriptor does not keep an over quota rule from rejecting', async () => {
    const limiter = createLimiter({ store: memory(), shadowMode: false });
    const snapshot = snapshotOf({ q: makeRule({ quotaMode: true, requestsPerUnit: 1 }) });
    expect((await limiter.decide(snapshot, req([desc('q'), desc('none')]))).overallCode).toBe('OK');
    const second = await limiter.decide(snapshot, req([desc('q'), desc('none')]));
    expect(second.overallCode).toBe('OVER_LIMIT');
    expect(second.rejected).toBe(true);
    expect(second.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
  });

  it('without QUOTA_MODE, a shadow rule is no quota descriptor: the over quota rule rejects', async () => {
    const limiter = createLimiter({ store: memory(), shadowMode: false });
    const snapshot = snapshotOf({
      q: makeRule({ quotaMode: true, requestsPerUnit: 1 }),
      s: makeRule({ shadowMode: true, requestsPerUnit: 100 }),
    });
    await limiter.decide(snapshot, req([desc('q'), desc('s')]));
    const second = await limiter.decide(snapshot, req([desc('q'), desc('s')]));
    expect(second.overallCode).toBe('OVER_LIMIT');
    expect(second.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
  });

  it('a shadow quota descriptor is never over, so an over quota rule next to it passes', async () => {
    const limiter = createLimiter({ store: memory(), shadowMode: false });
    const snapshot = snapshotOf({
      q: makeRule({ quotaMode: true, requestsPerUnit: 1 }),
      s: makeRule({ quotaMode: true, shadowMode: true, requestsPerUnit: 100 }),
    });
    await limiter.decide(snapshot, req([desc('q'), desc('s')]));
    const second = await limiter.decide(snapshot, req([desc('q'), desc('s')]));
    expect(second.overallCode).toBe('OK');
    expect(second.rejected).toBe(false);
    expect(second.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    // The same request without the shadow descriptor is rejected.
    expect((await limiter.decide(snapshot, req([desc('q')]))).overallCode).toBe('OVER_LIMIT');
  });

  it('without QUOTA_MODE, a replaced descriptor does not keep an over quota rule from rejecting', async () => {
    const limiter = createLimiter({ store: memory(), shadowMode: false });
    const snapshot = snapshotOf({
      a: makeRule({ name: 'a', requestsPerUnit: 1, quotaMode: true, replaces: ['b'] }),
      b: makeRule({ name: 'b', requestsPerUnit: 100 }),
    });
    await limiter.decide(snapshot, req([desc('a'), desc('b')]));
    const second = await limiter.decide(snapshot, req([desc('a'), desc('b')]));
    expect(second.overallCode).toBe('OVER_LIMIT');
    expect(second.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
  });

  it('under QUOTA_MODE, a replaced descriptor counts as unmatched: never over, so the request passes', async () => {
    const limiter = createLimiter({ store: memory(), shadowMode: false, quotaMode: true });
    const snapshot = snapshotOf({
      a: makeRule({ name: 'a', requestsPerUnit: 1, replaces: ['b'] }),
      b: makeRule({ name: 'b', requestsPerUnit: 100 }),
    });
    await limiter.decide(snapshot, req([desc('a'), desc('b')]));
    const second = await limiter.decide(snapshot, req([desc('a'), desc('b')]));
    expect(second.overallCode).toBe('OK');
    expect(second.statuses[0]!.code).toBe('OVER_LIMIT');
    // The replaced descriptor reports as unmatched.
    expect(second.statuses[1]).toMatchObject({ code: 'OK', currentLimit: undefined, hits: 0 });
    // Alone, the over quota descriptor rejects.
    expect((await limiter.decide(snapshot, req([desc('a')]))).overallCode).toBe('OVER_LIMIT');
  });
});

describe('rule metadata in dynamic_metadata', () => {
  const withMeta = (metadata: JsonObject, more: Partial<RateLimitRule> = {}) =>
    makeRule({ metadata, ...more });

  it('merges the metadata of the descriptors that passed, in request order, the first value winning', async () => {
    const limiter = createLimiter({
      store: memory(),
      shadowMode: false,
      responseDynamicMetadata: true,
    });
    const first = { team: 'payments', owner: { name: 'ann', tags: ['a'] }, tier: 1 };
    const snapshot = snapshotOf({
      a: withMeta(first),
      b: withMeta({ team: 'search', owner: { name: 'bob', email: 'b@x' }, extra: null }),
      c: withMeta({ owner: 'not a mapping', flags: { on: true } }),
      blocked: withMeta({ blocked: true }, { requestsPerUnit: 0 }),
      plain: makeRule(),
    });
    const response = await limiter.decide(
      snapshot,
      req([desc('a'), desc('blocked'), desc('b'), desc('plain'), desc('c')]),
    );
    expect(response.statuses[1]!.code).toBe('OVER_LIMIT');
    expect(response.dynamicMetadata).toStrictEqual({
      domain: 'd',
      descriptors: [
        { entries: ['a=v'] },
        { entries: ['blocked=v'] },
        { entries: ['b=v'] },
        { entries: ['plain=v'] },
        { entries: ['c=v'] },
      ],
      metadata: {
        team: 'payments',
        owner: { name: 'ann', tags: ['a'], email: 'b@x' },
        tier: 1,
        extra: null,
        flags: { on: true },
      },
    });
    // Merging copied the mappings: the rule's own metadata is unchanged.
    expect(first).toStrictEqual({ team: 'payments', owner: { name: 'ann', tags: ['a'] }, tier: 1 });
    const again = await limiter.decide(snapshot, req([desc('a')]));
    expect(again.dynamicMetadata!.metadata).toStrictEqual(first);
  });

  it('a nested mapping met first is copied, so merging into it leaves the rule alone', async () => {
    const limiter = createLimiter({
      store: memory(),
      shadowMode: false,
      responseDynamicMetadata: true,
    });
    const deep = { a: { b: { c: 1 } } };
    const snapshot = snapshotOf({
      x: withMeta(deep),
      y: withMeta({ a: { b: { d: 2 }, e: 3 } }),
    });
    const response = await limiter.decide(snapshot, req([desc('x'), desc('y')]));
    expect(response.dynamicMetadata!.metadata).toStrictEqual({ a: { b: { c: 1, d: 2 }, e: 3 } });
    expect(deep).toStrictEqual({ a: { b: { c: 1 } } });
  });

  it('no metadata field when no passing descriptor has any; none from an over or shadow-only rule', async () => {
    const limiter = createLimiter({
      store: memory(),
      shadowMode: false,
      responseDynamicMetadata: true,
    });
    const snapshot = snapshotOf({
      plain: makeRule(),
      empty: withMeta({}),
      blocked: withMeta({ blocked: true }, { requestsPerUnit: 0 }),
      shadow: withMeta({ shadow: 'over' }, { requestsPerUnit: 0, shadowMode: true }),
    });
    const none = await limiter.decide(snapshot, req([desc('plain'), desc('empty')]));
    expect(none.dynamicMetadata).toStrictEqual({
      domain: 'd',
      descriptors: [{ entries: ['plain=v'] }, { entries: ['empty=v'] }],
    });
    const blocked = await limiter.decide(snapshot, req([desc('blocked')], 2));
    expect(blocked.dynamicMetadata).toStrictEqual({
      domain: 'd',
      descriptors: [{ entries: ['blocked=v'] }],
      hitsAddend: 2,
    });
    // A shadow rule over its limit answers OK, so its metadata is returned.
    const shadow = await limiter.decide(snapshot, req([desc('shadow')]));
    expect(shadow.statuses[0]).toMatchObject({ code: 'OK', overLimit: true });
    expect(shadow.dynamicMetadata!.metadata).toStrictEqual({ shadow: 'over' });
  });
});
