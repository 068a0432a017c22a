/**
 * The debug console's pure parts: counter keys read back exactly as limiter/keys.ts writes them,
 * the sampler's ring (rates from the service counters, 15 minutes kept) on a manual clock, and
 * the config status's version and last load.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import { ConfigError } from '../../../src/errors.js';
import { counterKey } from '../../../src/limiter/keys.js';
import type { ServiceCounters } from '../../../src/metrics/metrics.js';
import { createConfigStatus } from '../../../src/console/config-status.js';
import { decodeCounterKey } from '../../../src/limiter/keys.js';
import { createSampler, type Sampler } from '../../../src/console/sampler.js';

describe('decodeCounterKey', () => {
  const snapshot = buildSnapshot([
    {
      name: 'r.yaml',
      content: `domain: "d|o=m#a\\\\in"
descriptors:
  - key: "k=|#"
    descriptors:
      - key: user
        value: "u*"
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 1, algorithm: token_bucket}
`,
    },
  ]);

  it('reads back every part of a key with escaped characters and a shared pattern', () => {
    const entries = [
      { key: 'k=|#', value: 'v\\|=#x' },
      { key: 'user', value: 'u42' },
    ];
    const match = snapshot.getLimit('d|o=m#a\\in', {
      entries,
      limit: undefined,
      hitsAddend: undefined,
    });
    expect(match).toBeDefined();
    const key = counterKey('d|o=m#a\\in', entries, match!, 60_000, 'token_bucket');
    expect(decodeCounterKey(key)).toEqual({
      algorithm: 'token_bucket',
      windowMs: 60_000,
      domain: 'd|o=m#a\\in',
      entries: [
        { key: 'k=|#', value: 'v\\|=#x', shared: false },
        { key: 'user', value: 'u*', shared: true },
      ],
    });
  });

  it('refuses what is not a counter key', () => {
    expect(decodeCounterKey('nonsense')).toBeUndefined();
    expect(decodeCounterKey('zz|1000|d|k=v')).toBeUndefined();
    expect(decodeCounterKey('sw|x|d|k=v')).toBeUndefined();
    expect(decodeCounterKey('sw|1000|d|novalue')).toBeUndefined();
  });
});

describe('sampler', () => {
  let sampler: Sampler | undefined;
  afterEach(() => sampler?.close());

  it('turns the service counters into per-second rates and keeps 15 minutes', () => {
    const clock = createManualClock();
    const counters: ServiceCounters = {
      configLoadSuccess: 0,
      configLoadError: 0,
      globalShadowMode: 0,
      callsOk: 0,
      callsOverLimit: 0,
      serviceErrors: 0,
      storeErrors: 0,
      internalErrors: 0,
    };
    let keys = 0;
    sampler = createSampler({
      counters,
      storeSize: () => keys,
      storeHealthy: () => true,
      clock: clock.now,
      intervalMs: 5_000,
    });
    counters.callsOk += 50;
    counters.callsOverLimit += 10;
    counters.storeErrors += 5;
    keys = 7;
    clock.advance(5_000);
    expect(sampler.live()).toMatchObject({ okPerSecond: 10, overLimitPerSecond: 2 });
    sampler.sample();
    expect(sampler.points()).toEqual([
      {
        t: clock.now(),
        okPerSecond: 10,
        overLimitPerSecond: 2,
        errorsPerSecond: 1,
        keys: 7,
        storeHealthy: true,
      },
    ]);
    // Right after a sample nothing has elapsed: no live point.
    expect(sampler.live()).toBeUndefined();
    // A sample at the same instant adds nothing.
    sampler.sample();
    expect(sampler.points()).toHaveLength(1);

    // 15 minutes of 5 s samples: 180 points; older ones fall off, oldest first.
    for (let i = 1; i <= 200; i++) {
      counters.callsOk += i * 5;
      clock.advance(5_000);
      sampler.sample();
    }
    const points = sampler.points();
    expect(points).toHaveLength(180);
    expect(points[0]!.okPerSecond).toBe(21);
    expect(points.at(-1)!.okPerSecond).toBe(200);
    for (let i = 1; i < points.length; i++) expect(points[i]!.t - points[i - 1]!.t).toBe(5_000);
  });
});

describe('config status', () => {
  it('counts snapshots swapped in and keeps the last refusal with every problem', () => {
    const clock = createManualClock();
    const status = createConfigStatus(clock.now);
    expect(status.view()).toMatchObject({ version: 0, lastLoad: undefined });
    const first = buildSnapshot([{ name: 'a.yaml', content: 'domain: a\ndescriptors: []\n' }]);
    status.onSnapshot(first);
    status.onSnapshot(first);
    expect(status.view()).toMatchObject({
      version: 1,
      loadedAt: clock.now(),
      lastLoad: { ok: true, problems: [] },
      loads: { ok: 1, failed: 0 },
    });
    clock.advance(1000);
    let error: unknown;
    try {
      buildSnapshot([
        {
          name: 'b.yaml',
          content:
            'domain: b\ndescriptors:\n  - key: x\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  - {}\n',
        },
      ]);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    status.onError(error as ConfigError);
    const view = status.view();
    expect(view.version).toBe(1);
    expect(view.loadedAt).toBe(clock.now() - 1000);
    expect(view.lastLoad?.ok).toBe(false);
    expect(view.lastLoad?.problems.length).toBe((error as ConfigError).problems.length);
    expect(view.lastLoad?.problems.join('\n')).toContain('b.yaml');
    status.onError(new Error('cannot read /etc/rules'));
    expect(status.view().lastLoad?.problems).toEqual(['cannot read /etc/rules']);
    expect(status.view().loads).toEqual({ ok: 1, failed: 2 });
  });
});
