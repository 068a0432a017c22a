/**
 * Prometheus metrics under envoyproxy/ratelimit's names (as its statsd-to-Prometheus mapping
 * exports them), plus Node process metrics. The hot path only adds to plain numbers
 * ({@link RuleStats}, {@link ServiceCounters}); prom-client collectors copy them at scrape time,
 * so counting costs a few additions per request. docs/operations-metrics.md lists every series.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { pacedRender, renderEach } from './render.js';

/** The per-rule counters of the reference (`ratelimit.service.rate_limit.<key>.<stat>`). */
export interface RuleStats {
  /**
   * The reference's stats key, e.g. `edge.path_/login.remote_address` (sanitised); for a rule's
   * overflow series (see {@link Metrics.requestStatsFor}), the rule's key then `.__overflow__`.
   */
  readonly key: string;
  /** The Prometheus labels of the series (`labelsOf(key)`, or the overflow series' labels). */
  readonly labels: RuleLabels;
  /** Hits asked for by requests that reached this rule. */
  totalHits: number;
  /** Hits over the limit (every hit of an over-limit descriptor; see docs). */
  overLimit: number;
  /** Hits between `floor(limit x NEAR_LIMIT_RATIO)` and the limit. */
  nearLimit: number;
  /** Hits within the limit. */
  withinLimit: number;
  /** Over-limit hits of a `shadow_mode` rule (allowed anyway). */
  shadowMode: number;
  /** Over-limit hits answered from the Redis store's local cache. */
  overLimitWithLocalCache: number;
}

/** Service-wide counters (plain numbers, read at scrape time). */
export interface ServiceCounters {
  /** Config loads and reloads that succeeded (`config_load_success`). */
  configLoadSuccess: number;
  /** Config loads and reloads that failed validation (`config_load_error`). */
  configLoadError: number;
  /** Requests that were over limit but answered OK because of `SHADOW_MODE`. */
  globalShadowMode: number;
  /** ShouldRateLimit calls answered OK. */
  callsOk: number;
  /** ShouldRateLimit calls answered OVER_LIMIT. */
  callsOverLimit: number;
  /** ShouldRateLimit calls rejected as invalid (the reference's `service_error`). */
  serviceErrors: number;
  /** ShouldRateLimit calls that failed in the store (the reference's `redis_error`). */
  storeErrors: number;
  /** ShouldRateLimit calls that failed otherwise. */
  internalErrors: number;
}

/**
 * What a counter store reports (passed to the store by the composition root). Every method adds
 * to a plain number; none may throw.
 */
export interface StoreMetricsSink {
  /** `count` counters dropped, because they had expired (`expired`) or by the key cap (`lru`). */
  evicted(reason: 'expired' | 'lru', count: number): void;
  /**
   * `count` new counters decided but not stored, because the memory store was full of counters
   * that are limiting someone (`MEMORY_MAX_KEYS` reached; docs/operations.md, "Memory store").
   */
  notStored?(count: number): void;
  /** One failed store operation; `kind` is a short, bounded word (`timeout`, `connection`, ...). */
  storeError(kind: string): void;
  /** `count` counters answered over limit from the local cache without asking the store. */
  localCacheOverLimit(count: number): void;
  /** Whether a fallback policy answered instead of the store (`allow`, `memory`, `error`). */
  fallback(policy: string): void;
}

/** What the gRPC port's TLS reports (docs/operations-tls.md). None of the methods may throw. */
export interface TlsMetricsSink {
  /** A changed set of TLS files was `applied`, or `refused` (counted once per broken content). */
  reload(result: 'applied' | 'refused'): void;
  /** The certificate serving new connections now: its serial and end of validity (epoch ms). */
  serving(serialNumber: string, notAfterMs: number): void;
}

/** Why finished spans were not exported (`sluice_tracing_spans_dropped_total{reason}`). */
export type SpanDropReason =
  /** The export queue held its most spans (exports slower than spans end, or hanging). */
  | 'queue_full'
  /** The collector refused their export, or did not answer in time. */
  | 'export_failed';

/** What tracing reports (docs/operations-tracing.md). None of the methods may throw. */
export interface TracingMetricsSink {
  /** `count` finished, sampled spans were dropped for `reason`. */
  spansDropped(reason: SpanDropReason, count: number): void;
}

