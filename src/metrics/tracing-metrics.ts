/** What tracing reports (docs/operations-tracing.md): finished spans that were not exported. */
import type { Registry } from 'prom-client';
import { labelledCounter } from './plain-metrics.js';

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

/** Register the tracing metrics on `registry` and give the sink that feeds them. */
export function createTracingMetrics(registry: Registry): TracingMetricsSink {
  const spansDropped: Record<SpanDropReason, number> = { queue_full: 0, export_failed: 0 };
  labelledCounter(
    registry,
    'sluice_tracing_spans_dropped_total',
    'Finished spans not exported, by reason: queue_full (the export queue was full), export_failed (the collector refused them or did not answer)',
    'reason',
    () => Object.entries(spansDropped),
  );
  return {
    spansDropped(reason, count) {
      spansDropped[reason] += count;
    },
  };
}
