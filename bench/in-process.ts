/**
 * Row 1: in-process decision rate of `app.service.shouldRateLimit()` (validation, rule matching,
 * counter keys, the memory store, the response) with the real clock, one awaited call at a time,
 * next to the cheapest counter with the same shape: a function that bumps a plain
 * `Map<string, number>` entry per descriptor (keys precomputed) and returns a resolved promise.
 */
import type { RateLimitRequest } from '../src/model.js';
import type { Sluice } from './dist.js';
import { median, ratio, si, type Row } from './report.js';
import { DOMAIN, fourRequest, hotRequest, ipRequest, tightRequest } from './workloads.js';

/** Bounds of one measurement. */
export interface RateBounds {
  /** Warm-up per contender, ms. */
  readonly warmupMs: number;
  /** Length of one sample, ms. */
  readonly sampleMs: number;
  /** Most operations in one sample (or warm-up). */
  readonly maxOpsPerSample: number;
  /** Samples per contender, taken alternately; the median is reported. */
  readonly samples: number;
}

/** Distinct keys of row 1c. */
const MANY_KEYS = 100_000;

interface Workload {
  readonly id: string;
  readonly what: string;
  readonly requests: readonly RateLimitRequest[];
  /** The overall code every sluice answer must have. */
  readonly expect: 'OK' | 'OVER_LIMIT';
}

function workloads(): Workload[] {
  const many: RateLimitRequest[] = [];
  for (let i = 0; i < MANY_KEYS; i++) many.push(ipRequest(i));
  return [
    {
      id: '1a',
      what: 'in-process decisions/s: 1 descriptor, 1 hot key',
      requests: [hotRequest()],
      expect: 'OK',
    },
    {
      id: '1b',
      what: 'in-process decisions/s: 4 descriptors (5 entries), same keys',
      requests: [fourRequest(0)],
      expect: 'OK',
    },
    {
      id: '1c',
      what: `in-process decisions/s: 1 descriptor, ${si(MANY_KEYS)} keys round-robin`,
      requests: many,
      expect: 'OK',
    },
    {
      id: '1d',
      what: 'in-process decisions/s: 1 descriptor, 1 key over its limit',
      requests: [tightRequest()],
      expect: 'OVER_LIMIT',
    },
  ];
}

/**
 * Await `step(i)` for i = 0, 1, ... until `maxOps` calls or `maxMs` ms, whichever comes first;
 * resolves to calls per second.
 */
async function drive(
  step: (i: number) => Promise<unknown>,
  maxOps: number,
  maxMs: number,
): Promise<number> {
  const start = performance.now();
  let i = 0;
  while (i < maxOps) {
    await step(i);
    i++;
    if ((i & 1023) === 0 && performance.now() - start >= maxMs) break;
  }
  return i / ((performance.now() - start) / 1000);
}

/** The baseline: a fixed counter per key in a Map behind a promise-returning function. */
function createMapCounter(): (keys: readonly string[]) => Promise<unknown> {
  const counts = new Map<string, number>();
  const answer = { overallCode: 'OK' };
  return (keys) => {
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return Promise.resolve(answer);
  };
}

/** Measure every workload; one table row each. */
export async function benchInProcess(
  sluice: Sluice,
  rulesDir: string,
  bounds: RateBounds,
): Promise<Row[]> {
  const rows: Row[] = [];
  for (const w of workloads()) {
    // A fresh app per workload, so one workload's counters do not weigh on the next.
    const settings = sluice.settings.loadSettings({ USE_STATSD: 'false' }, { config: [rulesDir] });
    const app = await sluice.app.createApp({
      settings,
      logger: sluice.logger.silentLogger(),
      watch: false,
    });
    try {
      const { requests } = w;
      const n = requests.length;
      const keys = requests.map((r) =>
        r.descriptors.map(
          (d) => `${DOMAIN}|${d.entries.map((e) => `${e.key}=${e.value}`).join('|')}`,
        ),
      );
      const service = app.service;
      const counter = createMapCounter();
      const runSluice = (i: number): Promise<unknown> => service.shouldRateLimit(requests[i % n]!);
      const runBaseline = (i: number): Promise<unknown> => counter(keys[i % n]!);

      // The first request creates the counter (and, for 1d, uses up the limit).
      await service.shouldRateLimit(requests[0]!);
      const second = await service.shouldRateLimit(requests[0]!);
      if (second.overallCode !== w.expect) {
        throw new Error(`${w.id}: expected ${w.expect}, got ${second.overallCode}`);
      }

      await drive(runBaseline, bounds.maxOpsPerSample, bounds.warmupMs);
      await drive(runSluice, bounds.maxOpsPerSample, bounds.warmupMs);
      const sluiceRates: number[] = [];
      const baselineRates: number[] = [];
      for (let s = 0; s < bounds.samples; s++) {
        baselineRates.push(await drive(runBaseline, bounds.maxOpsPerSample, bounds.sampleMs));
        sluiceRates.push(await drive(runSluice, bounds.maxOpsPerSample, bounds.sampleMs));
      }
      const last = await service.shouldRateLimit(requests[n - 1]!);
      if (last.overallCode !== w.expect) {
        throw new Error(`${w.id}: expected ${w.expect} after the run, got ${last.overallCode}`);
      }
      const sluiceRate = median(sluiceRates);
      const baselineRate = median(baselineRates);
      rows.push({
        id: w.id,
        what: w.what,
        sluice: `${si(sluiceRate)}/s`,
        baseline: `${si(baselineRate)}/s`,
        ratio: ratio(sluiceRate, baselineRate),
      });
    } finally {
      await app.close();
    }
  }
  return rows;
}