/** Why a connection, call or request was refused (`sluice_transport_refusals_total{reason}`). */
export type RefusalReason =
  /** `GRPC_MAX_CONNECTIONS` connections were open: a new one was closed at accept. */
  | 'connections'
  /** The connection's unfinished requests held `GRPC_MAX_CONNECTION_BUFFER_BYTES`. */
  | 'connection_buffer'
  /** Unfinished requests of both ports held `MAX_REQUEST_BUFFER_BYTES`. */
  | 'total_buffer'
  /** A gRPC request did not arrive whole within `GRPC_REQUEST_TIMEOUT`. */
  | 'request_timeout'
  /** A `/json` body was larger than `GRPC_MAX_RECEIVE_MESSAGE_LENGTH`. */
  | 'json_body_size'
  /** A request on the HTTP port did not arrive whole within `HTTP_REQUEST_TIMEOUT`. */
  | 'http_timeout';

/** Every {@link RefusalReason}, in the order `/metrics` lists them. */
const REFUSAL_REASONS: readonly RefusalReason[] = [
  'connections',
  'connection_buffer',
  'total_buffer',
  'request_timeout',
  'json_body_size',
  'http_timeout',
];

/** Where the transports report refusals and what they hold. None of the methods may throw. */
export interface TransportMetricsSink {
  /** One connection, call or request refused for `reason`. */
  refused(reason: RefusalReason): void;
}

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

/** Default of `METRICS_MAX_SERIES_PER_RULE`. */
export const DEFAULT_MAX_SERIES_PER_RULE = 1_000;

/** Default of `METRICS_MAX_SERIES`. */
export const DEFAULT_MAX_SERIES = 10_000;

/**
 * Longest per-request stats key given its own series, in characters; a longer one is counted in
 * its rule's overflow series (a label that long is no use on a dashboard, and it would make the
 * output large: MAX_ENTRY_LENGTH allows 4096-character values).
 */
export const MAX_REQUEST_STATS_KEY_LENGTH = 256;

/**
 * Most overflow series (one per rule key); past it, and for rule keys longer than
 * {@link MAX_REQUEST_STATS_KEY_LENGTH}, every dropped key counts in one shared overflow series
 * with empty `domain` and `key1`.
 */
export const MAX_OVERFLOW_SERIES = 1_000;

/** The last stats key part and `key2` label of a rule's overflow series. */
const OVERFLOW_LABEL = '__overflow__';

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

/** Per-rule series name suffixes, in the reference's order, with the field each reads. */
const RULE_SERIES = [
  ['total_hits', 'totalHits'],
  ['over_limit', 'overLimit'],
  ['near_limit', 'nearLimit'],
  ['within_limit', 'withinLimit'],
  ['shadow_mode', 'shadowMode'],
  ['over_limit_with_local_cache', 'overLimitWithLocalCache'],
] as const;

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
];

/** The labels of a stats key as the reference's default Prometheus mapping derives them. */
export type RuleLabels = Record<string, string>;

/**
 * Split a stats key the way the reference's statsd_exporter mapping does: two dot-separated parts
 * give `domain` and `key1`; three or more give `domain`, `key1` and `key2` (the rest is dropped).
 */
export function labelsOf(key: string): RuleLabels {
  const parts = key.split('.');
  if (parts.length <= 2) return { domain: parts[0]!, key1: parts[1] ?? '' };
  return { domain: parts[0]!, key1: parts[1]!, key2: parts[2]! };
}

const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g;

/** The reference's stat name sanitising: `:` and `|` become `_`, dots inside IPv4 addresses too. */
export function sanitizeStatName(name: string): string {
  return name.replace(/[:|]/g, '_').replace(IPV4, (ip) => ip.replaceAll('.', '_'));
}

/** Upper bounds of the latency histogram's buckets, seconds. */
const LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
];

/**
 * A histogram prom-client renders from plain numbers: `read()` gives per-bucket counts (not
 * cumulative; the last slot is above every bound) and the sum.
 */
function plainHistogram(
  name: string,
  help: string,
  labels: Record<string, string>,
  bounds: readonly number[],
  read: () => { counts: Float64Array; sum: number },
): Metric {
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get() {
      const { counts, sum } = read();
      const values: {
        labels: Record<string, string | number>;
        value: number;
        metricName: string;
      }[] = [];
      let cumulative = 0;
      for (let i = 0; i < bounds.length; i++) {
        cumulative += counts[i]!;
        values.push({
          labels: { ...labels, le: bounds[i]! },
          value: cumulative,
          metricName: `${name}_bucket`,
        });
      }
      cumulative += counts[bounds.length]!;
      values.push({
        labels: { ...labels, le: '+Inf' },
        value: cumulative,
        metricName: `${name}_bucket`,
      });
      values.push({ labels, value: sum, metricName: `${name}_sum` });
      values.push({ labels, value: cumulative, metricName: `${name}_count` });
      return Promise.resolve({ name, help, type: 'histogram', aggregator: 'sum', values });
    },
    reset() {},
  };
  // prom-client renders any registered object with `name` and `get()`; its Metric type is a
  // class union, hence the cast.
  return metric as unknown as Metric;
}

