/**
 * The service's own metrics: config loads, ShouldRateLimit calls by result (under the
 * reference's names and sluice's), and the latency histogram, kept as plain numbers.
 */
import { Counter, type Registry } from 'prom-client';
import { labelledCounter, plainCounter, plainHistogram } from './plain-metrics.js';

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

/** Upper bounds of the latency histogram's buckets, seconds. */
const LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
];

/** Options of {@link createServiceMetrics} (see `MetricsOptions`). */
export interface ServiceMetricsOptions {
  /** Also hands every latency to this; `undefined`: none. */
  readonly latencyTap?: { add(seconds: number): void } | undefined;
  /** Render the latency histogram (bounds and sum) in ms under its usual name. */
  readonly latencyInMilliseconds?: boolean;
}

/** The service's counters and its latency histogram. */
export interface ServiceMetrics {
  /** Service-wide counters (plain numbers the service adds to). */
  readonly counters: ServiceCounters;
  /** Observe one ShouldRateLimit latency, in seconds. */
  observeLatency(seconds: number): void;
}

/** Every ShouldRateLimit call counted, whatever its result. */
function totalCalls(service: ServiceCounters): number {
  return (
    service.callsOk +
    service.callsOverLimit +
    service.serviceErrors +
    service.storeErrors +
    service.internalErrors
  );
}

/** Register the service's metrics on `registry`. */
export function createServiceMetrics(
  registry: Registry,
  options: ServiceMetricsOptions,
): ServiceMetrics {
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
  plainCounter(
    registry,
    'ratelimit_service_config_load_success',
    'Rate limit config loads and reloads that succeeded',
    () => service.configLoadSuccess,
  );
  plainCounter(
    registry,
    'ratelimit_service_config_load_error',
    'Rate limit config loads and reloads that failed (the previous config kept serving)',
    () => service.configLoadError,
  );
  plainCounter(
    registry,
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
  labelledCounter(
    registry,
    'ratelimit_service_total_requests',
    'ShouldRateLimit calls, as the reference counts them per gRPC method',
    'grpc_method',
    () => [['ShouldRateLimit', totalCalls(service)]],
  );
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
  labelledCounter(
    registry,
    'sluice_should_rate_limit_calls_total',
    'ShouldRateLimit calls by result: ok, over_limit, invalid, store_error, internal',
    'result',
    () => [
      ['ok', service.callsOk],
      ['over_limit', service.callsOverLimit],
      ['invalid', service.serviceErrors],
      ['store_error', service.storeErrors],
      ['internal', service.internalErrors],
    ],
  );
  return {
    counters: service,
    observeLatency(seconds) {
      if (latencyTap !== undefined) latencyTap.add(seconds);
      latencySum += seconds;
      let i = 0;
      while (i < latencyBuckets.length && seconds > latencyBuckets[i]!) i++;
      latencyCounts[i]!++;
    },
  };
}
