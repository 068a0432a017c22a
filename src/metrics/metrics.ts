/**
 * Prometheus metrics under envoyproxy/ratelimit's names (as its statsd-to-Prometheus mapping
 * exports them), plus Node process metrics. The hot path only adds to plain numbers
 * ({@link RuleStats}, {@link ServiceCounters}); prom-client collectors copy them at scrape time,
 * so counting costs a few additions per request. docs/operations-metrics.md lists every series.
 */
import { Registry, collectDefaultMetrics } from 'prom-client';
import { pacedRender, renderEach } from './render.js';
import {
  DEFAULT_MAX_SERIES,
  DEFAULT_MAX_SERIES_PER_RULE,
  RULE_SERIES,
  countsOf,
  createSeriesTable,
  isRuleSeries,
  registerRuleSeries,
  type MetricJson,
  type MetricsReport,
  type ReportRow,
  type RuleStats,
} from './rule-series.js';
import { plainCounter, plainGauge } from './plain-metrics.js';
import { createServiceMetrics, type ServiceCounters } from './service-metrics.js';
import { newRlqsCounters, registerRlqsMetrics, type RlqsCounters } from './rlqs-metrics.js';
import { createStoreMetrics, type StoreMetricsSink } from './store-metrics.js';
import { createTlsMetrics, type TlsMetricsSink } from './tls-metrics.js';
import { createTracingMetrics, type TracingMetricsSink } from './tracing-metrics.js';
import { createTransportMetrics, type TransportMetricsSink } from './transport-metrics.js';

// The rest of sluice imports metrics from this module; each subsystem's sink lives in its own.
export {
  DEFAULT_MAX_SERIES,
  DEFAULT_MAX_SERIES_PER_RULE,
  MAX_OVERFLOW_SERIES,
  MAX_REQUEST_STATS_KEY_LENGTH,
  labelsOf,
  sanitizeStatName,
  type MetricsReport,
  type RuleStats,
} from './rule-series.js';
export type { ServiceCounters } from './service-metrics.js';
export type { RlqsCounters } from './rlqs-metrics.js';
export type { StoreMetricsSink } from './store-metrics.js';
export type { TlsMetricsSink } from './tls-metrics.js';
export type { TracingMetricsSink } from './tracing-metrics.js';
export type { RefusalReason, TransportMetricsSink } from './transport-metrics.js';

/** Options for {@link createMetrics}. */
export interface MetricsOptions {
  /** `NEAR_LIMIT_RATIO` (0..1). */
  readonly nearLimitRatio: number;
  /** Collect Node's process metrics (default true; tests turn it off for speed). */
  readonly processMetrics?: boolean;
  /** Number of counters the store holds now (read at scrape time). */
  readonly storeSize?: () => number;
  /**
   * Most per-request series one rule may have (`METRICS_MAX_SERIES_PER_RULE`); default
   * {@link DEFAULT_MAX_SERIES_PER_RULE}. See {@link Metrics.requestStatsFor}.
   */
  readonly maxSeriesPerRule?: number;
  /**
   * Most per-request series over all rules (`METRICS_MAX_SERIES`); default
   * {@link DEFAULT_MAX_SERIES}.
   */
  readonly maxSeries?: number;
  /** Also hands every latency to this (the statsd sink's timer samples); `undefined`: none. */
  readonly latencyTap?: { add(seconds: number): void } | undefined;
  /**
   * `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`: render the latency histogram (bounds and sum) in
   * ms under its usual name, as the reference does with the flag on.
   */
  readonly latencyInMilliseconds?: boolean;
  /** Bytes unfinished requests hold now (`MAX_REQUEST_BUFFER_BYTES`'s budget; scrape time). */
  readonly requestBufferBytes?: () => number;
  /** Number of domains the serving rules define (read at scrape time); 0 when unset. */
  readonly configDomains?: () => number;
  /** A monotonic time in ms, for pacing renders (default `performance.now`); tests pass theirs. */
  readonly now?: () => number;
}

/** The metrics of one sluice instance. */
export interface Metrics {
  /** The prom-client registry `/metrics` renders. */
  readonly registry: Registry;
  /** Service-wide counters. */
  readonly service: ServiceCounters;
  /** The sink stores report to. */
  readonly store: StoreMetricsSink;
  /** The sink the gRPC port's TLS reports to. */
  readonly tls: TlsMetricsSink;
  /** The sink the transports report refusals to (docs/operations.md, "Limits"). */
  readonly transport: TransportMetricsSink;
  /** The sink tracing reports dropped spans to (docs/operations-tracing.md). */
  readonly tracing: TracingMetricsSink;
  /** The Rate Limit Quota Service's counters and gauges (docs/rlqs.md). */
  readonly rlqs: RlqsCounters;
  /** `floor(float32(limit) x float32(ratio))`, the reference's near-limit threshold. */
  nearThreshold(limit: number): number;
  /**
   * The stats of one stats key, created on first use. For keys the config bounds (a rule's own
   * key); keys built from request values go through {@link requestStatsFor}.
   */
  statsFor(key: string): RuleStats;
  /**
   * The stats of a stats key built from request values (`detailed_metric`, `value_to_metric`, a
   * RateLimitOverride), of the rule known by `ruleKey` (its sanitised key without request
   * values). Cardinality is bounded (docs/operations-metrics.md, "Cardinality"): a new key gets
   * its own series only while the rule has fewer than `maxSeriesPerRule` of them, all rules
   * fewer than `maxSeries`, and the key is at most {@link MAX_REQUEST_STATS_KEY_LENGTH} long;
   * otherwise the hits go to the rule's overflow series and `sluice_metric_series_dropped_total`
   * counts the call. The cap lives here so every sink (Prometheus, statsd) shares it.
   */
  requestStatsFor(key: string, ruleKey: string): RuleStats;
  /** Every per-rule stats created so far (the statsd sink reads them at each flush). */
  rules(): IterableIterator<RuleStats>;
  /** Observe one ShouldRateLimit latency, in seconds. */
  observeLatency(seconds: number): void;
  /**
   * Every metric in the Prometheus text format. Never rejects: a metric that fails to render is
   * left out (and counted in `sluice_metric_render_errors_total`), the others are served.
   * Concurrent callers share one render, and a render starts at the earliest
   * four times the last one's duration after it ended, so scrapes, however
   * many, take a bounded share of the process (see {@link pacedRender}).
   */
  render(): Promise<string>;
  /** What a worker reports to the primary, which sums the workers (src/metrics/cluster.ts). */
  report(): Promise<MetricsReport>;
  /** The `Content-Type` of {@link render}'s output. */
  readonly contentType: string;
}

