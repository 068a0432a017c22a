/**
 * The quota service's bounds and timings (docs/rlqs.md, "Limits"): what one stream, the process
 * and one report may hold or cost. `src/settings.ts` sets some of them from `RLQS_*`.
 */
import { DEFAULT_RESERVE_FRACTION } from './shares.js';

/** Bounds and timings of the service (docs/rlqs.md, "Limits"). */
export interface QuotaLimits {
  /** Report streams open at once; one more is refused RESOURCE_EXHAUSTED. */
  readonly maxStreams: number;
  /** Distinct buckets one stream may report; a report past it ends the stream. */
  readonly maxBucketsPerStream: number;
  /**
   * Stream-bucket records of the whole process (about 1.3 KB each, docs/rlqs.md); a report that
   * would pass it ends its stream.
   */
  readonly maxBuckets: number;
  /** Entries in one bucket id. */
  readonly maxBucketEntries: number;
  /** Characters in one bucket id key or value, and in the domain. */
  readonly maxValueLength: number;
  /** Reports a stream's demand is averaged over, per bucket. */
  readonly reportsKept: number;
  /** Shortest assignment time to live, ms (the TTL is 4 report intervals, at least this). */
  readonly minTtlMs: number;
  /** Longest assignment time to live, ms. */
  readonly maxTtlMs: number;
  /** A stream that sends no report for this long is ended (DEADLINE_EXCEEDED); 0: never. */
  readonly idleStreamMs: number;
  /** Part of each limit set aside as the instances' floors (./shares.ts). */
  readonly reserveFraction: number;
  /**
   * Shortest time between two recomputations of one bucket's shares on reports, ms: reports in
   * between only record usage (the timer's pass catches up). A stream joining or leaving the
   * bucket does not wait for it.
   */
  readonly rebalanceMs: number;
  /**
   * Most shares (one per stream per bucket) one report, stream end or timer slice recomputes;
   * buckets past it wait for the timer's pass, and a stream new to one of them is sent a
   * standby share meanwhile.
   */
  readonly rebalanceBudget: number;
}

/** The defaults of {@link QuotaLimits}. */
export const DEFAULT_QUOTA_LIMITS: QuotaLimits = {
  maxStreams: 1_000,
  maxBucketsPerStream: 1_000,
  maxBuckets: 100_000,
  maxBucketEntries: 16,
  maxValueLength: 1_024,
  reportsKept: 3,
  minTtlMs: 10_000,
  maxTtlMs: 300_000,
  idleStreamMs: 600_000,
  reserveFraction: DEFAULT_RESERVE_FRACTION,
  rebalanceMs: 1_000,
  rebalanceBudget: 5_000,
};
