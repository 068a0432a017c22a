/**
 * OpenTelemetry tracing against a real OTLP receiver (Jaeger v2, read back through its query
 * API): the caller's trace continued from `traceparent` and from B3 headers, over OTLP/HTTP and
 * OTLP/gRPC export, and with Redis the store span under "ShouldRateLimit Execution".
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { createLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import { LOOPBACK_LISTENERS, ruleDir } from '../helpers/app.js';
import { loadEnvoyRls, rlsRequest } from '../helpers/envoy-rls-client.js';
import {
  ensureBuilt,
  freePort,
  serverUnderTest,
  startSluice,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';
import { requireRedis, startRedis } from '../helpers/redis.js';
import {
  requireTelemetryBinary,
  startJaeger,
  type Jaeger,
  type JaegerSpan,
} from '../helpers/telemetry.js';

const RULES = `domain: traced
descriptors:
  - key: api_key
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;

const need = requireTelemetryBinary('telemetry-tracing', 'jaeger');
const redisNeed = requireRedis('telemetry-tracing (redis)');

/** One ShouldRateLimit call carrying `headers` as gRPC metadata. */
async function callWith(address: string, headers: Record<string, string>): Promise<void> {
  const pkg = loadEnvoyRls();
  const def = pkg['envoy.service.ratelimit.v3.RateLimitService'] as grpc.ServiceDefinition;
  const method = def.ShouldRateLimit!;
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
  try {
    await new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        (v: unknown) => method.requestSerialize(v),
        (b: Buffer) => method.responseDeserialize(b),
        rlsRequest('traced', [{ api_key: 'k' }]),
        metadata,
        { deadline: Date.now() + 5_000 },
        (err, response) => (err ? reject(err) : resolve(response)),
      );
    });
  } finally {
    client.close();
  }
}

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');

