/**
 * ShouldRateLimit in domain terms: validate the request, take the current config snapshot once,
 * and let the limiter decide. Both transports call this: gRPC, and the HTTP `/json` endpoint
 * (transport/http); the console's "try it" calls its dry run, `explain`.
 */
import type { Clock } from '../clock.js';
import type { ConfigSnapshot } from '../config/types.js';
import { SluiceError } from '../errors.js';
import type { Explanation, Limiter } from '../limiter/limiter.js';
import type { Logger } from '../logging/logger.js';
import { sanitizeStatName, type Metrics, type RuleStats } from '../metrics/metrics.js';
import type {
  DescriptorStatus,
  RateLimitRequest,
  RateLimitResponse,
  RateLimitRule,
  RequestDescriptor,
} from '../model.js';
import type { TraceHeaders, Tracing } from '../tracing/tracing.js';
import { problemJson, rateLimitHeaders, type HeaderOptions } from './headers.js';
import { validateRequest, type RequestBounds } from './validate-request.js';

/** Options for {@link createRateLimitService}. */
export interface RateLimitServiceOptions {
  /** Decides requests. */
  readonly limiter: Limiter;
  /** Returns the snapshot to use; read once per request so a reload never splits one. */
  readonly config: () => ConfigSnapshot;
  /** Request size bounds. */
  readonly bounds: RequestBounds;
  /** Module logger; requests are logged at debug level only. */
  readonly logger: Logger;
  /** Where per-rule and per-call counts go; `undefined` counts nothing. */
  readonly metrics?: Metrics | undefined;
  /** Rate limit response headers to add; `undefined` adds none. */
  readonly headers?: HeaderOptions | undefined;
  /** Send an RFC 9457 problem+json `raw_body` with every OVER_LIMIT answer. */
  readonly problemJson?: boolean | undefined;
  /** Time source for header values (epoch ms); default `Date.now`. */
  readonly clock?: Clock | undefined;
  /** Trace every call (`TRACING_ENABLED`); `undefined`: no tracing and no work for it. */
  readonly tracing?: Tracing | undefined;
}

/** The rate limit service, independent of any transport. */
export interface RateLimitService {
  /**
   * Decide one request. Rejects with SluiceError INVALID_REQUEST for a malformed or oversized
   * request and STORE_UNAVAILABLE when counting failed; over limit is an answer, not an error.
   * `headers`: the call's metadata, where tracing finds the caller's trace (transports pass it
   * only when tracing is on).
   */
  shouldRateLimit(request: RateLimitRequest, headers?: TraceHeaders): Promise<RateLimitResponse>;
}

/**
 * The service's dry run, which the console calls (the transports need only
 * {@link RateLimitService}).
 */
export interface Explainer {
  /**
   * The answer {@link shouldRateLimit} would give now, from the same validation, snapshot and
   * limiter, charging nothing and counting nothing in the metrics (the console's "try it";
   * `Limiter.explain`). Response headers are not added. Rejects as `shouldRateLimit` does.
   */
  explain(request: RateLimitRequest): Promise<Explanation>;
}

/**
 * A status the Redis store's local cache answered may say so (`overLimitWithLocalCache`); the
 * field is optional so stores without a local cache need not set it.
 */
type StatusMaybeFromLocalCache = DescriptorStatus & {
  readonly overLimitWithLocalCache?: boolean;
};

/**
 * The reference's stats key for a counted descriptor (docs/operations-metrics.md): the rule's full
 * key; for a RateLimitOverride the request's `key_value` path; for `detailed_metric` every entry
 * as `key_value`; for `value_to_metric` the rule's level with the request's value.
 */
