/**
 * End to end with tracing: a real Envoy (the shipped envoy.yaml, plus its OpenTelemetry tracer
 * exporting to Jaeger) receives a request carrying a `traceparent`, calls sluice's rate limit
 * service, and sluice (TRACING_ENABLED, OTLP/gRPC to the same Jaeger) continues the trace Envoy
 * hands it: one trace in Jaeger holds Envoy's spans and sluice's "ShouldRateLimit Execution".
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../helpers/app.js';
import {
  DEMO_RULES_DIR,
  envoyBinary,
  loadShippedEnvoyConfig,
  requireEnvoy,
  rewriteForLoopback,
  startEnvoyOnLoopback,
  startLoopbackUpstream,
  type EnvoyConfig,
  type EnvoyProcess,
  type LoopbackPorts,
} from '../helpers/envoy.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import {
  requireTelemetryBinary,
  startJaeger,
  type Jaeger,
  type JaegerSpan,
} from '../helpers/telemetry.js';

const envoy = requireEnvoy('e2e: Envoy and sluice in one trace');
const jaegerNeed = requireTelemetryBinary('e2e: Envoy and sluice in one trace', 'jaeger');
const SERVER = process.env['GRPC_SERVER'] === 'grpc-js' ? 'grpc-js' : 'lean';

/** The shipped envoy.yaml on loopback with an OpenTelemetry tracer sending to Jaeger's OTLP/gRPC. */
function tracedConfig(ports: LoopbackPorts, otlpGrpcPort: number): EnvoyConfig {
  const config = rewriteForLoopback(loadShippedEnvoyConfig(), ports);
  const resources = config['static_resources'];
  const hcm = resources.listeners[0].filter_chains[0].filters.find(
    (f: EnvoyConfig) => f['name'] === 'envoy.filters.network.http_connection_manager',
  ).typed_config;
  hcm.tracing = {
    random_sampling: { value: 100 },
    provider: {
      name: 'envoy.tracers.opentelemetry',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
        grpc_service: { envoy_grpc: { cluster_name: 'otlp' }, timeout: '1s' },
        service_name: 'envoy-under-test',
      },
    },
  };
  resources.clusters.push({
    name: 'otlp',
    type: 'STATIC',
    connect_timeout: '1s',
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: {} },
      },
    },
    load_assignment: {
      cluster_name: 'otlp',
      endpoints: [
        {
          lb_endpoints: [
            {
              endpoint: {
                address: { socket_address: { address: '127.0.0.1', port_value: otlpGrpcPort } },
              },
            },
          ],
        },
      ],
    },
  });
  return config;
}

describe.skipIf(envoy.skip || jaegerNeed.skip)(
  `Envoy and sluice in one trace (GRPC_SERVER=${SERVER})`,
  () => {
    const group = useProcessGroup();
    let jaeger: Jaeger;
    let running: RunningApp;
    let proxy: EnvoyProcess;
    const saved = process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];

    beforeAll(async () => {
      const binary = envoyBinary(envoy);
      jaeger = await startJaeger(group);
      process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = jaeger.otlpGrpc;
      running = await startApp([DEMO_RULES_DIR], {
        USE_STATSD: 'false',
        TRACING_ENABLED: 'true',
        TRACING_EXPORTER_PROTOCOL: 'grpc',
        TRACING_SERVICE_NAME: 'sluice-under-test',
      });
      const upstream = await startLoopbackUpstream(group);
      const otlpGrpcPort = Number(new URL(jaeger.otlpGrpc).port);
      proxy = await startEnvoyOnLoopback(group, {
        binary,
        sluicePort: running.port,
        upstreamPort: upstream.port,
        config: (ports) => tracedConfig(ports, otlpGrpcPort),
      });
    }, 90_000);

    afterAll(async () => {
      await running?.stop();
      if (saved === undefined) delete process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];
      else process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = saved;
    });

    it("puts sluice's spans under the span of Envoy's rate limit call", async () => {
      const traceId = randomBytes(16).toString('hex');
      const response = await fetch(new URL('/api/orders', proxy.baseUrl), {
        headers: {
          'x-api-key': `traced-${SERVER}`,
          traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
        },
        signal: AbortSignal.timeout(5_000),
      });
      await response.arrayBuffer();
      expect(response.status).toBe(200);
      // Stopping sluice exports its pending spans; Envoy flushes its own every few seconds.
      await running.stop();
      let spans: JaegerSpan[] = [];
      let services = new Map<string, string>();
      await waitFor(
        'Envoy and sluice spans in one trace',
        async () => {
          spans = await jaeger.trace(traceId);
          services = new Map(spans.map((s) => [s.spanID, s.processID]));
          const server = spans.find((s) =>
            s.operationName.endsWith('RateLimitService/ShouldRateLimit'),
          );
          const parent = server?.references.find((r) => r.refType === 'CHILD_OF');
          // Both sides arrived: sluice's server span and the Envoy span it names as parent.
          return parent !== undefined && services.has(parent.spanID);
        },
        { timeoutMs: 30_000, intervalMs: 500, onTimeout: () => JSON.stringify(spans, null, 2) },
      );
      const server = spans.find((s) =>
        s.operationName.endsWith('RateLimitService/ShouldRateLimit'),
      )!;
      const parent = server.references.find((r) => r.refType === 'CHILD_OF');
      expect(parent?.traceID).toBe(traceId);
      // The parent is a span Envoy sent (another process than sluice's).
      expect(services.get(parent!.spanID)).toBeDefined();
      expect(services.get(parent!.spanID)).not.toBe(server.processID);
    });
  },
);