/** Every metric name sluice exports itself (process metrics come from prom-client's defaults). */
export const EXPORTED_METRIC_NAMES: readonly string[] = [
  ...RULE_SERIES.map(([suffix]) => `ratelimit_service_rate_limit_${suffix}`),
  'ratelimit_service_config_load_success',
  'ratelimit_service_config_load_error',
  'ratelimit_service_global_shadow_mode',
  'ratelimit_service_should_rate_limit_error',
  'ratelimit_service_total_requests',
  'ratelimit_service_response_time_seconds',
  'sluice_should_rate_limit_calls_total',
  'sluice_metric_series_dropped_total',
  'sluice_metric_render_errors_total',
  'sluice_store_evictions_total',
  'sluice_store_keys_not_stored_total',
  'sluice_store_errors_total',
  'sluice_store_local_cache_over_limit_total',
  'sluice_store_fallback_total',
  'sluice_store_keys',
  'sluice_config_domains',
  'sluice_tls_reloads_total',
  'sluice_tls_certificate_expiry_timestamp_seconds',
  'sluice_transport_refusals_total',
  'sluice_request_buffer_bytes',
  'sluice_tracing_spans_dropped_total',
  'sluice_rlqs_streams',
  'sluice_rlqs_buckets',
  'sluice_rlqs_reports_total',
  'sluice_rlqs_reported_requests_total',
  'sluice_rlqs_assignments_total',
  'sluice_rlqs_abandons_total',
  'sluice_rlqs_streams_refused_total',
  'sluice_rlqs_shares_computed_total',
];

/** Create the metrics (one registry per instance, so tests can run several apps). */
export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const ratio = Math.fround(options.nearLimitRatio);
  const maxSeriesPerRule = Math.max(
    0,
    Math.floor(options.maxSeriesPerRule ?? DEFAULT_MAX_SERIES_PER_RULE),
  );
  const maxSeries = Math.max(0, Math.floor(options.maxSeries ?? DEFAULT_MAX_SERIES));
  const table = createSeriesTable(maxSeriesPerRule, maxSeries);
  let renderErrors = 0;

  // Registered in the order /metrics lists them.
  registerRuleSeries(registry, () => table.rules());
  const service = createServiceMetrics(registry, options);
  plainCounter(
    registry,
    'sluice_metric_series_dropped_total',
    'Per-rule stats keys built from request values that got no series of their own (METRICS_MAX_SERIES_PER_RULE, METRICS_MAX_SERIES or key length reached); their hits are counted in the rule overflow series',
    () => table.dropped,
  );
  plainCounter(
    registry,
    'sluice_metric_render_errors_total',
    'Metrics left out of a /metrics answer because they failed to render',
    () => renderErrors,
  );
  const store = createStoreMetrics(registry, options.storeSize);
  plainGauge(
    registry,
    'sluice_config_domains',
    'Domains in the rate limit config serving now (0: every call is answered OK, nothing is limited)',
    options.configDomains,
  );
  const tls = createTlsMetrics(registry);
  const transport = createTransportMetrics(registry, options.requestBufferBytes);
  const tracing = createTracingMetrics(registry);
  const rlqs = newRlqsCounters();
  registerRlqsMetrics(registry, rlqs);

  return {
    registry,
    service: service.counters,
    transport,
    tracing,
    tls,
    store,
    rlqs,
    nearThreshold(limit) {
      return Math.floor(Math.fround(Math.fround(limit) * ratio));
    },
    statsFor: (key) => table.statsFor(key),
    requestStatsFor: (key, ruleKey) => table.requestStatsFor(key, ruleKey),
    rules: () => table.rules(),
    observeLatency: (seconds) => service.observeLatency(seconds),
    // registry.metrics() fails as a whole when one metric throws (e.g. a RangeError on an
    // enormous string): renderEach renders each on its own and serves what renders.
    render: pacedRender(
      () => renderEach(registry, () => renderErrors++),
      options.now ?? (() => performance.now()),
    ),
    async report() {
      const rules: ReportRow[] = [];
      for (const stats of table.rules()) {
        const counts = countsOf(stats);
        if (!counts.some((c) => c > 0)) continue;
        const [kind, ruleKey] = table.kindOf(stats);
        rules.push([stats.key, kind, ruleKey, ...counts] as ReportRow);
      }
      const other: MetricJson[] = [];
      for (const metric of registry.getMetricsAsArray()) {
        if (isRuleSeries(metric.name)) continue;
        try {
          const got = await registry.getSingleMetric(metric.name)?.get();
          if (got !== undefined) other.push(got);
        } catch {
          renderErrors++;
        }
      }
      return { rules, other };
    },
    contentType: registry.contentType,
  };
}
