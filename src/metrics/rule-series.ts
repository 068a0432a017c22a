/**
 * The per-rule series: the reference's `ratelimit.service.rate_limit.<key>.<stat>` counters kept
 * as plain numbers, their Prometheus labels, the cardinality cap of keys built from request values
 * (one table for each process and for the primary's sum over workers), and the report a worker
 * sends. The one list of per-rule stats ({@link RULE_SERIES}) that /metrics, statsd and the
 * cluster sum all read.
 */
import { Counter, type Registry } from 'prom-client';

/** The per-rule counters of the reference (`ratelimit.service.rate_limit.<key>.<stat>`). */
export interface RuleStats {
  /**
   * The reference's stats key, e.g. `edge.path_/login.remote_address` (sanitised); for a rule's
   * overflow series (see `Metrics.requestStatsFor`), the rule's key then `.__overflow__`.
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

/**
 * Per-rule series name suffixes, in the reference's order, with the field each reads: the
 * Prometheus name suffix and the statsd stat name alike.
 */
export const RULE_SERIES = [
  ['total_hits', 'totalHits'],
  ['over_limit', 'overLimit'],
  ['near_limit', 'nearLimit'],
  ['within_limit', 'withinLimit'],
  ['shadow_mode', 'shadowMode'],
  ['over_limit_with_local_cache', 'overLimitWithLocalCache'],
] as const;

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
  /** See `Metrics.statsFor`. */
  statsFor(key: string): RuleStats;
  /** See `Metrics.requestStatsFor`. */
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
export function isRuleSeries(name: string): boolean {
  return RULE_SERIES_NAMES.has(name);
}

/** The counts of `stats`, in the order of the per-rule series. */
export function countsOf(stats: RuleStats): number[] {
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