/** Fresh, zero stats for `key` with `labels`. */
function newStats(key: string, labels: RuleLabels): RuleStats {
  return {
    key,
    labels,
    totalHits: 0,
    overLimit: 0,
    nearLimit: 0,
    withinLimit: 0,
    shadowMode: 0,
    overLimitWithLocalCache: 0,
  };
}

/** Create the metrics (one registry per instance, so tests can run several apps). */
/** A metric as prom-client's `getMetricsAsJSON` gives it (and `AggregatorRegistry` sums). */
export type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

/** What a stats key is: a rule's own, built from request values, or a rule's overflow. */
export type SeriesKind = 'rule' | 'request' | 'overflow';

/**
 * One per-rule series in a {@link MetricsReport}: its key, kind, the rule key (request and
 * overflow series; `''` otherwise) and the counts in the order of {@link countsOf}.
 */
export type ReportRow = [
  key: string,
  kind: SeriesKind,
  ruleKey: string,
  totalHits: number,
  overLimit: number,
  nearLimit: number,
  withinLimit: number,
  shadowMode: number,
  overLimitWithLocalCache: number,
];

/** A worker's metrics, as it sends them to the primary (plain data, sent over IPC). */
export interface MetricsReport {
  /** Every per-rule series with a count, so the primary can cap them for the whole service. */
  readonly rules: ReportRow[];
  /** Every other metric, as prom-client's JSON. */
  readonly other: MetricJson[];
}

/** Per-rule stats, with the cardinality cap of request-built keys ({@link createSeriesTable}). */
export interface SeriesTable {
  /** See {@link Metrics.statsFor}. */
  statsFor(key: string): RuleStats;
  /** See {@link Metrics.requestStatsFor}. */
  requestStatsFor(key: string, ruleKey: string): RuleStats;
  /** The overflow series of `ruleKey` (or the shared one past {@link MAX_OVERFLOW_SERIES}). */
  overflowFor(ruleKey: string): RuleStats;
  /** Every stats created so far. */
  rules(): IterableIterator<RuleStats>;
  /** What `stats` is, and its rule key (`''` for a rule's own series). */
  kindOf(stats: RuleStats): [SeriesKind, string];
  /** Request-built keys that got no series of their own. */
  readonly dropped: number;
}

/**
 * The per-rule stats and their cap: a new request-built key gets its own series only while its
 * rule has fewer than `maxSeriesPerRule`, all rules fewer than `maxSeries`, and the key is at most
 * {@link MAX_REQUEST_STATS_KEY_LENGTH} long; otherwise its rule's overflow series. One decision
 * for both of its homes: each process's metrics, and the primary's sum over workers.
 */