describe.skipIf(need.skip)('tracing into a real Jaeger', () => {
  const group = useProcessGroup();
  let jaeger: Jaeger;
  const running: App[] = [];
  const saved = { ...process.env };

  beforeAll(async () => {
    jaeger = await startJaeger(group);
  }, 60_000);

  afterEach(async () => {
    await Promise.all(running.splice(0).map((app) => app.close()));
    for (const key of Object.keys(process.env)) {
      if (key.startsWith('OTEL_') && saved[key] === undefined) delete process.env[key];
    }
  });

  /** Start sluice exporting to Jaeger over `protocol`; the exporter reads OTEL_* from the process. */
  async function start(protocol: 'http' | 'grpc', env: Record<string, string> = {}) {
    process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] =
      protocol === 'http' ? jaeger.otlpHttp : jaeger.otlpGrpc;
    const settings = loadSettings(
      {
        ...LOOPBACK_LISTENERS,
        USE_STATSD: 'false',
        TRACING_ENABLED: 'true',
        TRACING_EXPORTER_PROTOCOL: protocol,
        TRACING_SERVICE_NAME: 'sluice-under-test',
        TRACING_SERVICE_INSTANCE_ID: `instance-${protocol}`,
        ...serverUnderTest(),
        ...env,
      },
      { config: [await ruleDir({ 'traced.yaml': RULES })] },
    );
    const app = await createApp({
      settings,
      logger: createLogger({ level: 'fatal', format: 'json' }),
      watch: false,
    });
    running.push(app);
    const { grpcPort } = await app.start();
    return { app, address: `127.0.0.1:${grpcPort}` };
  }

  /** The spans of `traceId` once `names` are all there (the app was closed, so they are sent). */
  async function spansOf(traceId: string, names: string[]): Promise<JaegerSpan[]> {
    let spans: JaegerSpan[] = [];
    await waitFor(
      `spans ${names.join(', ')} of trace ${traceId} in Jaeger`,
      async () => {
        spans = await jaeger.trace(traceId);
        return names.every((name) => spans.some((s) => s.operationName === name));
      },
      { timeoutMs: 15_000, intervalMs: 200, onTimeout: () => JSON.stringify(spans, null, 2) },
    );
    return spans;
  }

  const parentOf = (span: JaegerSpan): string | undefined =>
    span.references.find((r) => r.refType === 'CHILD_OF')?.spanID;

  const tag = (span: JaegerSpan, key: string): unknown =>
    span.tags.find((t) => t.key === key)?.value;

  for (const protocol of ['http', 'grpc'] as const) {
    it(`continues the caller's traceparent (OTLP over ${protocol})`, async () => {
      const { app, address } = await start(protocol);
      const traceId = hex(16);
      const callerSpan = hex(8);
      await callWith(address, { traceparent: `00-${traceId}-${callerSpan}-01` });
      await app.close();
      const spans = await spansOf(traceId, ['ShouldRateLimit Execution']);
      const server = spans.find((s) => s.operationName.endsWith('/ShouldRateLimit'))!;
      const execution = spans.find((s) => s.operationName === 'ShouldRateLimit Execution')!;
      expect(server.operationName).toBe(
        'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      );
      expect(execution.traceID).toBe(traceId);
      expect(parentOf(server)).toBe(callerSpan);
      expect(parentOf(execution)).toBe(server.spanID);
      expect(tag(execution, 'domain')).toBe('traced');
      expect(tag(execution, 'request string')).toBe(
        'domain:"traced" descriptors:{entries:{key:"api_key" value:"k"}}',
      );
    });
  }

  it('continues a B3 trace (multi-header and single b3 header)', async () => {
    const { app, address } = await start('http');
    const multi = { trace: hex(16), span: hex(8) };
    const single = { trace: hex(16), span: hex(8) };
    await callWith(address, {
      'x-b3-traceid': multi.trace,
      'x-b3-spanid': multi.span,
      'x-b3-sampled': '1',
    });
    await callWith(address, { b3: `${single.trace}-${single.span}-1` });
    await app.close();
    for (const caller of [multi, single]) {
      const spans = await spansOf(caller.trace, ['ShouldRateLimit Execution']);
      const server = spans.find((s) => s.operationName.endsWith('/ShouldRateLimit'))!;
      expect(parentOf(server)).toBe(caller.span);
    }
  });

  it.skipIf(redisNeed.skip)(
    'puts "Redis Pipeline Execution" under the execution span with Redis',
    async () => {
      const redis = await startRedis(group);
      const { app, address } = await start('grpc', {
        BACKEND_TYPE: 'redis',
        REDIS_URL: redis.address,
        // The first call goes straight to Redis: listen once it answers.
        REDIS_WAIT_AT_START: 'true',
      });
      const traceId = hex(16);
      await callWith(address, { traceparent: `00-${traceId}-${hex(8)}-01` });
      await app.close();
      const spans = await spansOf(traceId, [
        'ShouldRateLimit Execution',
        'Redis Pipeline Execution',
      ]);
      const execution = spans.find((s) => s.operationName === 'ShouldRateLimit Execution')!;
      const store = spans.find((s) => s.operationName === 'Redis Pipeline Execution')!;
      expect(parentOf(store)).toBe(execution.spanID);
      expect(tag(store, 'pipeline length')).toBe(1);
      expect(tag(store, 'perSecondPipeline length')).toBe(0);
    },
  );

  it.skipIf(redisNeed.skip)(
    'gives REDIS_MODE=cached no "Redis Pipeline Execution": its calls do not reach Redis',
    async () => {
      const redis = await startRedis(group);
      const { app, address } = await start('grpc', {
        BACKEND_TYPE: 'redis',
        REDIS_URL: redis.address,
        REDIS_MODE: 'cached',
        REDIS_WAIT_AT_START: 'true',
      });
      const traceId = hex(16);
      await callWith(address, { traceparent: `00-${traceId}-${hex(8)}-01` });
      await app.close();
      // The call's spans are exported together at the close: once its execution span is there,
      // a store span would be too.
      const spans = await spansOf(traceId, ['ShouldRateLimit Execution']);
      expect(spans.map((s) => s.operationName)).not.toContain('Redis Pipeline Execution');
    },
  );

  it('samples nothing the caller marked unsampled, at TRACING_SAMPLING_RATE 1', async () => {
    const { app, address } = await start('http');
    const unsampled = hex(16);
    const sampled = hex(16);
    await callWith(address, { traceparent: `00-${unsampled}-${hex(8)}-00` });
    await callWith(address, { traceparent: `00-${sampled}-${hex(8)}-01` });
    await app.close();
    // The sampled call's spans arrive; the unsampled one's, sent before it, never do.
    await spansOf(sampled, ['ShouldRateLimit Execution']);
    expect(await jaeger.trace(unsampled)).toEqual([]);
  });
});

describe('tracing off loads no OpenTelemetry code', () => {
  const group = useProcessGroup();
  // Building dist/ can take a while on a busy machine; it runs once per process.
  beforeAll(() => ensureBuilt(), 180_000);

  it('resolves no @opentelemetry module unless TRACING_ENABLED=true', async () => {
    // A module resolve hook in the sluice process that reports every @opentelemetry import.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-otel-hook-'));
    const hook = path.join(dir, 'hook.mjs');
    await writeFile(
      hook,
      `export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@opentelemetry/')) process.stderr.write('RESOLVED ' + specifier + '\\n');
  return next(specifier, context);
}
`,
    );
    const register = path.join(dir, 'register.mjs');
    await writeFile(
      register,
      `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hook}`)});\n`,
    );
    const run = async (tracing: string): Promise<string> => {
      const sluice = await startSluice(group, {
        grpcPort: await freePort(),
        env: {
          NODE_OPTIONS: `--import ${register}`,
          USE_STATSD: 'false',
          TRACING_ENABLED: tracing,
          // Nothing listens there; no call is made, so nothing is exported.
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
        },
      });
      await callWith(`127.0.0.1:${sluice.grpcPort}`, {});
      const output = sluice.proc.output();
      await sluice.proc.stop();
      return output;
    };
    expect(await run('false')).not.toContain('RESOLVED @opentelemetry/');
    // The hook does see them when tracing is on.
    expect(await run('true')).toContain('RESOLVED @opentelemetry/sdk-trace');
  }, 60_000);
});
