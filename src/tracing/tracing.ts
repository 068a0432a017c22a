/**
 * OpenTelemetry tracing (`TRACING_ENABLED=true`, docs/operations-tracing.md), as the reference
 * traces: the caller's context from the gRPC metadata (W3C `traceparent`, B3 single or multi
 * header, baggage), a server span per ShouldRateLimit call, under it "ShouldRateLimit Execution"
 * (attributes `domain`, `request string`) and, with Redis, "Redis Pipeline Execution" around the
 * store call (`pipeline length`, `perSecondPipeline length`). Spans leave in batches over OTLP
 * (HTTP with protobuf bodies, or gRPC; `OTEL_EXPORTER_OTLP_*`), within bounds: attribute values
 * of at most {@link MAX_ATTRIBUTE_LENGTH} characters, at most {@link MAX_HELD_SPANS} spans
 * waiting for export (export.ts).
 *
 * The OpenTelemetry SDK is imported only by {@link createTracing}, so with tracing off nothing of
 * it is loaded and callers hold `undefined` instead of a Tracing: no work per call.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type * as OtelApi from '@opentelemetry/api';
import type { Context, TextMapGetter, TextMapPropagator } from '@opentelemetry/api';
import type { TracerProvider as OtelTracerProvider } from '@opentelemetry/sdk-trace';
import type { Logger } from '../logging/logger.js';
import type { TracingMetricsSink } from '../metrics/metrics.js';
import type { RateLimitRequest } from '../model.js';
import type { CounterSpec, CounterStore } from '../stores/counter-store.js';
import { boundExport } from './export.js';

/**
 * Longest attribute value (and status message) a span carries, in characters; longer ones are
 * cut. The `request string` holds request values (up to 4096 characters each, many per call),
 * and every span is held in memory until its export answers.
 */
export const MAX_ATTRIBUTE_LENGTH = 2048;

/**
 * Most spans held between their end and their export's answer (the OpenTelemetry default queue
 * size); past it new spans are dropped and counted (`sluice_tracing_spans_dropped_total`).
 */
export const MAX_HELD_SPANS = 2048;

/** Spans per export request (the OpenTelemetry default). */
const EXPORT_BATCH_SPANS = 512;

/**
 * The request metadata a transport hands over (lower-case names): node:http2 headers or
 * grpc-js `Metadata.getMap()`. Only read when tracing is on.
 */
export type TraceHeaders = Readonly<Record<string, unknown>>;

/** Tracing of one instance. */
export interface Tracing {
  /**
   * Run one ShouldRateLimit call (`run`) inside its spans, the caller's trace (from `headers`)
   * as parent; the spans end when the promise settles, marked as errors when it rejects.
   */
  traceCall<T>(
    request: RateLimitRequest,
    headers: TraceHeaders | undefined,
    run: () => Promise<T>,
  ): Promise<T>;
  /**
   * The store the limiter should use: `store` with every batch inside a "Redis Pipeline
   * Execution" span. `perSecond`: whether windows under a minute go to a second Redis
   * (`REDIS_PERSECOND`), which the span's `perSecondPipeline length` counts apart.
   */
  traceStore(store: CounterStore, perSecond: boolean): CounterStore;
  /** Export what is pending now; resolves (never rejects) when the export answered or failed. */
  flush(): Promise<void>;
  /** Export what is pending and stop (at most `timeoutMs`). */
  shutdown(timeoutMs: number): Promise<void>;
}

/** OpenTelemetry tracing (`TRACING_ENABLED=true`); the exporter reads `OTEL_EXPORTER_OTLP_*`. */
export interface TracingSettings {
  /** `TRACING_EXPORTER_PROTOCOL`: `http` (default, OTLP/HTTP protobuf) or `grpc`. */
  readonly protocol: 'http' | 'grpc';
  /** `TRACING_SERVICE_NAME` (default `RateLimit`). */
  readonly serviceName: string;
  /** `TRACING_SERVICE_NAMESPACE` (default empty). */
  readonly serviceNamespace: string;
  /** `TRACING_SERVICE_INSTANCE_ID`; `undefined`: a random UUID per process, as the reference. */
  readonly serviceInstanceId: string | undefined;
  /**
   * `TRACING_SAMPLING_RATE` (default 1): the share of traces started here that are sampled
   * (1 or more: all; 0 or less: none); a caller's sampled flag always wins (parent based).
   */
  readonly samplingRate: number;
}

/** Options for {@link createTracing}. */
export interface TracingOptions {
  /** The `TRACING_*` settings. */
  readonly settings: TracingSettings;
  /** Module logger. */
  readonly logger: Logger;
  /** Where dropped spans are counted; `undefined`: not counted. */
  readonly metrics?: TracingMetricsSink | undefined;
  /** Current time in ms, for the rate of failure warnings (default `Date.now`). */
  readonly now?: (() => number) | undefined;
}

