/**
 * The console's time series: every `intervalMs` (5 s by default) a timer copies the service
 * counters the metrics already keep (`Metrics.service`) and the store's key count into a ring
 * that holds the last 15 minutes. Nothing runs per call: the request path only adds to the plain
 * numbers it always added to.
 */
import type { Clock } from '../clock.js';
import type { ServiceCounters } from '../metrics/metrics.js';

/** Default time between two samples, ms. */
const SAMPLE_INTERVAL_MS = 5_000;
/** How far back the ring reaches, ms (15 minutes). */
const SAMPLE_SPAN_MS = 15 * 60_000;

/** One point of the series: rates over the interval that ends at `t`. */
export interface SamplePoint {
  /** End of the interval, epoch ms. */
  readonly t: number;
  /** Calls answered OK per second over the interval. */
  readonly okPerSecond: number;
  /** Calls answered OVER_LIMIT per second over the interval. */
  readonly overLimitPerSecond: number;
  /** Failed calls (invalid, store error, internal) per second over the interval. */
  readonly errorsPerSecond: number;
  /** Counters the store held at `t`. */
  readonly keys: number;
  /** Whether the store said it was healthy at `t`. */
  readonly storeHealthy: boolean;
}

/** Totals read at one instant. */
interface Totals {
  readonly t: number;
  readonly ok: number;
  readonly overLimit: number;
  readonly errors: number;
}

/** Options for {@link createSampler}. */
export interface SamplerOptions {
  /** The counters the service keeps (read, never written). */
  readonly counters: Readonly<ServiceCounters>;
  /** Number of counters the store holds. */
  readonly storeSize: () => number;
  /** Whether the store can answer. */
  readonly storeHealthy: () => boolean;
  /** Time source (epoch ms). */
  readonly clock: Clock;
  /** Time between samples, ms (default {@link SAMPLE_INTERVAL_MS}). */
  readonly intervalMs?: number;
}

/** The ring of samples. */
export interface Sampler {
  /** Time between samples, ms. */
  readonly intervalMs: number;
  /** Take one sample now (the timer calls it; tests may too). */
  sample(): void;
  /** The points held, oldest first, at most 15 minutes' worth. */
  points(): SamplePoint[];
  /**
   * The rates since the last sample (or since the start), so a reader sees calls/s between
   * two ticks; `undefined` right after a sample.
   */
  live(): SamplePoint | undefined;
  /** Stop the timer. */
  close(): void;
}

function totals(counters: Readonly<ServiceCounters>, t: number): Totals {
  return {
    t,
    ok: counters.callsOk,
    overLimit: counters.callsOverLimit,
    errors: counters.serviceErrors + counters.storeErrors + counters.internalErrors,
  };
}

/** Start sampling (the timer is unref'd: it never keeps the process alive). */
export function createSampler(options: SamplerOptions): Sampler {
  const { counters, clock } = options;
  const intervalMs = Math.max(1, options.intervalMs ?? SAMPLE_INTERVAL_MS);
  const capacity = Math.max(2, Math.ceil(SAMPLE_SPAN_MS / intervalMs));
  const ring: SamplePoint[] = [];
  let next = 0;
  let last = totals(counters, clock());

  const pointSince = (from: Totals, to: Totals): SamplePoint | undefined => {
    const seconds = (to.t - from.t) / 1000;
    if (seconds <= 0) return undefined;
    return {
      t: to.t,
      okPerSecond: (to.ok - from.ok) / seconds,
      overLimitPerSecond: (to.overLimit - from.overLimit) / seconds,
      errorsPerSecond: (to.errors - from.errors) / seconds,
      keys: options.storeSize(),
      storeHealthy: options.storeHealthy(),
    };
  };

  const sample = (): void => {
    const now = totals(counters, clock());
    const point = pointSince(last, now);
    if (point === undefined) return;
    last = now;
    if (ring.length < capacity) ring.push(point);
    else ring[next] = point;
    next = (next + 1) % capacity;
  };

  const timer = setInterval(sample, intervalMs);
  timer.unref();

  return {
    intervalMs,
    sample,
    points() {
      return ring.length < capacity ? [...ring] : [...ring.slice(next), ...ring.slice(0, next)];
    },
    live() {
      return pointSince(last, totals(counters, clock()));
    },
    close() {
      clearInterval(timer);
    },
  };
}
