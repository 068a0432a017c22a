/**
 * The data behind docs/algorithms.svg (bench/algorithms-chart.ts) is what the algorithm modules
 * decide: each expectation below is derived by hand from the module's definition
 * (docs/semantics.md §4, docs/algorithms.md) for the chart's scenario: limit 10 per 10 s,
 * 30 requests at t = 0, then one every 500 ms up to t = 30 s, t = 0 being 5 s into an aligned window.
 */
import { describe, expect, it } from 'vitest';
import {
  admittedTimes,
  maxInAnyWindow,
  renderChart,
  SCENARIO,
  simulate,
} from '../../../bench/algorithms-chart.js';
import { ALGORITHMS } from '../../../src/algorithms/index.js';

/** `count` times from `from`, `step` ms apart. */
function run(from: number, count: number, step = 500): number[] {
  return Array.from({ length: count }, (_, i) => from + i * step);
}

const BURST = Array<number>(10).fill(0);

describe('algorithms chart data', () => {
  it('sliding_log: the burst frees its room exactly 10 s later, 10 at a time', async () => {
    // Hits at 0 count while now < 10 000; the 10 admitted from 10 000 count until 20 000.
    const admitted = admittedTimes(await simulate('sliding_log'));
    expect(admitted).toEqual([...BURST, ...run(10_000, 10), ...run(20_000, 10), 30_000]);
  });

  it('sliding_window: the burst sub-bucket expires one sub-bucket (500 ms) after 10 s', async () => {
    // Sub-buckets of 500 ms; bucket i expires at (i + 21) x 500: bucket 0 at 10 500, the bucket
    // of 10 500 (index 21) at 21 000.
    const admitted = admittedTimes(await simulate('sliding_window'));
    expect(admitted).toEqual([...BURST, ...run(10_500, 10), ...run(21_000, 10)]);
  });

  it('fixed_window: a full window again at each aligned boundary (5 s, 15 s, 25 s)', async () => {
    const admitted = admittedTimes(await simulate('fixed_window'));
    expect(admitted).toEqual([...BURST, ...run(5_000, 10), ...run(15_000, 10), ...run(25_000, 10)]);
    // Up to twice the limit in an interval of one window that straddles a boundary.
    expect(maxInAnyWindow(admitted, SCENARIO.windowMs)).toBe(20);
  });

  it('token_bucket: capacity 10 at once, then one token per second', async () => {
    const admitted = admittedTimes(await simulate('token_bucket'));
    expect(admitted).toEqual([...BURST, ...run(1_000, 30, 1_000)]);
  });

  it('the window algorithms never exceed the limit in any 10 s interval', async () => {
    for (const algorithm of ['sliding_window', 'sliding_log'] as const) {
      const admitted = admittedTimes(await simulate(algorithm));
      expect(maxInAnyWindow(admitted, SCENARIO.windowMs), algorithm).toBe(10);
    }
  });

  it('the SVG has one row per algorithm with its admitted count', async () => {
    const runs = [];
    for (const algorithm of ALGORITHMS)
      runs.push({ algorithm, requests: await simulate(algorithm) });
    const svg = renderChart(runs);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('30 of 90 admitted');
    expect(svg).toContain('31 of 90 admitted');
    for (const algorithm of ALGORITHMS) expect(svg).toContain(algorithm);
  });
});