/** The gRPC service and method names spans carry (the reference's otelgrpc server span). */
const RLS_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';

/**
 * The request as the reference's `request.String()` prints it (protobuf text format), cut at
 * {@link MAX_ATTRIBUTE_LENGTH} characters (ending `...` when cut); building stops there, so a
 * large request costs no more than a small one.
 */
function requestString(request: RateLimitRequest): string {
  const q = (s: string): string => JSON.stringify(s);
  let out = `domain:${q(request.domain)}`;
  for (const d of request.descriptors) {
    if (out.length > MAX_ATTRIBUTE_LENGTH) break;
    out += ' descriptors:{';
    for (let i = 0; i < d.entries.length && out.length <= MAX_ATTRIBUTE_LENGTH; i++) {
      const e = d.entries[i]!;
      out += `${i > 0 ? ' ' : ''}entries:{key:${q(e.key)} value:${q(e.value)}}`;
    }
    if (d.limit !== undefined) {
      out += ` limit:{requests_per_unit:${d.limit.requestsPerUnit} unit:${d.limit.unit ?? 'UNKNOWN'}}`;
    }
    if (d.hitsAddend !== undefined) out += ` hits_addend:{value:${d.hitsAddend}}`;
    out += '}';
  }
  if (request.hitsAddend !== 0) out += ` hits_addend:${request.hitsAddend}`;
  return cut(out);
}

/** `text` cut to {@link MAX_ATTRIBUTE_LENGTH} characters, ending `...` when it was longer. */
function cut(text: string): string {
  return text.length <= MAX_ATTRIBUTE_LENGTH
    ? text
    : `${text.slice(0, MAX_ATTRIBUTE_LENGTH - 3)}...`;
}

/**
 * Where the OTLP exporter sends spans, by the rules it reads `OTEL_EXPORTER_OTLP_*` with (the
 * OpenTelemetry specification's): the traces endpoint as given; else the general endpoint, with
 * `/v1/traces` added for HTTP; else the default (`http://localhost:4318/v1/traces`, gRPC
 * `http://localhost:4317`). For the log: the exporter itself reads the same variables.
 */
export function otlpEndpoint(
  protocol: 'http' | 'grpc',
  env: Readonly<Record<string, string | undefined>>,
): string {
  const given = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const traces = given('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const general = given('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (protocol === 'grpc') return traces ?? general ?? 'http://localhost:4317';
  if (traces !== undefined) return traces;
  if (general !== undefined) return `${general}${general.endsWith('/') ? '' : '/'}v1/traces`;
  return 'http://localhost:4318/v1/traces';
}

/** Read string, string[] (first value) or Buffer-free metadata values. */
const getter: TextMapGetter<TraceHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const value = carrier[key];
    if (typeof value === 'string') return value;
    if (Array.isArray(value)) {
      const strings = value.filter((v): v is string => typeof v === 'string');
      return strings.length > 0 ? strings : undefined;
    }
    return undefined;
  },
};

/** What {@link startProvider} hands {@link createTracing}: the API module and the SDK's parts. */
interface TracingParts {
  /** `@opentelemetry/api`, loaded only once tracing is on. */
  readonly api: typeof OtelApi;
  /** The tracer provider, which holds the span processor and its exporter. */
  readonly provider: OtelTracerProvider;
  /** W3C trace context, B3 and W3C baggage, read from the request metadata. */
  readonly propagator: TextMapPropagator;
}

/**
 * Load the OpenTelemetry SDK and start the tracer provider the settings describe: parent-based
 * sampling at `TRACING_SAMPLING_RATE`, a batch span processor, an OTLP exporter that reads its
 * endpoint, headers and timeout from `OTEL_EXPORTER_OTLP_*`. Logs what it started.
 */