export function createSeriesTable(maxSeriesPerRule: number, maxSeries: number): SeriesTable {
  const rules = new Map<string, RuleStats>();
  /** Per-request series created, per rule key. */
  const seriesPerRule = new Map<string, number>();
  /** Rule key of each request-built series. */
  const requestRule = new Map<string, string>();
  /** Overflow series, per rule key. */
  const overflows = new Map<string, RuleStats>();
  const overflowRule = new Map<RuleStats, string>();
  let requestSeries = 0;
  let dropped = 0;
  const overflowFor = (ruleKey: string): RuleStats => {
    // Override keys come from requests too: their overflow series are bounded as well, past
    // which everything shares one.
    const overflowKey =
      ruleKey.length <= MAX_REQUEST_STATS_KEY_LENGTH &&
      (overflows.size < MAX_OVERFLOW_SERIES || overflows.has(ruleKey))
        ? ruleKey
        : '';
    let overflow = overflows.get(overflowKey);
    if (overflow === undefined) {
      const at = overflowKey.indexOf('.');
      overflow = newStats(`${overflowKey}.${OVERFLOW_LABEL}`, {
        domain: at < 0 ? overflowKey : overflowKey.slice(0, at),
        key1: at < 0 ? '' : overflowKey.slice(at + 1),
        key2: OVERFLOW_LABEL,
      });
      overflows.set(overflowKey, overflow);
      overflowRule.set(overflow, overflowKey);
      // Rendered with the other series; its key cannot collide with a request's (the
      // request's would need a level named like the marker, and then it is that rule's).
      rules.set(overflow.key, overflow);
    }
    return overflow;
  };
  return {
    statsFor(key) {
      let stats = rules.get(key);
      if (stats === undefined) {
        stats = newStats(key, labelsOf(key));
        rules.set(key, stats);
      }
      return stats;
    },
    requestStatsFor(key, ruleKey) {
      const known = rules.get(key);
      if (known !== undefined) return known;
      const count = seriesPerRule.get(ruleKey) ?? 0;
      if (
        count < maxSeriesPerRule &&
        requestSeries < maxSeries &&
        key.length <= MAX_REQUEST_STATS_KEY_LENGTH
      ) {
        seriesPerRule.set(ruleKey, count + 1);
        requestSeries++;
        const stats = newStats(key, labelsOf(key));
        rules.set(key, stats);
        requestRule.set(key, ruleKey);
        return stats;
      }
      dropped++;
      return overflowFor(ruleKey);
    },
    overflowFor,
    rules() {
      return rules.values();
    },
    kindOf(stats) {
      const overflow = overflowRule.get(stats);
      if (overflow !== undefined) return ['overflow', overflow];
      const rule = requestRule.get(stats.key);
      return rule === undefined ? ['rule', ''] : ['request', rule];
    },
    get dropped() {
      return dropped;
    },
  };
}

/** Register the per-rule counters (the reference's names) on `registry`, read from `rules`. */
export function registerRuleSeries(registry: Registry, rules: () => Iterable<RuleStats>): void {
  for (const [suffix, field] of RULE_SERIES) {
    new Counter({
      name: `ratelimit_service_rate_limit_${suffix}`,
      help: `Per rule: ${suffix.replaceAll('_', ' ')} (the reference's ratelimit.service.rate_limit.<key>.${suffix})`,
      labelNames: ['domain', 'key1', 'key2'],
      registers: [registry],
      collect() {
        this.reset();
        // Like the reference, a series appears once it has counted something.
        for (const stats of rules()) {
          const value = stats[field];
          if (value > 0) this.inc(stats.labels, value);
        }
      },
    });
  }
}

const RULE_SERIES_NAMES = new Set(
  RULE_SERIES.map(([suffix]) => `ratelimit_service_rate_limit_${suffix}`),
);

/** Whether `name` is one of the per-rule series {@link registerRuleSeries} registers. */
function isRuleSeries(name: string): boolean {
  return RULE_SERIES_NAMES.has(name);
}

/** The counts of `stats`, in the order of the per-rule series. */
function countsOf(stats: RuleStats): number[] {
  return RULE_SERIES.map(([, field]) => stats[field]);
}

/** Add `counts` (in the order of {@link countsOf}) to `stats`. */
export function addCounts(stats: RuleStats, counts: readonly number[]): void {
  RULE_SERIES.forEach(([, field], i) => {
    stats[field] += counts[i] ?? 0;
  });
}

/** Set every count of `stats` to zero. */
export function zeroCounts(stats: RuleStats): void {
  for (const [, field] of RULE_SERIES) stats[field] = 0;
}

