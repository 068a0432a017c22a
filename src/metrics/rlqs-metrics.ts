/**
 * The Rate Limit Quota Service's metrics (docs/rlqs.md, "Metrics"): report streams and buckets
 * open now, reports and the usage Envoy reported, assignments and abandons sent, streams refused.
 * Kept as plain numbers the service updates, read at scrape time and by the statsd flush.
 */
import type { Registry } from 'prom-client';
import { labelledCounter, plainCounter, plainGauge } from './plain-metrics.js';

/** The RLQS counters and gauges (plain numbers). */
export interface RlqsCounters {
  /** Report streams open now (one per Envoy instance and filter config). */
  streams: number;
  /** Buckets the open streams report now (a bucket reported by two Envoys counts twice). */
  buckets: number;
  /** Report messages received. */
  reports: number;
  /** Requests Envoy reported as allowed. */
  requestsAllowed: number;
  /** Requests Envoy reported as denied. */
  requestsDenied: number;
  /** Quota assignments sent (one per bucket per response). */
  assignments: number;
  /** Abandon actions sent. */
  abandons: number;
  /** Streams ended by a limit (too many streams or buckets, a bad report, idle). */
  streamsRefused: number;
  /** Shares computed (one per stream per bucket rebalanced): the RLQS's main CPU cost. */
  sharesComputed: number;
}

/** Fresh counters, all zero. */
export function newRlqsCounters(): RlqsCounters {
  return {
    streams: 0,
    buckets: 0,
    reports: 0,
    requestsAllowed: 0,
    requestsDenied: 0,
    assignments: 0,
    abandons: 0,
    streamsRefused: 0,
    sharesComputed: 0,
  };
}

/** Register the RLQS metrics on `registry`, read from `counters`. */
export function registerRlqsMetrics(registry: Registry, counters: RlqsCounters): void {
  plainGauge(
    registry,
    'sluice_rlqs_streams',
    'Rate Limit Quota Service report streams open now (one per Envoy instance)',
    () => counters.streams,
  );
  plainGauge(
    registry,
    'sluice_rlqs_buckets',
    'Quota buckets the open RLQS streams report (per stream: two Envoys on one bucket count twice)',
    () => counters.buckets,
  );
  plainCounter(
    registry,
    'sluice_rlqs_reports_total',
    'RLQS usage report messages received',
    () => counters.reports,
  );
  labelledCounter(
    registry,
    'sluice_rlqs_reported_requests_total',
    'Requests Envoy reported on RLQS streams, by its verdict',
    'result',
    () => [
      ['allowed', counters.requestsAllowed],
      ['denied', counters.requestsDenied],
    ],
  );
  plainCounter(
    registry,
    'sluice_rlqs_assignments_total',
    'RLQS quota assignments sent (one per bucket per response)',
    () => counters.assignments,
  );
  plainCounter(
    registry,
    'sluice_rlqs_abandons_total',
    'RLQS abandon actions sent (buckets no longer reported)',
    () => counters.abandons,
  );
  plainCounter(
    registry,
    'sluice_rlqs_streams_refused_total',
    'RLQS streams ended by a limit: too many streams or buckets, an invalid report, no report in time',
    () => counters.streamsRefused,
  );
  plainCounter(
    registry,
    'sluice_rlqs_shares_computed_total',
    'RLQS shares computed (one per stream per bucket rebalanced): the work reports cost',
    () => counters.sharesComputed,
  );
}

/** The statsd names of the RLQS counters, with how each is read (counters only). */
export const RLQS_STATSD: readonly (readonly [string, (c: RlqsCounters) => number])[] = [
  ['sluice.rlqs.reports', (c) => c.reports],
  ['sluice.rlqs.requests_allowed', (c) => c.requestsAllowed],
  ['sluice.rlqs.requests_denied', (c) => c.requestsDenied],
  ['sluice.rlqs.assignments', (c) => c.assignments],
  ['sluice.rlqs.abandons', (c) => c.abandons],
  ['sluice.rlqs.streams_refused', (c) => c.streamsRefused],
  ['sluice.rlqs.shares_computed', (c) => c.sharesComputed],
];