async function startProvider(options: TracingOptions): Promise<TracingParts> {
  const { settings, logger } = options;
  const [api, core, b3, resources, sdk] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/propagator-b3'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace'),
  ]);
  // OTLP/HTTP with protobuf bodies, as the reference's otlptracehttp exporter sends them.
  const exporter =
    settings.protocol === 'grpc'
      ? new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter()
      : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
  const endpoint = otlpEndpoint(settings.protocol, process.env);
  const instanceId = settings.serviceInstanceId ?? randomUUID();
  const provider = new sdk.TracerProvider({
    resource: resources.resourceFromAttributes({
      'service.name': settings.serviceName,
      'service.namespace': settings.serviceNamespace,
      'service.instance.id': instanceId,
    }),
    sampler: new sdk.ParentBasedSampler({
      root: new sdk.TraceIdRatioBasedSampler(settings.samplingRate),
    }),
    spanLimits: { attributeValueLengthLimit: MAX_ATTRIBUTE_LENGTH },
    spanProcessors: [
      boundExport({
        exporter,
        batch: (bounded) =>
          new sdk.BatchSpanProcessor({
            exporter: bounded,
            maxQueueSize: MAX_HELD_SPANS,
            maxExportBatchSize: EXPORT_BATCH_SPANS,
          }),
        maxHeldSpans: MAX_HELD_SPANS,
        sampledFlag: api.TraceFlags.SAMPLED,
        successCode: core.ExportResultCode.SUCCESS,
        endpoint,
        logger,
        metrics: options.metrics,
        now: options.now ?? Date.now,
      }),
    ],
  });
  const propagator = new core.CompositePropagator({
    propagators: [
      new core.W3CTraceContextPropagator(),
      new b3.B3Propagator(),
      new core.W3CBaggagePropagator(),
    ],
  });
  logger.info(
    {
      protocol: settings.protocol,
      endpoint,
      serviceName: settings.serviceName,
      serviceNamespace: settings.serviceNamespace,
      serviceInstanceId: instanceId,
      samplingRate: settings.samplingRate,
    },
    'tracing on',
  );

  return { api, provider, propagator };
}

/**
 * Load the OpenTelemetry SDK and start the tracer provider the settings describe (see
 * {@link startProvider}); the returned {@link Tracing} makes the reference's spans with it.
 */
export async function createTracing(options: TracingOptions): Promise<Tracing> {
  const { logger } = options;
  const { api, provider, propagator } = await startProvider(options);
  const serverTracer = provider.getTracer('ratelimit server');
  const serviceTracer = provider.getTracer('ratelimit');
  const storeTracer = provider.getTracer('redis.fixedCacheImpl');
  // The context of the call in progress, so the store wrapper finds its parent without the
  // limiter passing one through.
  const active = new AsyncLocalStorage<Context>();
  const { SpanKind, SpanStatusCode, ROOT_CONTEXT, trace } = api;

  const failed = (span: { setStatus(s: { code: number; message?: string }): unknown }) => {
    return (err: unknown) => {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: cut(err instanceof Error ? err.message : String(err)),
      });
    };
  };

  return {
    traceCall<T>(
      request: RateLimitRequest,
      headers: TraceHeaders | undefined,
      run: () => Promise<T>,
    ): Promise<T> {
      const parent =
        headers === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, getter);
      const server = serverTracer.startSpan(
        `${RLS_SERVICE}/ShouldRateLimit`,
        {
          kind: SpanKind.SERVER,
          attributes: {
            'rpc.system': 'grpc',
            'rpc.service': RLS_SERVICE,
            'rpc.method': 'ShouldRateLimit',
          },
        },
        parent,
      );
      const serverContext = trace.setSpan(parent, server);
      const execution = serviceTracer.startSpan(
        'ShouldRateLimit Execution',
        { attributes: { domain: request.domain, 'request string': requestString(request) } },
        serverContext,
      );
      const executionContext = trace.setSpan(serverContext, execution);
      let answer: Promise<T>;
      try {
        answer = active.run(executionContext, run);
      } catch (err) {
        answer = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      const end = (): void => {
        execution.end();
        server.end();
      };
      return answer.then(
        (value) => {
          server.setAttribute('rpc.grpc.status_code', 0);
          end();
          return value;
        },
        (err: unknown) => {
          failed(execution)(err);
          failed(server)(err);
          end();
          throw err;
        },
      );
    },
    traceStore(store, perSecond) {
      const apply = (specs: readonly CounterSpec[]) => {
        let seconds = 0;
        if (perSecond) for (const spec of specs) if (spec.windowMs < 60_000) seconds++;
        const span = storeTracer.startSpan(
          'Redis Pipeline Execution',
          {
            attributes: {
              'pipeline length': specs.length - seconds,
              'perSecondPipeline length': seconds,
            },
          },
          active.getStore() ?? ROOT_CONTEXT,
        );
        return store.apply(specs).then(
          (result) => {
            span.end();
            return result;
          },
          (err: unknown) => {
            failed(span)(err);
            span.end();
            throw err;
          },
        );
      };
      return {
        apply,
        size: () => store.size(),
        healthy: () => store.healthy(),
        close: () => store.close(),
      };
    },
    async flush() {
      // A failed export is logged and counted by boundExport; the caller has nothing to add.
      await provider.forceFlush().catch(() => undefined);
    },
    async shutdown(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      try {
        await Promise.race([provider.shutdown(), timeout]);
      } catch (err) {
        logger.warn({ err }, 'tracing shutdown failed; pending spans may be lost');
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
