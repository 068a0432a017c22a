/**
 * The soak's verdict (bench/soak.ts `judge`): memory growth after warm-up, p99 drift and errors
 * each fail it on their own, and GC-like oscillation around a flat level does not.
 */
import { describe, expect, it } from 'vitest';
import {
  GROWTH_LIMIT,
  judge,
  renderSoakChart,
  summaryTable,
  type SoakSample,
} from '../../../bench/soak.js';

const NO_ERRORS: SoakSample['errorsBy'] = {
  h2load: 0,
  churnSkipped: 0,
  churnTimedOut: 0,
  churnNoStatus: 0,
  churnBadStatus: 0,
  server: 0,
};

/** 30 minutes of 10 s samples, flat unless `change` says otherwise. */
function samples(change: (minute: number, i: number) => Partial<SoakSample> = () => ({})) {
  return Array.from({ length: 180 }, (_, i): SoakSample => {
    const minute = (i + 1) / 6;
    return {
      minute,
      rssMb: 200,
      heapMb: 50 + 10 * Math.sin(i),
      p50Ms: 1,
      p99Ms: 5,
      offered: 1000,
      achieved: 1000,
      churnPerSec: 200,
      errors: 0,
      errorsBy: { ...NO_ERRORS },
      keys: 100_000,
      evictions: 5_000,
      cpuPct: 60,
      load1: 1,
      ...change(minute, i),
    };
  });
}

describe('soak verdict', () => {
  it('passes a flat run whose heap oscillates like GC', () => {
    const verdict = judge(samples(), 10);
    expect(verdict.pass).toBe(true);
    expect(verdict.lines[0]).toBe('verdict: PASS');
  });

  it('fails heap growth above the limit after warm-up, and ignores growth during warm-up', () => {
    // 0.5 MB/min over 20 min on a mean of about 60 MB is about 17%.
    expect(
      judge(
        samples((m) => ({ heapMb: 50 + m * 0.5 })),
        10,
      ).pass,
    ).toBe(false);
    // The same growth only in the first 10 minutes, flat after: passes.
    expect(
      judge(
        samples((m) => ({ heapMb: 50 + Math.min(m, 10) * 0.5 })),
        10,
      ).pass,
    ).toBe(true);
  });

  it('fails RSS growth just above the limit and passes just below it', () => {
    const span = 30 - 10 - 1 / 6;
    const rss = (share: number) => (m: number) => {
      // Linear growth whose total over the window is `share` of the window's mean.
      const slope = (share * 200) / span;
      return { rssMb: 200 + slope * (m - 20) };
    };
    expect(judge(samples(rss(GROWTH_LIMIT * 1.1)), 10).pass).toBe(false);
    expect(judge(samples(rss(GROWTH_LIMIT * 0.9)), 10).pass).toBe(true);
  });

  it('fails when p99 doubles in the second half, and on any error', () => {
    expect(
      judge(
        samples((m) => ({ p99Ms: m > 20 ? 11 : 5 })),
        10,
      ).pass,
    ).toBe(false);
    expect(
      judge(
        samples((m) => ({ p99Ms: m > 20 ? 9 : 5 })),
        10,
      ).pass,
    ).toBe(true);
    const failing = judge(
      samples((_, i) =>
        i === 3 ? { errors: 3, errorsBy: { ...NO_ERRORS, h2load: 1, churnTimedOut: 2 } } : {},
      ),
      10,
    );
    expect(failing.pass).toBe(false);
    expect(failing.lines).toContain(
      'FAIL errors: 3 failed calls over the whole run (h2load 1, churnTimedOut 2; 3 at minute 0.7)',
    );
    // Sends the churn client skipped are a shortfall, not failed calls: reported, not judged.
    const behind = judge(
      samples((_, i) => (i === 3 ? { errorsBy: { ...NO_ERRORS, churnSkipped: 40 } } : {})),
      10,
    );
    expect(behind.pass).toBe(true);
    expect(behind.lines.join('\n')).toMatch(
      /churn sends skipped .*: 40 of about .*, in 1 of 180 slices/,
    );
  });

  it('refuses to judge a run with too few samples after warm-up', () => {
    const verdict = judge(samples().slice(0, 62), 10);
    expect(verdict.pass).toBe(false);
    expect(verdict.lines[0]).toMatch(/run longer/);
  });

  it('summarises every 5 minutes and draws the three panels', () => {
    const all = samples();
    const table = summaryTable(all).split('\n');
    // Header, rule, minutes 0 (the first sample), 5, 10, 15, 20, 25, 30.
    expect(table).toHaveLength(2 + 7);
    const svg = renderSoakChart({
      date: '2026-11-23T18:00:00.000Z',
      machine: [],
      options: {
        minutes: 30,
        fraction: 0.8,
        sliceSeconds: 10,
        maxSeconds: 10,
        rate: undefined,
        churnRps: 200,
        maxKeys: 100_000,
        warmupMinutes: 10,
      },
      maxCallsPerSec: 1250,
      maxFailed: 0,
      samples: all,
      verdict: judge(all, 10),
    });
    expect(svg.match(/<polyline /g)).toHaveLength(7);
    expect(svg).toContain('memory, MB');
    expect(svg).toContain('latency, ms');
    expect(svg).toContain('calls/s');
  });
});
