/** The metrics module: label split and sanitising as the reference's mapping, near threshold, histogram. */
import { describe, expect, it } from 'vitest';
import { createMetrics, labelsOf, sanitizeStatName } from '../../../src/metrics/metrics.js';

describe('metrics', () => {
  it('splits stats keys into domain/key1/key2 as the statsd mapping does', () => {
    expect(labelsOf('edge.remote_address')).toEqual({ domain: 'edge', key1: 'remote_address' });
    expect(labelsOf('edge.a.b.c.d')).toEqual({ domain: 'edge', key1: 'a', key2: 'b' });
    expect(labelsOf('edge.path_/api.v1')).toEqual({
      domain: 'edge',
      key1: 'path_/api',
      key2: 'v1',
    });
  });

  it('sanitises like the reference: colons, pipes and IPv4 dots', () => {
    expect(sanitizeStatName('edge.ip_10.1.2.3')).toBe('edge.ip_10_1_2_3');
    expect(sanitizeStatName('edge.k_a:b|c')).toBe('edge.k_a_b_c');
    expect(sanitizeStatName('edge.v_1.2.3')).toBe('edge.v_1.2.3');
  });

  it("computes the near threshold in float32 as the reference's Go does", () => {
    const m = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    expect([10, 5, 3, 1, 100, 7].map((n) => m.nearThreshold(n))).toEqual([8, 4, 2, 0, 80, 5]);
    const ninety = createMetrics({ nearLimitRatio: 0.9, processMetrics: false });
    expect(ninety.nearThreshold(10)).toBe(9);
  });

  it('renders the latency histogram cumulatively with +Inf, sum and count', async () => {
    const m = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    m.observeLatency(0.0003);
    m.observeLatency(0.0005);
    m.observeLatency(3);
    const lines = (await m.render())
      .split('\n')
      .filter((l) => l.startsWith('ratelimit_service_response_time_seconds'));
    const value = (suffix: string): number =>
      Number(
        lines
          .find((l) => l.includes(suffix))!
          .split(' ')
          .at(-1),
      );
    expect(value('le="0.00025"')).toBe(0);
    expect(value('le="0.0005"')).toBe(2);
    expect(value('le="1"')).toBe(2);
    expect(value('le="+Inf"')).toBe(3);
    expect(value('_count')).toBe(3);
    expect(value('_sum')).toBeCloseTo(3.0008, 10);
  });
});
