/**
 * The metrics' cardinality cap (Metrics.requestStatsFor) and a /metrics that never fails
 * (issue 22, item 3).
 */
import { Counter } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_SERIES,
  DEFAULT_MAX_SERIES_PER_RULE,
  MAX_OVERFLOW_SERIES,
  MAX_REQUEST_STATS_KEY_LENGTH,
  createMetrics,
} from '../../../src/metrics/metrics.js';

const options = { nearLimitRatio: 0.8, processMetrics: false } as const;

describe('requestStatsFor', () => {
  it('defaults: 1000 series per rule, 10000 in all', () => {
    expect(DEFAULT_MAX_SERIES_PER_RULE).toBe(1_000);
    expect(DEFAULT_MAX_SERIES).toBe(10_000);
    const m = createMetrics(options);
    for (let i = 0; i < 1_000; i++)
      expect(m.requestStatsFor(`d.a_${i}`, 'd.a').key).toBe(`d.a_${i}`);
    const over = m.requestStatsFor('d.a_x', 'd.a');
    expect(over.key).toBe('d.a.__overflow__');
    expect(over.labels).toEqual({ domain: 'd', key1: 'a', key2: '__overflow__' });
    for (let r = 0; r < 9; r++) {
      for (let i = 0; i < 1_000; i++) m.requestStatsFor(`d.r${r}_${i}`, `d.r${r}`);
    }
    // 10,000 in all now: a new rule gets none.
    expect(m.requestStatsFor('d.new_1', 'd.new').key).toBe('d.new.__overflow__');
  });

  it('returns the same stats for a known key, shares it with statsFor, counts drops', async () => {
    const m = createMetrics({ ...options, maxSeriesPerRule: 1, maxSeries: 10 });
    const a = m.requestStatsFor('d.k_1', 'd.k');
    expect(m.requestStatsFor('d.k_1', 'd.k')).toBe(a);
    expect(m.statsFor('d.k_1')).toBe(a);
    const b = m.requestStatsFor('d.k_2', 'd.k');
    expect(m.requestStatsFor('d.k_3', 'd.k')).toBe(b);
    b.totalHits += 2;
    a.totalHits += 1;
    const text = await m.render();
    expect(text).toContain('sluice_metric_series_dropped_total 2\n');
    expect(text).toContain(
      'ratelimit_service_rate_limit_total_hits{domain="d",key1="k",key2="__overflow__"} 2\n',
    );
    expect(text).toContain('ratelimit_service_rate_limit_total_hits{domain="d",key1="k_1"} 1\n');
  });

  it('a key longer than the bound, or a zero cap, goes to the overflow series', () => {
    const m = createMetrics({ ...options, maxSeriesPerRule: 5, maxSeries: 5 });
    const long = `d.k_${'v'.repeat(MAX_REQUEST_STATS_KEY_LENGTH)}`;
    expect(m.requestStatsFor(long, 'd.k').key).toBe('d.k.__overflow__');
    const exact = `d.k_${'v'.repeat(MAX_REQUEST_STATS_KEY_LENGTH - 4)}`;
    expect(exact).toHaveLength(MAX_REQUEST_STATS_KEY_LENGTH);
    expect(m.requestStatsFor(exact, 'd.k').key).toBe(exact);
    const none = createMetrics({ ...options, maxSeriesPerRule: 0 });
    expect(none.requestStatsFor('d.k_1', 'd.k').key).toBe('d.k.__overflow__');
    const noneAtAll = createMetrics({ ...options, maxSeries: 0 });
    expect(noneAtAll.requestStatsFor('d.k_1', 'd.k').key).toBe('d.k.__overflow__');
    expect(noneAtAll.requestStatsFor('nodots', 'nodots').labels).toEqual({
      domain: 'nodots',
      key1: '',
      key2: '__overflow__',
    });
  });

  it('overflow series are bounded too: past the bound, or for a long rule key, one shared', () => {
    const m = createMetrics({ ...options, maxSeriesPerRule: 0 });
    for (let i = 0; i < MAX_OVERFLOW_SERIES; i++) {
      expect(m.requestStatsFor(`d.k${i}_v`, `d.k${i}`).key).toBe(`d.k${i}.__overflow__`);
    }
    // Known rule keys keep theirs.
    expect(m.requestStatsFor('d.k0_w', 'd.k0').key).toBe('d.k0.__overflow__');
    const shared = m.requestStatsFor('d.new_v', 'd.new');
    expect(shared.key).toBe('.__overflow__');
    expect(shared.labels).toEqual({ domain: '', key1: '', key2: '__overflow__' });
    const fresh = createMetrics({ ...options, maxSeriesPerRule: 0 });
    const longRule = `d.${'k'.repeat(MAX_REQUEST_STATS_KEY_LENGTH)}`;
    expect(fresh.requestStatsFor(`${longRule}_v`, longRule).key).toBe('.__overflow__');
    const edge = `d.${'k'.repeat(MAX_REQUEST_STATS_KEY_LENGTH - 2)}`;
    expect(fresh.requestStatsFor(`${edge}_v`, edge).key).toBe(`${edge}.__overflow__`);
  });
});

describe('render', () => {
  it('serves every metric that renders when one throws, and counts the failure', async () => {
    const m = createMetrics(options);
    m.statsFor('d.k').totalHits = 3;
    new Counter({
      name: 'broken_metric',
      help: 'throws',
      registers: [m.registry],
      collect() {
        throw new RangeError('Invalid string length');
      },
    });
    const first = await m.render();
    expect(first).not.toContain('broken_metric');
    expect(first).toContain('ratelimit_service_rate_limit_total_hits{domain="d",key1="k"} 3\n');
    expect(first.endsWith('\n')).toBe(true);
    const second = await m.render();
    expect(second).toContain('sluice_metric_render_errors_total 1\n');
  });

  it('renders exactly what the registry renders when nothing fails', async () => {
    const m = createMetrics(options);
    m.statsFor('d.k').withinLimit = 1;
    expect(await m.render()).toBe(await m.registry.metrics());
  });
});
