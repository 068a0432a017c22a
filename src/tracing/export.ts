/**
 * The bounds around the OpenTelemetry export (docs/operations-tracing.md, "Bounds and failures"): a cap on the
 * spans held between their end and their export's answer, the in-flight export included, with
 * what is past it dropped and counted; and a log of failing exports that says so once, not once
 * per export.
 *
 * Only types are imported from the SDK here: this module is loaded with tracing.ts even when
 * tracing is off, which must load no OpenTelemetry code. The few values needed (the sampled flag,
 * the success code) are handed in by createTracing, which has the SDK loaded.
 */
import type { Context } from '@opentelemetry/api';
import type { ExportResult, ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import type { Logger } from '../logging/logger.js';
import type { TracingMetricsSink } from '../metrics/metrics.js';

/** Shortest time between two "exports fail" warnings, ms (a flapping collector logs little). */
const FAILURE_WARNING_INTERVAL_MS = 60_000;

/** Longest error text a warning carries, characters (a collector's answer may be long). */
const MAX_ERROR_LENGTH = 300;

/** Options for {@link boundExport}. */
export interface BoundExportOptions {
  /** The exporter (OTLP over HTTP or gRPC). */
  readonly exporter: SpanExporter;
  /** Builds the batch processor around the exporter it is given (the SDK's BatchSpanProcessor). */
  readonly batch: (exporter: SpanExporter) => SpanProcessor;
  /** Most spans held from their end to their export's answer; more are dropped. */
  readonly maxHeldSpans: number;
  /** The trace flag of sampled spans (`TraceFlags.SAMPLED`): only those are exported. */
  readonly sampledFlag: number;
  /** `ExportResultCode.SUCCESS`. */
  readonly successCode: ExportResultCode;
  /** Where the spans go, for the log. */
  readonly endpoint: string;
  /** Module logger. */
  readonly logger: Logger;
  /** Dropped spans are counted here; `undefined`: not counted. */
  readonly metrics: TracingMetricsSink | undefined;
  /** Current time, ms (the warning interval). */
  readonly now: () => number;
}

/**
 * The span processor to give the tracer provider: `options.batch` around `options.exporter`, with
 * at most `maxHeldSpans` spans held (counted from their end until their export answers, so a
 * collector that never answers holds no more than that), what is past it dropped and counted as
 * `queue_full`, the spans of failed exports counted as `export_failed`, and failures logged.
 */
export function boundExport(options: BoundExportOptions): SpanProcessor {
  const { maxHeldSpans, sampledFlag, successCode, metrics } = options;
  const report = failureReporter(options);
  let held = 0;
  const exporter: SpanExporter = {
    export(spans, done) {
      options.exporter.export(spans, (result) => {
        held -= spans.length;
        const ok = result.code === successCode;
        if (!ok) metrics?.spansDropped('export_failed', spans.length);
        report(ok, result);
        done(result);
      });
    },
    shutdown: () => options.exporter.shutdown(),
    forceFlush: () => options.exporter.forceFlush?.() ?? Promise.resolve(),
  };
  const inner = options.batch(exporter);
  return {
    onStart(span: Span, parent: Context) {
      inner.onStart(span, parent);
    },
    onEnd(span: ReadableSpan) {
      // Unsampled spans are never exported (the batch processor skips them too): not held.
      if ((span.spanContext().traceFlags & sampledFlag) === 0) return;
      if (held >= maxHeldSpans) {
        metrics?.spansDropped('queue_full', 1);
        return;
      }
      held++;
      inner.onEnd(span);
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
  };
}

/**
 * The log of export results: a warning when exports fail (naming the endpoint and the error), one
 * per failure however many exports fail in it, and at most one per
 * {@link FAILURE_WARNING_INTERVAL_MS} (a failure that starts sooner after the last warning is
 * warned about once that time has passed, if it lasts); once a warned failure ends, one line
 * saying exports work again, with how many failed meanwhile.
 */
function failureReporter(options: BoundExportOptions): (ok: boolean, result: ExportResult) => void {
  const { logger, endpoint, now } = options;
  // Whether the failure in progress was warned about (then its end is logged too).
  let warned = false;
  let lastWarningAt = -Infinity;
  let failedExports = 0;
  return (ok, result) => {
    if (ok) {
      if (warned) {
        logger.info(
          { endpoint, failedExports },
          `tracing export works again (${endpoint}); spans of the failed exports were dropped`,
        );
      }
      warned = false;
      failedExports = 0;
      return;
    }
    failedExports++;
    if (warned) return;
    const at = now();
    if (at - lastWarningAt < FAILURE_WARNING_INTERVAL_MS) return;
    lastWarningAt = at;
    warned = true;
    logger.warn(
      { endpoint, err: (result.error?.message ?? 'export failed').slice(0, MAX_ERROR_LENGTH) },
      `tracing export to ${endpoint} failed; spans are dropped until it answers ` +
        '(check OTEL_EXPORTER_OTLP_ENDPOINT and the collector; TRACING_ENABLED=false turns tracing off)',
    );
  };
}
