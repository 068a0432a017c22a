/**
 * `/metrics` for the whole service when `WORKERS` > 1 (src/workers.ts): the primary sums the
 * reports of every worker (docs/operations-metrics.md, "Workers"). Three things a plain sum of
 * registries does not give:
 *
 * - the series cap (`METRICS_MAX_SERIES`, `METRICS_MAX_SERIES_PER_RULE`) holds for the service,
 *   not per worker: the sum goes through one {@link SeriesTable}, the same decision each process
 *   makes, and a worker's series past it are counted in the rule's overflow series;
 * - counters never go back when a worker dies: its last reported counters and histograms are
 *   kept and added to every later sum (its gauges, which describe a process gone, are dropped);
 * - scrapes share one collection, paced like a single process's render ({@link pacedRender}).
 */
import { AggregatorRegistry, Registry } from 'prom-client';
import {
  DEFAULT_MAX_SERIES,
  DEFAULT_MAX_SERIES_PER_RULE,
  addCounts,
  createSeriesTable,
  registerRuleSeries,
  zeroCounts,
  type MetricJson,
  type MetricsReport,
  type ReportRow,
  type RuleStats,
} from './rule-series.js';
import { pacedRender, renderEach } from './render.js';

/** Options for {@link createClusterMetrics}. */
export interface ClusterMetricsOptions {
  /** `METRICS_MAX_SERIES_PER_RULE`, for the whole service (default as a single process). */
  readonly maxSeriesPerRule?: number;
  /** `METRICS_MAX_SERIES`, for the whole service (default as a single process). */
  readonly maxSeries?: number;
  /**
   * Ask every living worker for a report; resolves once each has answered (through
   * {@link ClusterMetrics.report}) or was given up on. A worker that did not answer is summed
   * with its last report.
   */
  readonly collect: () => Promise<void>;
  /** Monotonic time in ms, for pacing (default `performance.now`). */
  readonly now?: () => number;
}

/** The primary's sum over workers. */
export interface ClusterMetrics {
  /** Worker `id` was started: its reports count from now on. */
  join(id: number): void;
  /** The latest report of worker `id` (it replaces the previous; unknown ids are ignored). */
  report(id: number, report: MetricsReport): void;
  /** Worker `id` exited: its last counters stay in every later sum. */
  retire(id: number): void;
  /** The sum, in the Prometheus text format; concurrent callers share one. Never rejects. */
  render(): Promise<string>;
}

/** Metric types whose values only grow: a dead worker's are kept. */
const CUMULATIVE_TYPES = new Set(['counter', 'histogram']);

/** Create the primary's metrics. */
export function createClusterMetrics(options: ClusterMetricsOptions): ClusterMetrics {
  const table = createSeriesTable(
    Math.max(0, Math.floor(options.maxSeriesPerRule ?? DEFAULT_MAX_SERIES_PER_RULE)),
    Math.max(0, Math.floor(options.maxSeries ?? DEFAULT_MAX_SERIES)),
  );
  const ruleRegistry = new Registry();
  registerRuleSeries(ruleRegistry, () => table.rules());
  /** The last report of each living worker (`undefined` until its first). */
  const living = new Map<number, MetricsReport | undefined>();
  /** What dead workers had counted, per series of the table. */
  const retiredRules = new Map<RuleStats, number[]>();
  /** Dead workers' other counters and histograms: summed, plus those not yet folded in. */
  let retiredOther: MetricJson[] = [];
  let retiredPending: MetricJson[][] = [];

  const statsOf = (row: ReportRow): RuleStats => {
    const [key, kind, ruleKey] = row;
    switch (kind) {
      case 'rule':
        return table.statsFor(key);
      case 'request':
        return table.requestStatsFor(key, ruleKey);
      case 'overflow':
        return table.overflowFor(ruleKey);
    }
  };

  const now = options.now ?? (() => performance.now());
  let collectMs = 0;
  const sum = async (): Promise<string> => {
    const asked = now();
    await options.collect();
    collectMs = now() - asked;
    for (const stats of table.rules()) zeroCounts(stats);
    for (const [stats, counts] of retiredRules) addCounts(stats, counts);
    const others: MetricJson[][] = [];
    for (const report of living.values()) {
      if (report === undefined) continue;
      for (const row of report.rules) addCounts(statsOf(row), row.slice(3) as number[]);
      others.push(report.other);
    }
    if (retiredPending.length > 0) {
      const folded = AggregatorRegistry.aggregate([retiredOther, ...retiredPending]);
      retiredOther = await folded.getMetricsAsJSON();
      retiredPending = [];
    }
    others.push(retiredOther);
    // A metric that fails to sum is left out, as a single process leaves out one that fails to
    // render; the workers count their own failures.
    const rules = await renderEach(ruleRegistry, () => {});
    const rest = await renderEach(AggregatorRegistry.aggregate(others), () => {});
    return `${rules}\n${rest}`;
  };

  return {
    join(id) {
      if (!living.has(id)) living.set(id, undefined);
    },
    report(id, report) {
      if (living.has(id)) living.set(id, report);
    },
    retire(id) {
      const last = living.get(id);
      living.delete(id);
      if (last === undefined) return;
      for (const row of last.rules) {
        const stats = statsOf(row);
        const counts = retiredRules.get(stats) ?? new Array<number>(row.length - 3).fill(0);
        row.slice(3).forEach((value, i) => {
          counts[i]! += value as number;
        });
        retiredRules.set(stats, counts);
      }
      retiredPending.push(last.other.filter((metric) => CUMULATIVE_TYPES.has(String(metric.type))));
    },
    // Paced on the primary's own work: a worker slow to answer delays one scrape, not the next.
    render: pacedRender(sum, now, () => collectMs),
  };
}