export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const ratio = Math.fround(options.nearLimitRatio);

  const service: ServiceCounters = {
    configLoadSuccess: 0,
    configLoadError: 0,
    globalShadowMode: 0,
    callsOk: 0,
    callsOverLimit: 0,
    serviceErrors: 0,
    storeErrors: 0,
    internalErrors: 0,
  };
  const evictions = { expired: 0, lru: 0 };
  let notStored = 0;
  const storeErrors = new Map<string, number>();
  const fallbacks = new Map<string, number>();
  let localCacheOverLimit = 0;
  const maxSeriesPerRule = Math.max(
    0,
    Math.floor(options.maxSeriesPerRule ?? DEFAULT_MAX_SERIES_PER_RULE),
  );
  const maxSeries = Math.max(0, Math.floor(options.maxSeries ?? DEFAULT_MAX_SERIES));
  const table = createSeriesTable(maxSeriesPerRule, maxSeries);
  let renderErrors = 0;

  registerRuleSeries(registry, () => table.rules());
  const plain = (name: string, help: string, read: () => number): void => {
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  };
  plain(
    'ratelimit_service_config_load_success',
    'Rate limit config loads and reloads that succeeded',
    () => service.configLoadSuccess,
  );
  plain(
    'ratelimit_service_config_load_error',
    'Rate limit config loads and reloads that failed (the previous config kept serving)',
    () => service.configLoadError,
  );
  plain(
    'ratelimit_service_global_shadow_mode',
    'Requests over limit answered OK because SHADOW_MODE is on',
    () => service.globalShadowMode,
  );
  new Counter({
    name: 'ratelimit_service_should_rate_limit_error',
    help: 'ShouldRateLimit calls that failed, by the reference err_type (service_error: invalid request; redis_error: the store failed)',
    labelNames: ['err_type'],
    registers: [registry],
    collect() {
      this.reset();
      if (service.serviceErrors > 0) this.inc({ err_type: 'service_error' }, service.serviceErrors);
      if (service.storeErrors > 0) this.inc({ err_type: 'redis_error' }, service.storeErrors);
    },
  });
  new Counter({
    name: 'ratelimit_service_total_requests',
    help: 'ShouldRateLimit calls, as the reference counts them per gRPC method',
    labelNames: ['grpc_method'],
    registers: [registry],
    collect() {
      this.reset();
      const total =
        service.callsOk +
        service.callsOverLimit +
        service.serviceErrors +
        service.storeErrors +
        service.internalErrors;
      this.inc({ grpc_method: 'ShouldRateLimit' }, total);
    },
  });
  // A histogram kept as plain numbers: prom-client's Histogram hashes its labels on every
  // observation, which measured as a third of an in-process decision.
  const latencyBuckets = LATENCY_BUCKETS_SECONDS;
  const latencyCounts = new Float64Array(latencyBuckets.length + 1);
  let latencySum = 0;
  const latencyScale = options.latencyInMilliseconds === true ? 1000 : 1;
  const latencyTap = options.latencyTap;
  registry.registerMetric(
    plainHistogram(
      'ratelimit_service_response_time_seconds',
      `ShouldRateLimit latency inside sluice (request to answer), ${latencyScale === 1 ? 'seconds' : 'milliseconds (PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS)'}`,
      { grpc_method: 'ShouldRateLimit' },
      latencyScale === 1 ? latencyBuckets : latencyBuckets.map((b) => b * latencyScale),
      () => ({ counts: latencyCounts, sum: latencySum * latencyScale }),
    ),
  );
  new Counter({
    name: 'sluice_should_rate_limit_calls_total',
    help: 'ShouldRateLimit calls by result: ok, over_limit, invalid, store_error, internal',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ result: 'ok' }, service.callsOk);
      this.inc({ result: 'over_limit' }, service.callsOverLimit);
      this.inc({ result: 'invalid' }, service.serviceErrors);
      this.inc({ result: 'store_error' }, service.storeErrors);
      this.inc({ result: 'internal' }, service.internalErrors);
    },
  });
  plain(
    'sluice_metric_series_dropped_total',
    'Per-rule stats keys built from request values that got no series of their own (METRICS_MAX_SERIES_PER_RULE, METRICS_MAX_SERIES or key length reached); their hits are counted in the rule overflow series',
    () => table.dropped,
  );
  plain(
    'sluice_metric_render_errors_total',
    'Metrics left out of a /metrics answer because they failed to render',
    () => renderErrors,
  );
  new Counter({
    name: 'sluice_store_evictions_total',
    help: 'Counters dropped by the store: expired (idle reclaim) or lru (MEMORY_MAX_KEYS reached)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ reason: 'expired' }, evictions.expired);
      this.inc({ reason: 'lru' }, evictions.lru);
    },
  });
  plain(
    'sluice_store_keys_not_stored_total',
    'New counters decided as fresh but not stored: MEMORY_MAX_KEYS reached and every counter examined was limiting someone',
    () => notStored,
  );
  new Counter({
    name: 'sluice_store_errors_total',
    help: 'Failed store operations by kind',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, count] of storeErrors) this.inc({ kind }, count);
    },
  });
  plain(
    'sluice_store_local_cache_over_limit_total',
    'Counters answered over limit from the local cache without a store round trip',
    () => localCacheOverLimit,
  );
  new Counter({
    name: 'sluice_store_fallback_total',
    help: 'Calls answered by the failure policy while the store was failing, by policy',
    labelNames: ['policy'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [policy, count] of fallbacks) this.inc({ policy }, count);
    },
  });
  const storeSize = options.storeSize;
  new Gauge({
    name: 'sluice_store_keys',
    help: 'Counters held by the store (may include expired ones not yet reclaimed)',
    registers: [registry],
    collect() {
      this.set(storeSize === undefined ? 0 : storeSize());
    },
  });

  const configDomains = options.configDomains;
  new Gauge({
    name: 'sluice_config_domains',
    help: 'Domains in the rate limit config serving now (0: every call is answered OK, nothing is limited)',
    registers: [registry],
    collect() {
      this.set(configDomains === undefined ? 0 : configDomains());
    },
  });

  const tlsReloads = { applied: 0, refused: 0 };
  let tlsServing: { serialNumber: string; notAfterMs: number } | undefined;
  new Counter({
    name: 'sluice_tls_reloads_total',
    help: 'Changed TLS files of the gRPC port: applied, or refused (the previous certificate kept serving)',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ result: 'applied' }, tlsReloads.applied);
      this.inc({ result: 'refused' }, tlsReloads.refused);
    },
  });
  new Gauge({
    name: 'sluice_tls_certificate_expiry_timestamp_seconds',
    help: 'End of validity (Unix seconds) of the gRPC port certificate serving new connections, by serial; absent without TLS',
    labelNames: ['serial'],
    registers: [registry],
    collect() {
      this.reset();
      if (tlsServing !== undefined) {
        this.set({ serial: tlsServing.serialNumber }, Math.floor(tlsServing.notAfterMs / 1000));
      }
    },
  });

  // ---- transport limits (issue 22): refusals by reason, bytes held by unfinished requests ----
  const refusals = new Map<RefusalReason, number>(REFUSAL_REASONS.map((r) => [r, 0]));
  new Counter({
    name: 'sluice_transport_refusals_total',
    help: 'Connections, calls and requests refused by a transport limit, by reason (docs/operations.md, Limits)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, count] of refusals) this.inc({ reason }, count);
    },
  });
  const requestBufferBytes = options.requestBufferBytes;
  new Gauge({
    name: 'sluice_request_buffer_bytes',
    help: 'Bytes held by unfinished requests of the gRPC port and /json (bounded by MAX_REQUEST_BUFFER_BYTES)',
    registers: [registry],
    collect() {
      this.set(requestBufferBytes === undefined ? 0 : requestBufferBytes());
    },
  });
  const transport: TransportMetricsSink = {
    refused(reason) {
      refusals.set(reason, (refusals.get(reason) ?? 0) + 1);
    },
  };
  // ---- end of transport limits ----

  const spansDropped: Record<SpanDropReason, number> = { queue_full: 0, export_failed: 0 };
  new Counter({
    name: 'sluice_tracing_spans_dropped_total',
    help: 'Finished spans not exported, by reason: queue_full (the export queue was full), export_failed (the collector refused them or did not answer)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, count] of Object.entries(spansDropped)) this.inc({ reason }, count);
    },
  });

  return {
    registry,
    service,
    transport,
    tracing: {
      spansDropped(reason, count) {
        spansDropped[reason] += count;
      },
    },
    tls: {
      reload(result) {
        tlsReloads[result]++;
      },
      serving(serialNumber, notAfterMs) {
        tlsServing = { serialNumber, notAfterMs };
      },
    },
    store: {
      evicted(reason, count) {
        evictions[reason] += count;
      },
      notStored(count) {
        notStored += count;
      },
      storeError(kind) {
        storeErrors.set(kind, (storeErrors.get(kind) ?? 0) + 1);
      },
      localCacheOverLimit(count) {
        localCacheOverLimit += count;
      },
      fallback(policy) {
        fallbacks.set(policy, (fallbacks.get(policy) ?? 0) + 1);
      },
    },
    nearThreshold(limit) {
      return Math.floor(Math.fround(Math.fround(limit) * ratio));
    },
    statsFor: (key) => table.statsFor(key),
    requestStatsFor: (key, ruleKey) => table.requestStatsFor(key, ruleKey),
    rules: () => table.rules(),
    observeLatency(seconds) {
      if (latencyTap !== undefined) latencyTap.add(seconds);
      latencySum += seconds;
      let i = 0;
      while (i < latencyBuckets.length && seconds > latencyBuckets[i]!) i++;
      latencyCounts[i]!++;
    },
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