function statsKey(domain: string, descriptor: RequestDescriptor, rule: RateLimitRule): string {
  const entries = descriptor.entries;
  if (rule.fromOverride) {
    let key = domain;
    for (const { key: k, value } of entries) key += value === '' ? `.${k}` : `.${k}_${value}`;
    return sanitizeStatName(key);
  }
  if (rule.detailedMetric) {
    let key = domain;
    for (const entry of entries) key += `.${entry.key}_${entry.value}`;
    return sanitizeStatName(key);
  }
  const last = entries[entries.length - 1];
  if (rule.valueToMetric && last !== undefined && last.value !== '') {
    const full = rule.fullKey;
    const exact = `.${last.key}_${last.value}`;
    if (!full.endsWith(exact)) {
      const bare = `.${last.key}`;
      if (full.endsWith(bare)) return sanitizeStatName(full + `_${last.value}`);
      const at = full.lastIndexOf(`${bare}_`);
      if (at >= 0 && !rule.shareThreshold) return sanitizeStatName(full.slice(0, at) + exact);
    }
  }
  return sanitizeStatName(rule.fullKey);
}

/**
 * The key a RateLimitOverride's stats count under for the cardinality cap: the domain and the
 * request's entry keys, without their values (which the request chooses).
 */
function overrideRuleKey(domain: string, descriptor: RequestDescriptor): string {
  let key = domain;
  for (const { key: k } of descriptor.entries) key += `.${k}`;
  return sanitizeStatName(key);
}

/**
 * The per-rule stats of a counted descriptor, found per call: cached per rule where the stats key
 * does not depend on the request.
 */
function createStatsLookup(): (
  m: Metrics,
  domain: string,
  d: RequestDescriptor,
  rule: RateLimitRule,
) => RuleStats {
  // Stats of rules whose key does not depend on the request, found without building a string.
  const byRule = new WeakMap<RateLimitRule, RuleStats>();

  // The sanitised key of a configured rule, which names its overflow series.
  const ruleKeys = new WeakMap<RateLimitRule, string>();
  return (m: Metrics, domain: string, d: RequestDescriptor, rule: RateLimitRule): RuleStats => {
    if (rule.fromOverride) {
      return m.requestStatsFor(statsKey(domain, d, rule), overrideRuleKey(domain, d));
    }
    if (rule.detailedMetric || rule.valueToMetric) {
      let ruleKey = ruleKeys.get(rule);
      if (ruleKey === undefined) {
        ruleKey = sanitizeStatName(rule.fullKey);
        ruleKeys.set(rule, ruleKey);
      }
      return m.requestStatsFor(statsKey(domain, d, rule), ruleKey);
    }
    let stats = byRule.get(rule);
    if (stats === undefined) {
      stats = m.statsFor(statsKey(domain, d, rule));
      byRule.set(rule, stats);
    }
    return stats;
  };
}

