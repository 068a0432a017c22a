/**
 * Metrics prom-client renders from plain numbers read at scrape time: the hot path adds to a
 * number and these collectors copy it when /metrics is asked for. Every subsystem's metrics
 * (service-metrics.ts, store-metrics.ts, ...) are built from them.
 */
import { Counter, Gauge, type Metric, type Registry } from 'prom-client';

/** Register a counter without labels on `registry` whose value is `read()` at scrape time. */
export function plainCounter(
  registry: Registry,
  name: string,
  help: string,
  read: () => number,
): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/**
 * Register a counter with one label on `registry`: at scrape time one series per `[value, count]`
 * of `read()`, in that order (a count of 0 still shows its series).
 */
export function labelledCounter(
  registry: Registry,
  name: string,
  help: string,
  label: string,
  read: () => Iterable<readonly [string, number]>,
): void {
  new Counter({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      this.reset();
      for (const [value, count] of read()) this.inc({ [label]: value }, count);
    },
  });
}

/** Register a gauge on `registry` whose value is `read()` at scrape time (0 without `read`). */
export function plainGauge(
  registry: Registry,
  name: string,
  help: string,
  read: (() => number) | undefined,
): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read === undefined ? 0 : read());
    },
  });
}

/**
 * A histogram prom-client renders from plain numbers: `read()` gives per-bucket counts (not
 * cumulative; the last slot is above every bound) and the sum.
 */
export function plainHistogram(
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
