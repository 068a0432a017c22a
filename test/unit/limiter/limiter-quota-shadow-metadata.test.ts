/**
 * The limiter through its public interface (src/limiter/limiter.ts, docs/semantics.md §3, §5):
 * the exact statuses of unmatched and unlimited descriptors, global QUOTA_MODE and its interplay
 * with shadow mode, the reset of a rule whose several limits are over, the reference's dynamic
 * metadata fields, and store failures on both the promise and the synchronous path.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { SluiceError } from '../../../src/errors.js';
import { createLimiter } from '../../../src/limiter/limiter.js';
import { MAX_UINT32 } from '../../../src/model.js';
import type { CounterStore } from '../../../src/stores/counter-store.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import { desc, makeRule, req, snapshotOf } from '../../helpers/rules.js';

function memory() {
  const clock = createManualClock(1_700_000_000_000);
  return { clock, store: createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 }) };
}

describe('statuses without a counter', () => {
  it('an unmatched descriptor: OK, no limit, 0 remaining, no reset; an unlimited one: the max', async () => {
    const { store } = memory();
    const limiter = createLimiter({ store, shadowMode: false });
    const response = await limiter.decide(
      snapshotOf({ free: makeRule({ unlimited: true }) }),
      req([desc('none'), desc('free')]),
    );
    expect(response.overallCode).toBe('OK');
    expect(response.statuses).toEqual([
      {
        code: 'OK',
        currentLimit: undefined,
        limitRemaining: 0,
        durationUntilResetMs: undefined,
        rule: undefined,
        hits: 0,
        overLimit: false,
      },
      {
        code: 'OK',
        currentLimit: undefined,
        limitRemaining: MAX_UINT32,
        durationUntilResetMs: undefined,
        rule: undefined,
        hits: 0,
        overLimit: false,
      },
    ]);
    expect(response.dynamicMetadata).toBeUndefined();
    expect(response.responseHeadersToAdd).toEqual([]);
    expect(store.size()).toBe(0);
  });
});

describe('global QUOTA_MODE', () => {
  it('every rule counts as quota: over says OVER_LIMIT and blocks only when every quota descriptor is', async () => {
    const { store } = memory();
    const limiter = createLimiter({
      store,
      shadowMode: false,
      quotaMode: true,
      responseDynamicMetadata: true,
    });
    const snapshot = snapshotOf({
      a: makeRule({ requestsPerUnit: 1 }),
      b: makeRule({ requestsPerUnit: 5 }),
    });
    await limiter.decide(snapshot, req([desc('a')]));
    const some = await limiter.decide(snapshot, req([desc('a'), desc('b')]));
    // One of two quota descriptors over: OK overall, the over one keeps OVER_LIMIT.
    expect(some.overallCode).toBe('OK');
    expect(some.rejected).toBe(false);
    expect(some.statuses[0]).toMatchObject({
      code: 'OVER_LIMIT',
      overLimit: true,
      quota: true,
      limitRemaining: 0,
      durationUntilResetMs: 61_000, // the sliding window’s wait
    });
    expect(some.statuses[1]).toMatchObject({ code: 'OK', limitRemaining: 4 });
    const all = await limiter.decide(snapshot, req([desc('a')]));
    expect(all.overallCode).toBe('OVER_LIMIT');
    expect(all.rejected).toBe(true);
    // An unmatched descriptor is a quota descriptor that is never over: it lets the request pass.
    const unmatched = await limiter.decide(snapshot, req([desc('a'), desc('none')]));
    expect(unmatched.overallCode).toBe('OK');
    expect(unmatched.statuses[0]!.code).toBe('OVER_LIMIT');
    expect(unmatched.dynamicMetadata).toEqual({
      domain: 'd',
      descriptors: [{ entries: ['a=v'] }, { entries: ['none=v'] }],
    });
  });

  it('shadow mode wins over quota mode: an over shadow rule is charged and reports its reset', async () => {
    const { store } = memory();
    const limiter = createLimiter({ store, shadowMode: false, quotaMode: true });
    const snapshot = snapshotOf({
      s: makeRule({ requestsPerUnit: 1, shadowMode: true, quotaMode: true }),
    });
    await limiter.decide(snapshot, req([desc('s')]));
    const over = await limiter.decide(snapshot, req([desc('s')]));
    expect(over.overallCode).toBe('OK');
    expect(over.statuses[0]).toMatchObject({ code: 'OK', overLimit: true, limitRemaining: 0 });
    expect(over.statuses[0]!.durationUntilResetMs).toBeGreaterThan(0);
    // Shadow counters are charged even when over: 2 hits counted.
    expect(store.top!(1)[0]!.count).toBe(2);
  });

  it('without the option, a plain rule blocks', async () => {
    const { store } = memory();
    const limiter = createLimiter({ store, shadowMode: false });
    const snapshot = snapshotOf({ a: makeRule({ requestsPerUnit: 1 }) });
    await limiter.decide(snapshot, req([desc('a')]));
    const over = await limiter.decide(snapshot, req([desc('a')]));
    expect(over.overallCode).toBe('OVER_LIMIT');
    expect(over.statuses[0]!.code).toBe('OVER_LIMIT');
  });
});

describe('several limits over at once', () => {
  it('the status reports the longest wait among the over-limit limits', async () => {
    const rule = makeRule({
      name: 'two',
      limits: [
        {
          requestsPerUnit: 1,
          unit: 'second',
          unitMultiplier: 1,
          windowMs: 1_000,
          algorithm: 'fixed_window',
          burst: 1,
          name: 'per_second',
        },
        {
          requestsPerUnit: 1,
          unit: 'minute',
          unitMultiplier: 1,
          windowMs: 60_000,
          algorithm: 'fixed_window',
          burst: 1,
          name: 'per_minute',
        },
      ],
    });
    const { store, clock } = memory();
    clock.set(1_699_999_980_000 + 10_500); // 10.5 s into a minute
    const limiter = createLimiter({ store, shadowMode: false });
    const snapshot = snapshotOf({ k: rule });
    await limiter.decide(snapshot, req([desc('k')]));
    const over = (await limiter.decide(snapshot, req([desc('k')]))).statuses[0]!;
    expect(over.code).toBe('OVER_LIMIT');
    expect(over.currentLimit!.name).toBe('per_minute');
    expect(over.durationUntilResetMs).toBe(49_500);
    expect(over.limitRemaining).toBe(0);
  });
});

describe('dynamic metadata', () => {
  it('entries, overrides in protobuf text form (zero fields left out), hits_addend fields', async () => {
    const { store } = memory();
    const limiter = createLimiter({ store, shadowMode: false, responseDynamicMetadata: true });
    const snapshot = snapshotOf({ q: makeRule({ quotaMode: true, requestsPerUnit: 5 }) });
    const response = await limiter.decide(
      snapshot,
      req(
        [
          desc('q', { hitsAddend: 2 }),
          desc('x', { limit: { requestsPerUnit: 3, unit: 'hour' } }),
          desc('y', { limit: { requestsPerUnit: 4, unit: undefined } }),
          desc('z', { limit: { requestsPerUnit: 0, unit: 'day' } }),
        ],
        7,
      ),
    );
    expect(response.dynamicMetadata).toEqual({
      domain: 'd',
      descriptors: [
        { entries: ['q=v'], hitsAddend: 2 },
        { entries: ['x=v'], limit: 'requests_per_unit:3 unit:HOUR' },
        // Protobuf text form leaves out fields at zero (UNKNOWN, 0), as the reference prints it.
        { entries: ['y=v'], limit: 'requests_per_unit:4' },
        { entries: ['z=v'], limit: 'unit:DAY' },
      ],
      hitsAddend: 7,
    });
  });
});

describe('store failures', () => {
  const failing = (sync: boolean): CounterStore & { applyNow?: unknown } => {
    const base: CounterStore = {
      apply: () => Promise.reject(new SluiceError('STORE_UNAVAILABLE', 'redis is not connected')),
      size: () => 0,
      healthy: () => false,
      close: () => Promise.resolve(),
    };
    if (!sync) return base;
    return {
      ...base,
      applyNow: () => {
        throw new Error('broken');
      },
    };
  };

  it('a failing store rejects the call with its error', async () => {
    const limiter = createLimiter({ store: failing(false), shadowMode: false });
    await expect(
      limiter.decide(snapshotOf({ a: makeRule() }), req([desc('a')])),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', message: 'redis is not connected' });
    expect(limiter.decideNow).toBeUndefined();
  });

  it('a synchronous store that throws: decide rejects with a SluiceError, decideNow throws', async () => {
    const limiter = createLimiter({ store: failing(true), shadowMode: false });
    const error = await limiter
      .decide(snapshotOf({ a: makeRule() }), req([desc('a')]))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SluiceError);
    expect(error).toMatchObject({ code: 'INTERNAL', message: 'broken' });
    expect(() => limiter.decideNow!(snapshotOf({ a: makeRule() }), req([desc('a')]))).toThrow(
      'broken',
    );
    // Nothing to count: the store is not asked.
    await expect(limiter.decide(snapshotOf({}), req([desc('a')]))).resolves.toMatchObject({
      overallCode: 'OK',
    });
  });

  it('the synchronous path answers as the promise path', async () => {
    const { store } = memory();
    const limiter = createLimiter({ store, shadowMode: false });
    const snapshot = snapshotOf({ a: makeRule({ requestsPerUnit: 2 }) });
    const now = limiter.decideNow!(snapshot, req([desc('a')]));
    const later = await limiter.decide(snapshot, req([desc('a')]));
    expect(now.statuses[0]!.limitRemaining).toBe(1);
    expect(later.statuses[0]!.limitRemaining).toBe(0);
  });
});