/** Create the service. */
export function createRateLimitService(
  options: RateLimitServiceOptions,
): RateLimitService & Explainer {
  const { limiter, config, bounds, logger, metrics, headers } = options;
  const clock = options.clock ?? Date.now;
  const withProblem = options.problemJson === true;
  const counters = metrics?.service;
  const statsOf = createStatsLookup();

  /** The reference's per-rule arithmetic (docs/operations-metrics.md); plain additions only. */
  const record = (m: Metrics, request: RateLimitRequest, response: RateLimitResponse): void => {
    const statuses = response.statuses;
    // A quota status may say OVER_LIMIT in an admitted request: ask the decision itself.
    const rejected = response.rejected ?? response.overallCode === 'OVER_LIMIT';
    for (let i = 0; i < statuses.length; i++) {
      const status = statuses[i] as StatusMaybeFromLocalCache;
      const rule = status.rule;
      if (rule === undefined) continue;
      const stats = statsOf(m, request.domain, request.descriptors[i]!, rule);
      const hits = status.hits;
      stats.totalHits += hits;
      if (status.overLimit) {
        stats.overLimit += hits;
        if (status.overLimitWithLocalCache === true) stats.overLimitWithLocalCache += hits;
        if (rule.shadowMode) stats.shadowMode += hits;
        continue;
      }
      const limit = status.currentLimit?.requestsPerUnit ?? rule.requestsPerUnit;
      // Counted after this request: charged when the request was admitted; when another
      // descriptor rejected it nothing was charged, so add the hits it would have taken.
      const used = limit - status.limitRemaining;
      const after = rejected ? used + hits : used;
      const before = after - hits;
      const near = m.nearThreshold(limit);
      if (after > near) stats.nearLimit += before >= near ? hits : after - near;
      stats.withinLimit += hits;
    }
    if (response.overallCode === 'OVER_LIMIT') {
      counters!.callsOverLimit++;
    } else {
      counters!.callsOk++;
      if (rejected) counters!.globalShadowMode++;
    }
  };

  const countFailure = (error: SluiceError): void => {
    if (counters === undefined) return;
    // NO_CONFIG is a service error in the reference's stats too.
    if (error.code === 'INVALID_REQUEST' || error.code === 'NO_CONFIG') counters.serviceErrors++;
    else if (error.code === 'STORE_UNAVAILABLE') counters.storeErrors++;
    else counters.internalErrors++;
  };

  /** Everything after the limiter's decision: metrics, headers, the debug log. */
  const complete = (
    request: RateLimitRequest,
    decided: RateLimitResponse,
    start: number,
  ): RateLimitResponse => {
    let response = decided;
    if (metrics !== undefined) record(metrics, request, response);
    if (headers !== undefined || withProblem) {
      const nowMs = clock();
      const added = headers === undefined ? [] : rateLimitHeaders(response, headers, nowMs);
      const reject = withProblem && response.overallCode === 'OVER_LIMIT';
      if (reject) added.push({ key: 'content-type', value: 'application/problem+json' });
      if (added.length > 0 || reject) {
        response = {
          ...response,
          responseHeadersToAdd: [...response.responseHeadersToAdd, ...added],
          rawBody: reject ? problemJson(response, nowMs) : response.rawBody,
        };
      }
    }
    if (logger.isLevelEnabled('debug')) {
      logger.debug({ request, response }, 'ShouldRateLimit');
    }
    if (metrics !== undefined) metrics.observeLatency((performance.now() - start) / 1000);
    return response;
  };

  // A failed call is timed too: the reference's response_time covers every call.
  const fail = (err: unknown, start: number): SluiceError => {
    const error = SluiceError.from(err);
    countFailure(error);
    if (metrics !== undefined) metrics.observeLatency((performance.now() - start) / 1000);
    return error;
  };

  const decideNow = limiter.decideNow;
  const service: RateLimitService & Explainer = {
    // Not `async`: with a synchronous store (memory) the answer is ready when the promise is
    // made, and the only promise hop is the caller's.
    shouldRateLimit(request) {
      const start = metrics === undefined ? 0 : performance.now();
      if (decideNow !== undefined) {
        let decided: RateLimitResponse;
        try {
          validateRequest(request, bounds);
          decided = decideNow(config(), request);
        } catch (err) {
          return Promise.reject(fail(err, start));
        }
        try {
          return Promise.resolve(complete(request, decided, start));
        } catch (err) {
          return Promise.reject(SluiceError.from(err));
        }
      }
      try {
        validateRequest(request, bounds);
        return limiter.decide(config(), request).then(
          (decided) => complete(request, decided, start),
          (err: unknown) => Promise.reject(fail(err, start)),
        );
      } catch (err) {
        return Promise.reject(fail(err, start));
      }
    },
    async explain(request) {
      try {
        validateRequest(request, bounds);
        return await limiter.explain(config(), request);
      } catch (err) {
        throw SluiceError.from(err);
      }
    },
  };
  const tracing = options.tracing;
  if (tracing === undefined) return service;
  const untraced = (request: RateLimitRequest) => service.shouldRateLimit(request);
  return {
    shouldRateLimit: (request, headers) =>
      tracing.traceCall(request, headers, () => untraced(request)),
    // A dry run is no call: not traced.
    explain: (request) => service.explain(request),
  };
}
