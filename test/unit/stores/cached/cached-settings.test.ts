/**
 * Cached mode's settings (`REDIS_MODE`, `REDIS_SYNC_INTERVAL`) and what it refuses in the rules
 * (docs/cached-mode.md): algorithms it cannot count are refused at start and at every rule load,
 * with a message naming the rule, the algorithm and the setting.
 */
import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../../src/config/snapshot.js';
import { ConfigError } from '../../../../src/errors.js';
import { loadCheckSettings, loadSettings } from '../../../../src/settings.js';
import { settingsProblems } from '../../../helpers/settings.js';

const REDIS = { BACKEND_TYPE: 'redis', REDIS_URL: 'localhost:6379' };

describe('REDIS_MODE and REDIS_SYNC_INTERVAL', () => {
  it('default to exact and 100ms', () => {
    const settings = loadSettings(REDIS);
    expect(settings.redis).toMatchObject({ mode: 'exact', syncIntervalMs: 100 });
    expect(settings.algorithmRefusal).toBeUndefined();
  });

  it('read cached mode and its interval, and refuse the algorithms it cannot count', () => {
    const settings = loadSettings({ ...REDIS, REDIS_MODE: 'Cached', REDIS_SYNC_INTERVAL: '250ms' });
    expect(settings.redis).toMatchObject({ mode: 'cached', syncIntervalMs: 250 });
    expect(settings.algorithmRefusal?.algorithms).toEqual(['token_bucket', 'sliding_log']);
  });

  it('refuse cached mode without the Redis store, saying what to set', () => {
    expect(settingsProblems({ REDIS_MODE: 'cached' })).toBe(
      'invalid settings:\n  - REDIS_MODE=cached: needs BACKEND_TYPE=redis (cached mode syncs local counters with Redis); set BACKEND_TYPE=redis and REDIS_URL, or remove REDIS_MODE',
    );
  });

  it('refuse an unknown mode and an interval out of bounds, whatever the backend', () => {
    expect(settingsProblems({ REDIS_MODE: 'lazy' })).toContain(
      'REDIS_MODE="lazy": expected exact or cached',
    );
    for (const interval of ['5ms', '2m', 'soon', '0']) {
      expect(settingsProblems({ ...REDIS, REDIS_SYNC_INTERVAL: interval })).toContain(
        `REDIS_SYNC_INTERVAL=${JSON.stringify(interval)}: expected a duration from 10ms to 1m`,
      );
    }
  });

  it('`sluice check` refuses what the server would with REDIS_MODE=cached, and only then', () => {
    expect(loadCheckSettings({ REDIS_MODE: 'cached' }).algorithmRefusal).toEqual(
      loadSettings({ ...REDIS, REDIS_MODE: 'cached' }).algorithmRefusal,
    );
    expect(loadCheckSettings({}).algorithmRefusal).toBeUndefined();
  });

  it('refuse a DEFAULT_ALGORITHM cached mode cannot count', () => {
    expect(
      settingsProblems({ ...REDIS, REDIS_MODE: 'cached', DEFAULT_ALGORITHM: 'token_bucket' }),
    ).toContain('DEFAULT_ALGORITHM=token_bucket: REDIS_MODE=cached cannot count it');
  });
});

describe('rules in cached mode', () => {
  const refusal = loadSettings({ ...REDIS, REDIS_MODE: 'cached' }).algorithmRefusal;
  const rules = (algorithm: string): string =>
    [
      'domain: d',
      'descriptors:',
      '  - key: k',
      `    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: ${algorithm}}`,
      '  - key: ok',
      '    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: fixed_window}',
    ].join('\n');

  it('refuse a limit of an algorithm cached mode cannot count, naming rule, algorithm and setting', () => {
    for (const algorithm of ['token_bucket', 'sliding_log']) {
      let error: unknown;
      try {
        buildSnapshot([{ name: 'rules.yaml', content: rules(algorithm) }], {
          algorithmRefusal: refusal,
        });
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConfigError);
      const problem = (error as ConfigError).problems[0]!;
      expect(problem.path).toBe('descriptors[0].rate_limit.algorithm');
      expect(problem.message).toBe(
        `algorithm ${algorithm} cannot be counted with REDIS_MODE=cached: a periodically synced count cannot keep its exactness (see docs/cached-mode.md); set algorithm: sliding_window or fixed_window, or set REDIS_MODE=exact (line 4, column 54)`,
      );
      expect((error as ConfigError).problems).toHaveLength(1);
    }
  });

  it('accept the window algorithms, and accept everything in exact mode', () => {
    for (const algorithm of ['sliding_window', 'fixed_window']) {
      expect(
        buildSnapshot([{ name: 'r.yaml', content: rules(algorithm) }], {
          algorithmRefusal: refusal,
        }).domains.size,
      ).toBe(1);
    }
    expect(buildSnapshot([{ name: 'r.yaml', content: rules('token_bucket') }]).domains.size).toBe(
      1,
    );
  });

  it('refuse a limit that takes a refused default algorithm', () => {
    const content =
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n';
    expect(() =>
      buildSnapshot([{ name: 'r.yaml', content }], {
        algorithmRefusal: refusal,
        defaultAlgorithm: 'token_bucket',
      }),
    ).toThrow(
      /algorithm token_bucket \(the default algorithm, DEFAULT_ALGORITHM\) cannot be counted/,
    );
  });
});
