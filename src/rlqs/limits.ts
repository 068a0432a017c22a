/**
 * The quota service's bounds and timings (docs/rlqs.md, "Limits"): what one stream, the process
 * and one report may hold or cost, and the check of a report against them. `src/settings.ts`
 * sets some of them from `RLQS_*`.
 */
import { bucketKey } from './assignment.js';
import type { UsageReports } from './model.js';
import type { QuotaRefusal } from './quota-stream.js';
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

/**
 * A reason to refuse `reports` on a stream that holds the buckets keyed in `held`, while the
 * process holds `records` stream-bucket records; `undefined` when it is within `limits`.
 */
export function checkReport(
  limits: QuotaLimits,
  reports: UsageReports,
  held: ReadonlyMap<string, unknown>,
  records: number,
): [QuotaRefusal, string] | undefined {
  const { maxBucketEntries, maxValueLength, maxBucketsPerStream, maxBuckets } = limits;
  if (reports.domain === '') return ['invalid', 'RLQS report without a domain'];
  if (reports.domain.length > maxValueLength) {
    return ['invalid', `RLQS report domain longer than ${maxValueLength} characters`];
  }
  // Buckets new to the stream, each once (a report may name a bucket several times); the set
  // stops growing at the bound.
  const fresh = new Set<string>();
  const room = maxBucketsPerStream - held.size;
  for (const usage of reports.usages) {
    const id = usage.bucketId;
    if (id.length === 0) return ['invalid', 'RLQS report names a bucket with an empty id'];
    if (id.length > maxBucketEntries) {
      return ['invalid', `RLQS bucket id with more than ${maxBucketEntries} entries`];
    }
    for (const entry of id) {
      if (entry.key.length > maxValueLength || entry.value.length > maxValueLength) {
        return ['invalid', `RLQS bucket id key or value longer than ${maxValueLength} characters`];
      }
    }
    const key = bucketKey(reports.domain, id);
    if (!held.has(key)) fresh.add(key);
    if (fresh.size > room) {
      return [
        'exhausted',
        `RLQS stream reports more than ${maxBucketsPerStream} buckets (RLQS_MAX_BUCKETS_PER_STREAM)`,
      ];
    }
    if (records + fresh.size > maxBuckets) {
      return [
        'exhausted',
        `RLQS streams report ${maxBuckets} buckets in all (RLQS_MAX_BUCKETS); retry later`,
      ];
    }
  }
  return undefined;
}
